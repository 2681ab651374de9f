import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Cluster, TypeUrl } from "@sextant/proto/envoy";
import { DEBUG_TOKEN, eventually } from "@sextant/testing";
import { runCli } from "./capture.js";
import { FakeProxy, grpcSubscriptions } from "./fake-proxy.js";
import { HOST, type ProxyMesh, startProxyMesh } from "./mesh.js";

/** The DestinationRule a client without mesh certificates rejects (ISTIO_MUTUAL), as gRPC does. */
const MUTUAL_DR = `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`;

/** gRPC's NACK of a cluster needing a certificate provider it does not have. */
const NACK_MESSAGE = "cluster outbound|9080||reviews: ca_certificate_provider_instance not found";

const HEARTBEAT_MS = 300;

describe("sextantctl proxy-status", () => {
  let mesh: ProxyMesh;
  let alpha: FakeProxy;
  let beta: FakeProxy;
  const cli = (...args: string[]) => runCli(["--push", mesh.pushUrls[0]!, "--token", DEBUG_TOKEN, ...args]);
  const rowOf = (table: string, name: string) =>
    table.split("\n").find((line) => line.startsWith(`${name} `)) ?? "";

  before(async () => {
    mesh = await startProxyMesh(2, HEARTBEAT_MS);
    // One proxy per replica: the table must show both, whichever replica answers.
    alpha = new FakeProxy(mesh.xdsAddresses[0]!, "alpha", grpcSubscriptions(HOST, 9080));
    beta = new FakeProxy(mesh.xdsAddresses[1]!, "beta", grpcSubscriptions(HOST, 9080));
  });
  after(async () => {
    alpha?.close();
    beta?.close();
    await mesh?.close();
  });

  it("lists every proxy of both replicas as SYNCED, with its replica and version", async () => {
    const run = await eventually(
      async () => {
        const run = await cli("proxy-status");
        return run.stdout.split("\n").filter((line) => / SYNCED .* SYNCED .* SYNCED .* SYNCED /.test(line))
          .length === 2
          ? run
          : undefined;
      },
      { timeoutMs: 30_000, message: "both proxies never showed SYNCED" },
    );
    console.log(run.stdout);
    assert.equal(run.exitCode, 0);
    const lines = run.stdout.split("\n");
    assert.match(lines[0]!, /^NAME\s+CLUSTER\s+CDS\s+LDS\s+EDS\s+RDS\s+REPLICA\s+VERSION$/);
    assert.match(
      rowOf(run.stdout, "alpha.default"),
      /^alpha\.default\s+\S+\s+(SYNCED\s+){4}push-0\s+1\.24\.0$/,
    );
    assert.match(
      rowOf(run.stdout, "beta.default"),
      /^beta\.default\s+\S+\s+(SYNCED\s+){4}push-1\s+1\.24\.0$/,
    );
  });

  it("prints the records with -o json, each naming the replica's debug address", async () => {
    const run = await cli("proxy-status", "-o", "json");
    const records = JSON.parse(run.stdout) as Array<{
      proxyId: string;
      replica: string;
      replicaDebugAddress: string;
    }>;
    assert.deepEqual(
      records.map((record) => [record.proxyId, record.replica, record.replicaDebugAddress]),
      [
        [alpha.id, "push-0", mesh.pushUrls[0]],
        [beta.id, "push-1", mesh.pushUrls[1]],
      ],
    );
  });

  it("shows a synced proxy's config matching push's, from the replica holding it", async () => {
    const run = await cli("proxy-status", "beta.default");
    assert.equal(run.exitCode, 0, run.stdout + run.stderr);
    assert.deepEqual(run.stdout.split("\n"), [
      "Clusters Match",
      "Listeners Match",
      "Endpoints Match",
      "Routes Match",
    ]);
  });

  it("shows NACKED for the proxy that rejects a DestinationRule, and STALE for one that has not answered", async () => {
    beta.policy = (response) =>
      response.typeUrl === TypeUrl.Cluster &&
      response.resources.some((any) => Cluster.decode(any.value).transportSocket)
        ? { nack: NACK_MESSAGE }
        : "ack";
    alpha.policy = (response) => (response.typeUrl === TypeUrl.Cluster ? "silent" : "ack");
    await mesh.apply(MUTUAL_DR);
    // Until both rows settle: the change's other types are ACKed (and recorded) a moment apart.
    const betaRow = /^beta\.default\s+\S+\s+NACKED\s+SYNCED\s+\S+\s+SYNCED\s+push-1/m;
    const alphaRow = /^alpha\.default\s+\S+\s+STALE\s+SYNCED\s+\S+\s+SYNCED\s+push-0/m;
    const run = await eventually(
      async () => {
        const run = await cli("proxy-status");
        return betaRow.test(run.stdout) && alphaRow.test(run.stdout) ? run : undefined;
      },
      { timeoutMs: 30_000, message: "never NACKED and STALE with the other types SYNCED" },
    );
    console.log(run.stdout);
    assert.match(rowOf(run.stdout, "beta.default"), betaRow);
    assert.match(rowOf(run.stdout, "alpha.default"), alphaRow);

    const nacked = await cli("proxy-status", "beta.default");
    console.log(nacked.stdout);
    assert.equal(nacked.exitCode, 1);
    assert.ok(
      nacked.stdout
        .split("\n")
        .some(
          (line) => line.startsWith("Clusters NACKED: version ") && line.includes(`(NACK: ${NACK_MESSAGE})`),
        ),
      nacked.stdout,
    );
    // The diff runs from what push would send (the ISTIO_MUTUAL transport socket) to what beta ACKed (none).
    assert.match(nacked.stdout, /^--- Push Clusters\n\+\+\+ Proxy Clusters\n@@ /m);
    assert.match(nacked.stdout, /^-\s+"transportSocket": \{$/m);
    assert.doesNotMatch(nacked.stdout, /^\+\s+"transportSocket"/m);
    assert.match(nacked.stdout, /^Listeners Match$/m);
    const stale = await cli("proxy-status", "alpha.default");
    assert.equal(stale.exitCode, 1);
    assert.match(stale.stdout, /^Clusters STALE: version \S+ sent, \S+ ACKed$/m);
    assert.match(stale.stdout, /^--- Push Clusters$/m);
  });

  it("shows STALE for every type of a proxy whose replica stopped heartbeating", async () => {
    await mesh.pushes[1]!.kill("SIGKILL");
    const run = await eventually(
      async () => {
        const run = await cli("proxy-status");
        return /^beta\.default\s+\S+\s+(STALE\s+){4}push-1/m.test(run.stdout) ? run : undefined;
      },
      { timeoutMs: 30_000, message: "beta never went STALE after its replica was killed" },
    );
    console.log(run.stdout);
    const diff = await cli("proxy-status", "beta.default");
    assert.equal(diff.exitCode, 1);
    assert.match(diff.stdout, /^beta\.default: STALE, replica push-1 has not written its status since /);
  });

  it("says what to do when push refuses or a proxy is unknown", async () => {
    const refused = await runCli(["--push", mesh.pushUrls[0]!, "--token", "wrong", "proxy-status"]);
    assert.equal(refused.exitCode, 1);
    assert.match(
      refused.stderr,
      /^error: push refused \/debug\/proxy_status \(401\): give a token with the debug verb/,
    );
    const unknown = await cli("proxy-status", "nobody.default");
    assert.equal(unknown.exitCode, 1);
    assert.match(unknown.stderr, /^error: no connected proxy nobody\.default \(known: .*alpha\.default/);
  });
});
