// Property-based generation (issue 18): random Istio config that
// @sextant/validation accepts, over a random registry (test/arbitraries.ts),
// through every generator for a random proxy of the registry, Envoy sidecar
// or proxyless gRPC, must give a snapshot the xDS checker (xds-checks.ts)
// and the consistency check find nothing wrong with. `npm test` runs one
// fixed seed (PROPERTY_SEED overrides it): the suite decides whether a
// change lands, so it must give the same answer on every run; exploring new
// cases with random seeds is the long run's job, `pnpm --filter
// @sextant/push run property` (test/property-run.ts), whose finds become
// golden cases. A failure prints the seed, the path to replay it, and the
// shrunk case as a golden-input YAML.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import fc from "fast-check";
import { scenarioArb } from "./arbitraries.js";
import { envoyCodecs } from "./golden-inputs.js";
import {
  checkScenario,
  configProblems,
  failureReport,
  scenarioFromYaml,
  scenarioYaml,
} from "./property-harness.js";

/** Cases per `npm test` run: enough to cover every arbitrary, few enough for well under a minute on 2 cores. */
const NUM_RUNS = 200;
/** A bound on the run and its shrinking together, so that a slow shrink cannot hold `npm test` past a minute. */
const TIME_LIMIT_MS = 45_000;
/** The seed of every property here (see the top of the file). */
const SEED = Number(process.env.PROPERTY_SEED ?? 20261201);

describe("property: random valid config through every generator", () => {
  it("generates only config that @sextant/validation accepts", () => {
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        const problems = configProblems(scenario);
        assert.deepEqual(problems, [], `invalid config generated:\n${scenarioYaml(scenario)}`);
      }),
      { numRuns: NUM_RUNS * 2, seed: SEED },
    );
  });

  it("gives every proxy a snapshot with no violation, for Envoy and proxyless gRPC", async () => {
    const codecs = await envoyCodecs();
    const details = fc.check(
      fc.property(scenarioArb, (scenario) => {
        assert.deepEqual(configProblems(scenario), []);
        const { violations } = checkScenario(scenario, codecs);
        assert.deepEqual(violations, []);
      }),
      { numRuns: NUM_RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS, seed: SEED },
    );
    if (details.failed) assert.fail(failureReport(details, codecs));
  });

  it("reproduces a case from its YAML, so that a counter-example's file shows the same violations", async () => {
    const codecs = await envoyCodecs();
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        const replayed = scenarioFromYaml(scenarioYaml(scenario));
        assert.deepEqual(checkScenario(replayed, codecs), checkScenario(scenario, codecs));
      }),
      { numRuns: 25, seed: SEED },
    );
  });

  it("finds nothing wrong in any counter-example found before (test/property-counterexamples)", async () => {
    // Each file is a case an earlier long run shrank to one bug; once fixed it stays here so it cannot come back.
    const codecs = await envoyCodecs();
    const dir = fileURLToPath(new URL("./property-counterexamples", import.meta.url));
    const files = readdirSync(dir).filter((file) => file.endsWith(".yaml"));
    assert.ok(files.length > 0, `no counter-examples in ${dir}`);
    for (const file of files) {
      const scenario = scenarioFromYaml(readFileSync(`${dir}/${file}`, "utf8"));
      assert.deepEqual(configProblems(scenario), [], `${file}: its config no longer passes validation`);
      assert.deepEqual(checkScenario(scenario, codecs).violations, [], file);
    }
  });
});
