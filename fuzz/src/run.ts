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
// Resolved here: an eval'd worker resolves bare specifiers from the working directory.
const TSX_API_URL = import.meta.resolve("tsx/esm/api");

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
  /** The harness's own tests: a module exporting `target`, its seeds, and how many of them warm up (all by default). */
  fixture?: { module: URL; seeds: Uint8Array[]; warmup?: number };
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
  /** Inputs that ran past the limit once but not again in a warm worker (a cold start, a busy machine). */
  slow: number;
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
 * Inputs of the corpus run first, in a cold worker: the first Istio kind
 * validated or the first xDS type generated compiles code and schemas, which
 * on a loaded machine can take longer than the limit. They get this one.
 */
const WARMUP_TIMEOUT_MS = 30_000;

/**
 * Runs one target: the corpus, then mutants of it, in a worker. A watchdog
 * ends the worker if one input runs past the time limit; an exception that
 * is not one of the target's refusals ends the run with fast-check's
 * smallest failing input. A hang counts only if the input hangs again in a
 * worker warmed up by the corpus; if it does not (a cold start or a busy
 * machine), fuzzing goes on from the next seed. A failing input is written
 * under fuzz/crashes/.
 */
export async function fuzz(target: TargetName, options: FuzzOptions): Promise<FuzzResult> {
  const timeoutMs = options.timeoutMs ?? INPUT_TIMEOUT_MS;
  const seeds = options.fixture?.seeds ?? readCorpus(target);
  const warmup = options.fixture?.warmup ?? seeds.length;
  const base = {
    target,
    ...(options.fixture ? { module: options.fixture.module.href } : {}),
  };
  const deadline = options.seconds !== undefined ? Date.now() + options.seconds * 1000 : undefined;
  let seed = options.seed;
  let mutantsLeft = options.runs;
  let runs = 0;
  let refused = 0;
  let slow = 0;
  for (;;) {
    const seconds = deadline !== undefined ? Math.max(1, (deadline - Date.now()) / 1000) : undefined;
    const result = await runWorker(
      { ...base, seeds, warmup, runs: mutantsLeft, seed, ...(seconds ? { seconds } : {}) },
      timeoutMs,
    );
    runs += result.runs;
    refused += result.refused;
    let failure = result.failure;
    if (failure?.kind === "hang") {
      const again = await runWorker(
        { ...base, seeds: [...seeds, failure.input], warmup, runs: 0, seed },
        timeoutMs,
      );
      failure = again.failure;
      if (!failure) {
        slow++;
        seed++;
        mutantsLeft = Math.max(0, mutantsLeft - Math.max(0, result.runs - seeds.length));
        if (mutantsLeft > 0 && (deadline === undefined || Date.now() < deadline)) continue;
      }
    }
    if (!failure) return { target, runs, refused, slow };
    const file = saveFailure(options.fixture ? "fixture" : target, failure.kind, failure.input);
    return { target, runs, refused, slow, failure: { ...failure, file } };
  }
}

/** One worker's run; the watchdog's limit is WARMUP_TIMEOUT_MS for the first `warmup` inputs. */
function runWorker(
  workerData: WorkerInput,
  timeoutMs: number,
): Promise<{ runs: number; refused: number; failure?: Omit<FuzzFailure, "file"> }> {
  // tsx's loader is registered per thread: the worker registers it before importing its TypeScript.
  const worker = new Worker(
    `import(${JSON.stringify(TSX_API_URL)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER_URL)}); });`,
    { eval: true, workerData },
  );
  return new Promise((resolve) => {
    let runs = 0;
    let current: Uint8Array | undefined;
    let limit = WARMUP_TIMEOUT_MS;
    let startedAt = 0;
    let settled = false;
    const finish = (result: { runs: number; refused: number; failure?: Omit<FuzzFailure, "file"> }) => {
      if (settled) return;
      settled = true;
      clearInterval(watchdog);
      void worker.terminate();
      resolve(result);
    };
    const fail = (kind: FuzzFailure["kind"], message: string, input: Uint8Array) =>
      finish({ runs, refused: 0, failure: { kind, message, input } });
    const watchdog = setInterval(
      () => {
        if (current && performance.now() - startedAt > limit)
          fail("hang", `an input ran longer than ${limit} ms`, current);
      },
      Math.min(100, timeoutMs / 4),
    );
    worker.on("message", (message: WorkerMessage) => {
      if (message.type === "input") {
        runs++;
        current = message.input;
        limit = runs > workerData.warmup ? timeoutMs : Math.max(timeoutMs, WARMUP_TIMEOUT_MS);
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
