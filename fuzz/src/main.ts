// pnpm --filter @sextant/fuzz fuzz:long [seconds per target] [target...]:
// each target for longer than `npm test` does, from a random seed (or
// FUZZ_SEED). Exits 1 if any target failed; the failing inputs are under
// fuzz/crashes/.
import { fuzz } from "./run.js";
import { TARGET_NAMES, type TargetName } from "./target.js";

const [secondsArg, ...names] = process.argv.slice(2);
const seconds = Number(secondsArg ?? 60);
const targets = names.length > 0 ? (names as TargetName[]) : TARGET_NAMES;
for (const name of targets) if (!TARGET_NAMES.includes(name)) throw new Error(`no fuzz target ${name}`);

let failed = false;
for (const target of targets) {
  const seed = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const result = await fuzz(target, { runs: Number.MAX_SAFE_INTEGER, seconds, seed });
  if (result.failure) {
    failed = true;
    console.log(
      `${target}: ${result.failure.kind} after ${result.runs} inputs (seed ${seed}): ${result.failure.file}`,
    );
    console.log(result.failure.message);
  } else {
    console.log(
      `${target}: ${result.runs} inputs in ${seconds} s (${result.refused} refused, ${result.slow} slow once but not again), no failure (seed ${seed})`,
    );
  }
}
process.exit(failed ? 1 : 0);
