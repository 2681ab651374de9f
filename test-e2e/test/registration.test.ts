// Workload auto-registration is only for proven identities (issue 17): each
// way of claiming a WorkloadGroup without the group's identity is tried
// against the real control plane, and only the right identity gets a
// WorkloadEntry.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { eventually, metricValue } from "@sextant/testing";
import { type Account, type SecureMesh, startSecureMesh } from "../src/secure-mesh.js";
import { type AdsStream, adsThroughAgent, openAds, type ProxylessNode } from "../src/xds-clients.js";

const reviews: Account = { namespace: "vms", serviceAccount: "reviews" };
const intruder: Account = { namespace: "vms", serviceAccount: "intruder" };
const otherNamespace: Account = { namespace: "other", serviceAccount: "reviews" };

/** A proxy of namespace vms at ip, running as serviceAccount, naming the WorkloadGroup vms/reviews. */
const nodeOf = (pod: string, ip: string, serviceAccount: string): ProxylessNode => ({
  id: `sidecar~${ip}~${pod}.vms~vms.svc.cluster.local`,
  namespace: "vms",
  serviceAccount,
  metadata: { AUTO_REGISTER_GROUP: "reviews", INSTANCE_IPS: ip },
});

describe("auto-registration only for identities proven on push's mTLS port", () => {
  let mesh: SecureMesh;
  const streams: AdsStream[] = [];

  const ingestUrl = () => `http://127.0.0.1:${mesh.ingest.httpPort}`;
  const refused = async (reason: string) =>
    metricValue(
      await (await fetch(`http://127.0.0.1:${mesh.push.httpPort}/metrics`)).text(),
      "sextant_registration_refused_total",
      `reason="${reason}"`,
    ) || 0;
  /** The names of vms' WorkloadEntries in ingest. */
  const workloadEntries = async () => {
    const response = await fetch(`${ingestUrl()}/v1/config?kind=WorkloadEntry&namespace=vms`);
    assert.equal(response.status, 200, await response.clone().text());
    const { items = [] } = (await response.json()) as { items?: Array<{ metadata: { name: string } }> };
    return items.map((item) => item.metadata.name).sort();
  };
  /**
   * Opens a stream that stays connected and is served, once push's snapshot
   * holds the WorkloadGroup: push decides at connect time, and counts a
   * stream that came before the group as no_group, so such a stream is
   * closed and opened again.
   */
  const connectOnceGroupKnown = (open: () => AdsStream) =>
    eventually(
      async () => {
        const before = await refused("no_group");
        const stream = open();
        const outcome = await stream.first;
        if (outcome.code !== grpc.status.OK || (await refused("no_group")) > before) {
          stream.close();
          assert.equal(outcome.code, grpc.status.OK, outcome.details);
          return undefined;
        }
        streams.push(stream);
        return stream;
      },
      { timeoutMs: 30_000, message: "push never knew the WorkloadGroup vms/reviews" },
    );

  before(async () => {
    mesh = await startSecureMesh([reviews, intruder, otherNamespace], { plaintextXds: true });
    await mesh.apply(`apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews, namespace: vms}
spec:
  metadata: {labels: {app: reviews}}
  template: {ports: {grpc: 9080}, serviceAccount: reviews}
`);
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await mesh?.close();
  });

  it("serves a plaintext client naming the group, but does not register it", async () => {
    const address = mesh.xdsAddress;
    assert.ok(address, "the mesh serves plaintext xDS");
    const stream = openAds(
      address,
      grpc.credentials.createInsecure(),
      nodeOf("plain-0", "127.0.0.51", "reviews"),
    );
    streams.push(stream);
    const outcome = await stream.first;
    assert.equal(outcome.code, grpc.status.OK, outcome.details);
    assert.equal(await refused("plaintext"), 1);
  });

  it("refuses the stream of an mTLS client with another namespace's certificate (XDS_AUTH)", async () => {
    const agent = await mesh.startAgent({
      pod: "other-0",
      account: otherNamespace,
      ip: "127.0.0.52",
      labels: { app: "reviews" },
    });
    const outcome = await adsThroughAgent(agent, nodeOf("other-0", "127.0.0.52", "reviews"));
    assert.equal(outcome.code, grpc.status.PERMISSION_DENIED, outcome.details);
    assert.match(outcome.details, /namespace "other"/);
  });

  it("serves an mTLS client of the group's namespace with another service account, but does not register it", async () => {
    const agent = await mesh.startAgent({
      pod: "intruder-0",
      account: intruder,
      ip: "127.0.0.53",
      labels: { app: "reviews" },
    });
    await connectOnceGroupKnown(() =>
      openAds(
        agent.xdsProxyAddress,
        grpc.credentials.createInsecure(),
        nodeOf("intruder-0", "127.0.0.53", "intruder"),
      ),
    );
    assert.equal(await refused("service_account"), 1);
  });

  it("registers the mTLS client whose certificate is the group's identity, and no other", async () => {
    const agent = await mesh.startAgent({
      pod: "reviews-0",
      account: reviews,
      ip: "127.0.0.54",
      labels: { app: "reviews" },
    });
    await connectOnceGroupKnown(() =>
      openAds(
        agent.xdsProxyAddress,
        grpc.credentials.createInsecure(),
        nodeOf("reviews-0", "127.0.0.54", "reviews"),
      ),
    );
    const entryUrl = `${ingestUrl()}/v1/config/WorkloadEntry/vms/reviews-127.0.0.54`;
    await eventually(async () => (await fetch(entryUrl)).status === 200, {
      timeoutMs: 30_000,
      message: "the WorkloadEntry of the right identity",
    });
    const entry = (await (await fetch(entryUrl)).json()) as {
      spec: { address: string; serviceAccount: string };
    };
    assert.deepEqual([entry.spec.address, entry.spec.serviceAccount], ["127.0.0.54", "reviews"]);
    // The other clients are still connected: none of them has an entry.
    assert.deepEqual(await workloadEntries(), ["reviews-127.0.0.54"]);
  });
});
