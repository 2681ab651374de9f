// compose.yaml brought up for real with testcontainers' compose support:
// the images build, the control plane becomes healthy, and a proxyless
// productpage reaches reviews through push, over mTLS from the agents. Where
// no Docker engine runs (this machine, for one), the suite is skipped with
// the reason; compose.test.ts checks the files statically everywhere.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DEFAULT_PORTS } from "@sextant/runtime";
import { eventually, repositoryRoot } from "@sextant/testing";
import { DockerComposeEnvironment, type StartedDockerComposeEnvironment, Wait } from "testcontainers";
import { composeEngineProblem } from "../src/compose-engine.js";

const problem = await composeEngineProblem();
const REVIEWS = "xds:///reviews.bookinfo.svc.cluster.local:9080";

describe("docker compose up", { skip: problem }, () => {
  let environment: StartedDockerComposeEnvironment | undefined;

  before(async () => {
    environment = await new DockerComposeEnvironment(repositoryRoot(), "compose.yaml")
      .withBuild()
      // Images build from scratch on a cold machine: minutes, not seconds.
      .withStartupTimeout(15 * 60_000)
      .withWaitStrategy("push-1", Wait.forHealthCheck())
      .withWaitStrategy("ca-root-1", Wait.forOneShotStartup())
      .up();
  });
  after(async () => {
    await environment?.down({ removeVolumes: true });
  });

  it("push reports ready on its published HTTP port", async () => {
    const response = await fetch(`http://127.0.0.1:${DEFAULT_PORTS.push.http}/ready`);
    assert.equal(response.status, 200, await response.text());
  });

  it("productpage's calls reach the auto-registered reviews versions through push", async () => {
    const productpage = environment?.getContainer("productpage-1");
    assert.ok(productpage);
    // The client listens on 127.0.0.1 inside its agent's network namespace: ask from there.
    const tally = async () => {
      const result = await productpage.exec([
        "node",
        "-e",
        `fetch('http://127.0.0.1:18080/tally?calls=30&target=${encodeURIComponent(REVIEWS)}').then((r) => r.text()).then(console.log)`,
      ]);
      return JSON.parse(result.output) as { counts: Record<string, number>; errors: string[] };
    };
    // Registration, routing and certificates converge after the containers are up.
    const answer = await eventually(
      async () => {
        const result = await tally().catch(() => undefined);
        return result && result.errors.length === 0 && Object.keys(result.counts).length > 0
          ? result
          : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 2_000, message: "productpage never reached reviews through push" },
    );
    for (const version of Object.keys(answer.counts)) assert.match(version, /^reviews-v[123]$/);
  });
});
