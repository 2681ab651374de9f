// One target's fuzzing loop, in a worker thread so that the parent can end it
// when an input hangs (a synchronous loop cannot be interrupted from inside).
import { parentPort, workerData } from "node:worker_threads";
import fc from "fast-check";
import { mutants } from "./mutate.js";
import { type FuzzTarget, TARGETS, type TargetName } from "./target.js";

/** What the parent passes. */
export interface WorkerInput {
  target: TargetName;
  /** A module exporting `target` to run instead of the named one (the harness's own tests). */
  module?: string;
  seeds: Uint8Array[];
  /** How many of the seeds (the first ones) warm the worker up, under a longer time limit. */
  warmup: number;
  /** Mutants to try after the seeds, unless `seconds` ends the run first. */
  runs: number;
  seconds?: number;
  seed: number;
}

/** What the worker reports: each input before it runs and once it returned, then the outcome. */
export type WorkerMessage =
  | { type: "input"; input: Uint8Array }
  | { type: "ran" }
  | { type: "done"; runs: number; refused: number; failure?: { message: string; input: Uint8Array } };

const options = workerData as WorkerInput;
const port = parentPort!;
const post = (message: WorkerMessage) => port.postMessage(message);

const { target } = (options.module ? await import(options.module) : await TARGETS[options.target]()) as {
  target: FuzzTarget;
};
await target.setup?.();

// A process warning while an input runs (the yaml library's "keys with
// collection values will be stringified", a listener leak) is a failure of
// that input: caught as it is emitted, so that it is the right input's.
let warnings: string[] = [];
process.emitWarning = ((warning: string | Error) => {
  warnings.push(typeof warning === "string" ? warning : warning.message);
}) as typeof process.emitWarning;

let ran = 0;
let refused = 0;
const property = fc.asyncProperty(mutants(options.seeds, target.tokens), async (input) => {
  ran++;
  post({ type: "input", input });
  warnings = [];
  try {
    await target.run(input);
    if (warnings.length > 0) throw new Error(`a process warning: ${warnings[0]}`);
  } catch (error) {
    if (!target.refusal(error)) throw error;
    refused++;
  } finally {
    post({ type: "ran" });
  }
});
const details = await fc.check(property, {
  seed: options.seed,
  // fast-check counts the examples among numRuns.
  numRuns: options.seeds.length + options.runs,
  // The corpus first, unmutated: each seed is a regression input.
  examples: options.seeds.map((seed) => [seed] as [Uint8Array]),
  ...(options.seconds !== undefined
    ? { interruptAfterTimeLimit: options.seconds * 1000, markInterruptAsFailure: false }
    : {}),
});
// An exception the last input scheduled (a timer, an immediate) ends the worker before it reports success.
await new Promise((resolve) => setTimeout(resolve, 10));
if (details.failed && details.counterexample) {
  const error = details.errorInstance;
  const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
  post({ type: "done", runs: ran, refused, failure: { message, input: details.counterexample[0] } });
} else {
  post({ type: "done", runs: ran, refused });
}
