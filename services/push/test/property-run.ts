// The long run of the property test (issue 18):
//   NUM_RUNS=5000 SEED=42 OUT=/tmp/cx pnpm --filter @sextant/push run property
// runs NUM_RUNS random cases (default 1000; SEED default random, REPLAY_PATH to
// replay one failure as property.test.ts prints it), sorts the violations
// found into classes (same type, field path and rule; or same dangling
// reference; or same exception), shrinks one case of each class to a minimal
// one, and prints a table: cases run, violations, classes, time. With OUT,
// each class's minimal case is written there as golden-input YAML.
// REPLAY_FILES="a.yaml b.yaml" checks such files instead (after minimising
// one by hand, or to see whether a fix removed its violations).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { type Scenario, scenarioArb } from "./arbitraries.js";
import { envoyCodecs } from "./golden-inputs.js";
import { checkScenario, configProblems, scenarioFromYaml, scenarioYaml } from "./property-harness.js";

/** A violation without its names and numbers: what stays the same across cases of one bug. */
function violationClass(kind: Scenario["kind"], violation: string): string {
  const generic = (text: string) =>
    text
      .replace(/\[\d+\]/g, "[]")
      .replace(/"[^"]*"/g, '"…"')
      .replace(/\([^)]*\)/g, "(…)")
      .replace(/(domain|of) [^\s]+/g, "$1 …")
      .replace(/(?<![A-Za-z])\d+/g, "N");
  const thrown = /^(\w+) generator threw: ([^\n]*)/.exec(violation);
  if (thrown) return `${kind} ${thrown[1]} threw: ${generic(thrown[2]!)}`;
  const dangling = /^(\w+) \S+ names (\w+) \S+, which does not exist$/.exec(violation);
  if (dangling) return `${kind} ${dangling[1]} name missing ${dangling[2]}`;
  const orphan = /^(\w+) \S+ is orphaned/.exec(violation);
  if (orphan) return `${kind} ${orphan[1]} orphaned`;
  const checked = /^(\w+) .*?: ([\w.[\]<>]+): (.*)$/.exec(violation);
  if (checked) return `${kind} ${checked[1]}: ${generic(checked[2]!)}: ${generic(checked[3]!)}`;
  return `${kind} ${generic(violation)}`;
}

const classesOf = (scenario: Scenario, violations: readonly string[]) =>
  new Set(violations.map((v) => violationClass(scenario.kind, v)));

/** Checks the given case files (REPLAY_FILES, space-separated) instead of random cases. */
async function replayFiles(files: string[]): Promise<void> {
  const codecs = await envoyCodecs();
  for (const file of files) {
    const scenario = scenarioFromYaml(readFileSync(file, "utf8"));
    const problems = configProblems(scenario);
    const violations = problems.length > 0 ? problems : checkScenario(scenario, codecs).violations;
    console.log(
      `${file}: ${violations.length} ${problems.length > 0 ? "validation error(s)" : "violation(s)"}`,
    );
    for (const v of violations) console.log(`  ${v.split("\n")[0]}`);
    if (violations.length > 0) process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  const numRuns = Number(process.env.NUM_RUNS ?? 1000);
  const seed =
    process.env.SEED === undefined ? Date.now() ^ (Math.random() * 0x100000000) : Number(process.env.SEED);
  const path = process.env.REPLAY_PATH;
  const out = process.env.OUT;
  const codecs = await envoyCodecs();
  const started = performance.now();

  let cases = 0;
  let invalid = 0;
  let violations = 0;
  let resources = 0;
  const classes = new Map<string, { count: number; example: string; index: number }>();
  fc.assert(
    fc.property(scenarioArb, (scenario) => {
      const index = cases++;
      if (configProblems(scenario).length > 0) {
        invalid++;
        return;
      }
      const result = checkScenario(scenario, codecs);
      resources += Object.values(result.counts).reduce((a, b) => a + b, 0);
      violations += result.violations.length;
      for (const v of result.violations) {
        const name = violationClass(scenario.kind, v);
        const entry = classes.get(name) ?? { count: 0, example: v.split("\n")[0]!, index };
        entry.count++;
        classes.set(name, entry);
      }
    }),
    { numRuns, seed, ...(path ? { path } : {}) },
  );
  const elapsed = (performance.now() - started) / 1000;

  console.log(`seed ${seed}`);
  console.table({
    "cases run": cases,
    "invalid configs (arbitrary bugs)": invalid,
    "resources generated": resources,
    "violations found": violations,
    "violation classes": classes.size,
    "time (s)": Number(elapsed.toFixed(1)),
  });
  if (classes.size === 0) return;

  // Each class shrunk on its own: the same seed replays the same cases, and the property fails only on that class.
  if (out) mkdirSync(out, { recursive: true });
  let n = 0;
  for (const [name, { count, example, index }] of [...classes].sort((a, b) => b[1].count - a[1].count)) {
    n++;
    const details = fc.check(
      fc.property(
        scenarioArb,
        (scenario) => !classesOf(scenario, checkScenario(scenario, codecs).violations).has(name),
      ),
      { numRuns: index + 1, seed, ...(path ? { path } : {}) },
    );
    console.log(`\n#${n} ${name}  (${count} violation(s))\n  e.g. ${example}`);
    const minimal = details.counterexample?.[0];
    if (!minimal) continue;
    const found = checkScenario(minimal, codecs).violations.filter(
      (v) => violationClass(minimal.kind, v) === name,
    );
    console.log(`  minimal: ${found[0]?.split("\n")[0]}`);
    if (out) {
      const file = join(out, `class-${n}.yaml`);
      writeFileSync(file, `# ${name}\n# ${found.join("\n# ")}\n${scenarioYaml(minimal)}`);
      console.log(`  written: ${file}`);
    }
  }
  process.exitCode = 1;
}

const files = process.env.REPLAY_FILES?.split(/\s+/).filter(Boolean);
await (files ? replayFiles(files) : main());
