// The chaos suite: one mesh as the demo runs it (a 3-node JetStream cluster
// with R3 buckets, two push and two discovery replicas, ca, webhook, ingest;
// proxyless gRPC clients and servers, each with its agent, over mTLS with
// short-lived certificates), calls flowing at a fixed rate all along, and
// one fault after another. Each fault is a row of RELIABILITY.md's table:
// calls failed, config lost, when a change made during or after the fault
// reached every client, and when every agent had a new certificate.
// Times are recorded and printed, never asserted; the goals are.
//
// The durations here are short, to fit `npm test`; CHAOS_FULL=1 (the
// package's `chaos` script) runs the figures: a 20 s SIGSTOP, a 30 s
// partition, 10 s outages. CHAOS_TABLE_FILE=<path> also writes the table there.
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { grpcRegistrationYaml } from "@sextant/bookinfo";
import { DEBUG_HEADERS, debugTokenEnv, eventually, type NatsClusterFixture } from "@sextant/testing";
import { startTcpBalancer, type TcpBalancer } from "../src/balancer.js";
import {
  CallRecorder,
  type ChaosRow,
  ConfigLedger,
  certificateSerial,
  chaosTable,
  isFailure,
  killNatsNode,
  natsClusterHealthy,
  selfSignedTls,
  startChaosNatsCluster,
} from "../src/chaos.js";
import { STRICT_MTLS } from "../src/mesh-config.js";
import {
  type Account,
  type Agent,
  type SecureMesh,
  startSecureMesh,
  versionedAgent,
} from "../src/secure-mesh.js";

const FULL = process.env.CHAOS_FULL === "1";
/** How long a killed process or nats-server stays down before it is started again. */
const DOWN_MS = FULL ? 10_000 : 3_000;
const PAUSE_MS = FULL ? 20_000 : 5_000;
const PARTITION_MS = FULL ? 30_000 : 5_000;
/**
 * Each agent's certificate lifetime, and the share of it left when it is
 * renewed (counted, as istio-agent does, from when the agent received it):
 * a renewal 10 s after each issue, so every row sees real, scheduled
 * renewals, while a certificate still outlives the longest CA outage here.
 */
const SECRET_TTL = "80s";
const SECRET_GRACE_PERIOD_RATIO = "0.875";
const CALL_INTERVAL_MS = 100;

const REVIEWS = "reviews.default.svc.cluster.local";
const TARGET = `xds:///${REVIEWS}:9080`;
const account = (serviceAccount: string): Account => ({ namespace: "default", serviceAccount });
const productpage = account("productpage");
const ratings = account("ratings");
const reviews = account("reviews");

const ROUTING = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: ${REVIEWS}
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`;
const routeTo = (version: string) => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [${REVIEWS}]
  http:
  - route:
    - destination: {host: ${REVIEWS}, subset: ${version}}
`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** A fault: what it breaks, for how long, and when the suite's config change goes in. */
interface Fault {
  name: string;
  /** Apply the change while the fault lasts (otherwise once it is over). */
  changeDuring: boolean;
  /** The one fault whose goal is not zero failed calls. */
  callsMayFail?: boolean;
  holdMs: number;
  inject(): Promise<void>;
  /** Ends the fault; may return a note for the table. */
  heal(): Promise<string | undefined>;
}

describe("chaos: faults in the control plane under steady traffic", () => {
  let cluster: NatsClusterFixture;
  let mesh: SecureMesh;
  /** Push's way to NATS, one proxy per replica: the partition cuts them. */
  const natsProxies: TcpBalancer[] = [];
  let natsCut = false;
  /** The agents' way to push: a Service over both replicas. */
  let xdsBalancer: TcpBalancer;
  const agents: Agent[] = [];
  let tls: ReturnType<typeof selfSignedTls> | undefined;
  let recorder: CallRecorder;
  let ledger: ConfigLedger;
  let version = "v1";
  const rows: ChaosRow[] = [];

  before(async () => {
    cluster = await startChaosNatsCluster();
    const natsPorts = () => (natsCut ? [] : cluster.nodes.map((node) => node.port));
    for (let replica = 0; replica < 2; replica++) natsProxies.push(await startTcpBalancer(natsPorts));
    tls = selfSignedTls();
    mesh = await startSecureMesh([productpage, ratings, reviews], {
      natsUrl: cluster.url,
      pushNatsUrl: (replica) => `nats://127.0.0.1:${natsProxies[replica]?.port}`,
      pushReplicas: 2,
      discoveryReplicas: 2,
      // The debug token for discovery's /debug/registryz (the leader) and push's /debug/syncz (whose proxies).
      serviceEnv: { NATS_KV_REPLICAS: "3", ...debugTokenEnv() },
      webhookTls: { certFile: tls.certFile, keyFile: tls.keyFile },
    });
    // The first replica that accepts: a killed one refuses, so its agents move to the other.
    const xdsPorts = mesh.xdsTlsAddresses.map((address) => Number(address.split(":")[1]));
    xdsBalancer = await startTcpBalancer(() => xdsPorts);
    ledger = new ConfigLedger(() => `http://127.0.0.1:${mesh.ingest.httpPort}`);
    const registration = grpcRegistrationYaml(REVIEWS, "10.96.0.30", [
      { name: "reviews-v1", address: "127.0.0.51", port: 19093, version: "v1", serviceAccount: "reviews" },
      { name: "reviews-v2", address: "127.0.0.52", port: 19094, version: "v2", serviceAccount: "reviews" },
    ]);
    for (const yaml of [registration, STRICT_MTLS, ROUTING, routeTo(version)])
      assert.ok(await ledger.apply(yaml), "ingest refused the mesh's config");
    const agentOf = async (app: string, version: string, who: Account, ip: string) => {
      const agent = await mesh.startAgent({
        ...versionedAgent(app, version, who, ip),
        secretTtl: SECRET_TTL,
        env: { XDS_ADDR: `127.0.0.1:${xdsBalancer.port}`, SECRET_GRACE_PERIOD_RATIO },
      });
      agents.push(agent);
      return agent;
    };
    for (const [version, ip, port] of [
      ["v1", "127.0.0.51", 19093],
      ["v2", "127.0.0.52", 19094],
    ] as const)
      await mesh.startWorkload({
        role: "server",
        name: `reviews-${version}`,
        agent: await agentOf("reviews", version, reviews, ip),
        address: `${ip}:${port}`,
      });
    const clients = new Map([
      [
        "productpage",
        await mesh.startWorkload({
          role: "client",
          name: "productpage",
          agent: await agentOf("productpage", "v1", productpage, "127.0.0.53"),
        }),
      ],
      [
        "ratings",
        await mesh.startWorkload({
          role: "client",
          name: "ratings",
          agent: await agentOf("ratings", "v1", ratings, "127.0.0.54"),
        }),
      ],
    ]);
    for (const [name, client] of clients)
      await eventually(async () => (await client.tally(TARGET, 1)).counts["reviews-v1"] === 1, {
        timeoutMs: 60_000,
        message: `${name} never reached reviews-v1`,
      });
    recorder = new CallRecorder(clients, TARGET, CALL_INTERVAL_MS);
    recorder.start();
  });

  after(async () => {
    await recorder?.stop();
    const table = chaosTable(rows);
    console.log(`\nchaos (${FULL ? "full" : "short"} durations):\n${table}\n`);
    if (process.env.CHAOS_TABLE_FILE) writeFileSync(process.env.CHAOS_TABLE_FILE, `${table}\n`);
    await mesh?.close();
    await xdsBalancer?.close();
    for (const proxy of natsProxies) await proxy.close();
    await cluster?.dispose();
    if (tls) rmSync(tls.dir, { recursive: true, force: true });
  });

  /** Applies the next routing (v1 <-> v2), retrying while ingest or NATS is away; when it was stored. */
  const change = async (): Promise<{ answer: string; storedAt: number }> => {
    version = version === "v1" ? "v2" : "v1";
    const yaml = routeTo(version);
    await eventually(() => ledger.apply(yaml), {
      timeoutMs: 90_000,
      intervalMs: 200,
      message: "ingest never stored the change",
    });
    return { answer: `reviews-${version}`, storedAt: Date.now() };
  };

  /** Runs a fault under traffic and checks its goals; the row goes to the table either way. */
  const run = async (fault: Fault) => {
    const from = Date.now();
    await fault.inject();
    const injected = Date.now();
    let changed: { answer: string; storedAt: number } | undefined;
    try {
      if (fault.changeDuring) {
        await sleep(Math.min(1_000, fault.holdMs / 4));
        changed = await change();
      }
      await sleep(injected + fault.holdMs - Date.now());
    } catch (error) {
      // The faults after this one need the mesh whole again (a paused push resumed, NATS back).
      await fault.heal();
      throw error;
    }
    const note = (await fault.heal()) ?? "";
    const healed = Date.now();
    const serials = agents.map((agent) => certificateSerial(agent.certDir));
    changed ??= await change();
    const { answer, storedAt } = changed;
    const served = await eventually(() => recorder.servedSince(answer, storedAt), {
      timeoutMs: 120_000,
      intervalMs: 100,
      message: `the change (${answer}) never reached every client after ${fault.name}`,
    });
    await eventually(
      () => agents.every((agent, index) => certificateSerial(agent.certDir) !== serials[index]),
      {
        timeoutMs: 120_000,
        intervalMs: 100,
        message: `not every agent renewed its certificate after ${fault.name}`,
      },
    );
    const renewed = Date.now();
    const lost = await eventually(() => ledger.lost(), {
      timeoutMs: 30_000,
      message: "GET /v1/config failed",
    });
    const calls = recorder.between(from, Date.now());
    const failures = calls.filter(isFailure);
    const row: ChaosRow = {
      fault: fault.name,
      downSeconds: (healed - injected) / 1000,
      calls: calls.length,
      failed: failures.length,
      configLost: lost.length,
      changeApplied: fault.changeDuring ? "during" : "after",
      servedAfterSeconds: (served - storedAt) / 1000,
      certsRenewedAfterSeconds: (renewed - healed) / 1000,
      note,
    };
    rows.push(row);
    console.log(JSON.stringify(row));
    assert.deepEqual(lost, [], `config lost after ${fault.name}`);
    if (!fault.callsMayFail)
      assert.deepEqual(
        failures.slice(0, 10).map((call) => `${call.client}: ${call.answer}`),
        [],
        `${failures.length} of ${calls.length} calls failed during ${fault.name}`,
      );
  };

  /** kill -9 a control-plane process, keep it down for DOWN_MS, start it again. */
  const killAndRestart = (
    name: string,
    pick: () => SecureMesh["ingest"],
    options: { changeDuring: boolean; note?: () => Promise<string> },
  ): Fault => {
    let victim: SecureMesh["ingest"];
    let note: Promise<string> | undefined;
    return {
      name,
      changeDuring: options.changeDuring,
      holdMs: DOWN_MS,
      async inject() {
        victim = pick();
        await victim.kill("SIGKILL");
        note = options.note?.();
      },
      async heal() {
        await mesh.restart(victim);
        return note;
      },
    };
  };

  const leaderIndex = async (): Promise<number> => {
    for (const [index, discovery] of mesh.discoveries.entries()) {
      const registryz = await fetch(`http://127.0.0.1:${discovery.httpPort}/debug/registryz`, {
        headers: DEBUG_HEADERS,
      }).then(
        async (response) =>
          response.ok ? ((await response.json()) as { leader?: { leader?: boolean } }) : {},
        () => ({}) as { leader?: { leader?: boolean } },
      );
      if (registryz.leader?.leader) return index;
    }
    return -1;
  };

  /** Whether push's /debug/syncz lists the productpage client's proxy. */
  const servesClients = async (push: SecureMesh["push"]) => {
    const syncz = (await (
      await fetch(`http://127.0.0.1:${push.httpPort}/debug/syncz`, { headers: DEBUG_HEADERS })
    ).json()) as Array<{ proxyId: string }>;
    return syncz.some((proxy) => proxy.proxyId.includes("productpage-v1-0"));
  };

  /** The push replica the client workloads' ADS streams are on. */
  const servingPush = async () => {
    for (const push of mesh.pushes) if (await servesClients(push)) return push;
    assert.fail("no push replica serves the clients");
  };

  it("kill -9 ingest, then restart it", () =>
    run(killAndRestart("kill -9 ingest", () => mesh.ingest, { changeDuring: false })));

  it("kill -9 the discovery leader, then restart it", async () => {
    // eventually() wants a truthy value, and the leader's index may be 0.
    const { leader } = await eventually(
      async () => {
        const index = await leaderIndex();
        return index >= 0 ? { leader: index } : undefined;
      },
      { timeoutMs: 30_000, message: "no discovery replica leads" },
    );
    await run(
      killAndRestart("kill -9 the discovery leader", () => mesh.discoveries[leader]!, {
        changeDuring: true,
        note: async () => {
          const killed = Date.now();
          await eventually(async () => (await leaderIndex()) >= 0, { timeoutMs: 60_000, intervalMs: 200 });
          return `a leader again after ${((Date.now() - killed) / 1000).toFixed(1)} s`;
        },
      }),
    );
    assert.ok((await leaderIndex()) >= 0, "no discovery leader afterwards");
  });

  it("kill -9 the push replica serving the agents, then restart it", async () => {
    const serving = await servingPush();
    await run(killAndRestart("kill -9 a push replica (of 2)", () => serving, { changeDuring: true }));
  });

  it("kill -9 ca, then restart it", () =>
    run(killAndRestart("kill -9 ca", () => mesh.ca, { changeDuring: true })));

  it("kill -9 webhook, then restart it", () =>
    run(killAndRestart("kill -9 webhook", () => mesh.webhook!, { changeDuring: true })));

  it("SIGSTOP the push replica serving the agents, then SIGCONT", async () => {
    const serving = await servingPush();
    await run({
      name: `SIGSTOP a push replica ${PAUSE_MS / 1000} s`,
      changeDuring: true,
      holdMs: PAUSE_MS,
      async inject() {
        serving.child.kill("SIGSTOP");
      },
      async heal() {
        // Asked of the other replica, while this one cannot answer: did the agents' keepalive move them?
        const other = mesh.pushes.find((push) => push !== serving)!;
        const moved = await servesClients(other);
        serving.child.kill("SIGCONT");
        return moved ? "the clients' agents were on the other replica before SIGCONT" : "";
      },
    });
  });

  it("partition: push replicas cut off from NATS while a change is applied", () =>
    run({
      name: `partition push -> NATS ${PARTITION_MS / 1000} s`,
      changeDuring: true,
      holdMs: PARTITION_MS,
      async inject() {
        natsCut = true;
        for (const proxy of natsProxies) proxy.disconnect();
      },
      async heal() {
        natsCut = false;
        return undefined;
      },
    }));

  it("kill -9 one nats-server of three, then restart it", () => {
    const node = cluster.nodes[0]!;
    return run({
      name: "kill -9 one nats-server (of 3)",
      changeDuring: true,
      holdMs: DOWN_MS,
      inject: () => killNatsNode(node),
      async heal() {
        await node.start();
        await natsClusterHealthy(cluster);
        return undefined;
      },
    });
  });

  it("kill -9 the whole NATS cluster, then restart it", () =>
    run({
      name: "kill -9 all three nats-servers",
      changeDuring: false,
      callsMayFail: true,
      holdMs: DOWN_MS,
      async inject() {
        await Promise.all(cluster.nodes.map((node) => killNatsNode(node)));
      },
      async heal() {
        await Promise.all(cluster.nodes.map((node) => node.start()));
        await natsClusterHealthy(cluster);
        return undefined;
      },
    }));
});
