// Property-based generation (issue 18): random Istio config that
// @sextant/validation accepts, over a random registry (test/arbitraries.ts),
// through every generator for a random proxy of the registry, Envoy sidecar
// or proxyless gRPC, must give a snapshot the xDS checker (xds-checks.ts)
// and the consistency check find nothing wrong with. Each run explores new
// cases (fast-check's random seed); a failure prints the seed, the path to
// replay it, and the shrunk case as a golden-input YAML. The long run is
// `pnpm --filter @sextant/push run property` (test/property-run.ts).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
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

describe("property: random valid config through every generator", () => {
  it("generates only config that @sextant/validation accepts", () => {
    fc.assert(
      fc.property(scenarioArb, (scenario) => {
        const problems = configProblems(scenario);
        assert.deepEqual(problems, [], `invalid config generated:\n${scenarioYaml(scenario)}`);
      }),
      { numRuns: NUM_RUNS * 2 },
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
      { numRuns: NUM_RUNS, interruptAfterTimeLimit: TIME_LIMIT_MS },
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
      { numRuns: 25 },
    );
  });
});
