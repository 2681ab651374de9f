import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { Buckets } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { HealthStatus } from "@sextant/proto";
import {
  DEBUG_HEADERS,
  debugTokenEnv,
  eventually,
  type FakeKubeApiServer,
  startServiceProcess,
} from "@sextant/testing";
import { LeaseElector } from "../src/leader/lease.js";
import { endpointsKey, serviceKey } from "../src/registry/keys.js";
import {
  type Obj,
  type Platform,
  setPodReady,
  startBookinfoCluster,
  startNatsWithClient,
  writeKubeconfig,
} from "./harness.js";

const logger = createLogger({ service: "test", level: "silent" });
const host = (name: string) => `${name}.default.svc.cluster.local`;

/** A discovery replica as its own process, so that it can be killed outright. */
interface Replica {
  readonly id: string;
  readonly url: string;
  readonly child: ChildProcess;
  output(): string;
  kill(signal: NodeJS.Signals): Promise<void>;
  registryz(): Promise<Obj>;
}

async function startReplica(id: string, env: Record<string, string>): Promise<Replica> {
  const replica = await startServiceProcess("discovery", {
    REPLICA_ID: id,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "warn",
    ...debugTokenEnv(),
    ...env,
  });
  const url = `http://127.0.0.1:${replica.httpPort}`;
  return {
    id,
    url,
    child: replica.child,
    output: replica.output,
    kill: replica.kill,
    registryz: async () =>
      (await (await fetch(`${url}/debug/registryz`, { headers: DEBUG_HEADERS })).json()) as Obj,
  };
}

describe("the lease", () => {
  it("makes exactly one of two electors leader, and hands over when the leader releases it", async () => {
    const client = await startNatsWithClient();
    try {
      const bucket = await client.bus.bucket(Buckets.leases);
      const electors = ["a", "b"].map(
        (identity) =>
          new LeaseElector({
            bucket,
            key: "test",
            identity,
            durationMs: 1_000,
            renewMs: 200,
            logger,
            onChange: () => {},
          }),
      );
      await Promise.all(electors.map((elector) => elector.start()));
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      assert.equal(electors.filter((elector) => elector.isLeader()).length, 1, "one leader, renewing");
      const leader = electors.find((elector) => elector.isLeader())!;
      const standby = electors.find((elector) => elector !== leader)!;
      await leader.close();
      await eventually(() => standby.isLeader(), { message: "the standby takes the released lease" });
      await standby.close();
    } finally {
      await client.close();
    }
  });
});

describe("two replicas", () => {
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let cluster: { server: FakeKubeApiServer; platform: Platform };
  const replicas: Replica[] = [];

  before(async () => {
    client = await startNatsWithClient();
    cluster = await startBookinfoCluster();
    const env = { NATS_URL: client.nats.url, KUBERNETES: "on", KUBECONFIG: writeKubeconfig(cluster.server) };
    // The defaults (10 s lease, 2 s renewal): the failover bound under test is the production one.
    replicas.push(await startReplica("replica-a", env));
    replicas.push(await startReplica("replica-b", env));
  });
  after(async () => {
    for (const replica of replicas) await replica.kill("SIGTERM");
    await cluster?.server.close();
    await client?.close();
  });

  it("has one writer; killing it hands the writing to the other within 15 s, with no update lost", async (t) => {
    const [a, b] = replicas as [Replica, Replica];
    const [za, zb] = [await a.registryz(), await b.registryz()];
    assert.equal(za.leader.leader, true, "the first replica leads");
    assert.equal(zb.leader.leader, false, "the second is a standby");
    assert.deepEqual(zb.services, za.services, "the standby computed the same registry");
    assert.doesNotMatch(
      await (await fetch(`${b.url}/metrics`)).text(),
      /sextant_discovery_kv_writes_total\{[^}]*\} [1-9]/,
      "the standby has written nothing",
    );

    await a.kill("SIGKILL");
    const killedAt = performance.now();
    // Changes while no replica writes: they must reach KV once the standby leads.
    const pod = cluster.platform.pods.find(
      (p) => p.metadata.labels.app === "reviews" && p.metadata.labels.version === "v3",
    )!;
    setPodReady(cluster.server, pod, false);
    cluster.server.delete({ apiVersion: "v1", kind: "Service", name: "ratings", namespace: "default" });

    await eventually(async () => (await b.registryz()).leader.leader === true, {
      timeoutMs: 30_000,
      intervalMs: 100,
      message: "the standby took the lease",
    });
    const tookOverAfter = (performance.now() - killedAt) / 1000;
    t.diagnostic(`failover took ${tookOverAfter.toFixed(1)} s (lease 10 s, renewal 2 s)`);
    await eventually(
      async () => {
        const [services, endpoints] = await Promise.all([client.services(), client.endpoints()]);
        const reviews = endpoints.get(endpointsKey("default", host("reviews"), "kubernetes/Kubernetes"));
        return (
          !services.has(serviceKey("default", host("ratings"))) &&
          reviews?.endpoints.find((e) => e.address === pod.status.podIP)?.health ===
            HealthStatus.HEALTH_STATUS_UNHEALTHY
        );
      },
      { timeoutMs: 30_000, message: "the new leader wrote what changed while no one led" },
    );
    // And it keeps following changes.
    setPodReady(cluster.server, pod, true);
    await eventually(
      async () =>
        (await client.endpoints())
          .get(endpointsKey("default", host("reviews"), "kubernetes/Kubernetes"))
          ?.endpoints.find((e) => e.address === pod.status.podIP)?.health ===
        HealthStatus.HEALTH_STATUS_HEALTHY,
      { message: "the new leader follows later changes" },
    );
  });
});
