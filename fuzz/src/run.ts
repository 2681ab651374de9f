import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";
import type { TargetName } from "./target.js";
import type { WorkerInput, WorkerMessage } from "./worker.js";

/** fuzz/corpus: one directory of seed inputs per target. */
export const CORPUS_DIR = new URL("../corpus/", import.meta.url).pathname;
/** fuzz/crashes (not committed): each failing input, to turn into a regression test. */
export const CRASH_DIR = new URL("../crashes/", import.meta.url).pathname;

const WORKER_URL = new URL("./worker.ts", import.meta.url).href;

/** The limit: an input that takes longer is a hang. */
export const INPUT_TIMEOUT_MS = 1000;

export interface FuzzOptions {
  /** Mutants after the corpus (the bounded run of `npm test`). */
  runs: number;
  /** Ends the run after this long even if `runs` is not reached (fuzz:long). */
  seconds?: number;
  /** fast-check's seed: the same seed replays the same inputs. */
  seed: number;
  timeoutMs?: number;
  /** The harness's own tests: a module exporting `target`, and its seeds. */
  fixture?: { module: URL; seeds: Uint8Array[] };
}

export interface FuzzFailure {
  kind: "crash" | "hang";
  message: string;
  input: Uint8Array;
  /** Where the input was written. */
  file: string;
}

export interface FuzzResult {
  target: TargetName;
  /** Inputs run: the corpus, the mutants and, after a failure, fast-check's shrinking. */
  runs: number;
  /** Inputs the code under test refused with a defined error (the rest it accepted). */
  refused: number;
  failure?: FuzzFailure;
}

/** Every file of a target's corpus, in name order. */
export function readCorpus(target: TargetName): Uint8Array[] {
  const dir = join(CORPUS_DIR, target);
  return readdirSync(dir)
    .filter((name) => !name.startsWith("."))
    .sort()
    .map((name) => new Uint8Array(readFileSync(join(dir, name))));
}

/**
 * Runs one target in a worker: the corpus, then mutants of it. A watchdog
 * ends the worker if one input runs past the time limit; an exception that
 * is not one of the target's refusals ends the run with fast-check's
 * smallest failing input. Either input is written under fuzz/crashes/.
 */
export function fuzz(target: TargetName, options: FuzzOptions): Promise<FuzzResult> {
  const timeoutMs = options.timeoutMs ?? INPUT_TIMEOUT_MS;
  const workerData: WorkerInput = {
    target,
    seeds: options.fixture?.seeds ?? readCorpus(target),
    ...(options.fixture ? { module: options.fixture.module.href } : {}),
    runs: options.runs,
    seed: options.seed,
    ...(options.seconds !== undefined ? { seconds: options.seconds } : {}),
  };
  // tsx's loader is registered per thread: the worker registers it before importing its TypeScript.
  const worker = new Worker(
    `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER_URL)}); });`,
    { eval: true, workerData },
  );
  return new Promise<FuzzResult>((resolve) => {
    let runs = 0;
    let current: Uint8Array | undefined;
    let startedAt = 0;
    let settled = false;
    const finish = (result: Omit<FuzzResult, "target">) => {
      if (settled) return;
      settled = true;
      clearInterval(watchdog);
      void worker.terminate();
      resolve({ target, ...result });
    };
    const fail = (kind: FuzzFailure["kind"], message: string, input: Uint8Array) =>
      finish({
        runs,
        refused: 0,
        failure: {
          kind,
          message,
          input,
          file: saveFailure(options.fixture ? "fixture" : target, kind, input),
        },
      });
    const watchdog = setInterval(
      () => {
        if (current && performance.now() - startedAt > timeoutMs)
          fail("hang", `an input ran longer than ${timeoutMs} ms`, current);
      },
      Math.min(100, timeoutMs / 4),
    );
    worker.on("message", (message: WorkerMessage) => {
      if (message.type === "input") {
        runs++;
        current = message.input;
        startedAt = performance.now();
      } else if (message.type === "ran") {
        current = undefined;
      } else if (message.failure) {
        fail("crash", message.failure.message, message.failure.input);
      } else {
        finish({ runs: message.runs, refused: message.refused });
      }
    });
    // An exception outside the awaited call (a timer, an event handler) ends the worker.
    worker.on("error", (error) =>
      fail("crash", `uncaught: ${error.stack ?? error.message}`, current ?? new Uint8Array()),
    );
    worker.on("exit", (code) => {
      if (!settled) fail("crash", `the worker exited with code ${code}`, current ?? new Uint8Array());
    });
  });
}

function saveFailure(target: string, kind: string, input: Uint8Array): string {
  const dir = join(CRASH_DIR, target);
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${kind}-${createHash("sha1").update(input).digest("hex").slice(0, 12)}`);
  writeFileSync(file, input);
  return file;
}
