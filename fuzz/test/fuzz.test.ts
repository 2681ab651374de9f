// The bounded run `npm test` makes of every fuzz target: its committed corpus
// (the regression inputs included), then FUZZ_RUNS mutants from a fixed seed,
// so that a failure here replays. `pnpm --filter @sextant/fuzz fuzz:long`
// runs them longer from random seeds.
import assert from "node:assert/strict";
import { test } from "node:test";
import { fuzz } from "../src/run.js";
import { TARGET_NAMES } from "../src/target.js";

const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);
const SEED = Number(process.env.FUZZ_SEED ?? 24);

for (const target of TARGET_NAMES) {
  test(`${target}: the corpus and ${RUNS} mutants, each accepted or refused with a defined error`, async () => {
    const result = await fuzz(target, { runs: RUNS, seed: SEED });
    assert.equal(
      result.failure,
      undefined,
      result.failure &&
        `${result.failure.kind} (input written to ${result.failure.file}):\n${result.failure.message}`,
    );
  });
}
