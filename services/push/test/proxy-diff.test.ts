// /debug/proxy_diff: per type, what push would send a proxy now beside what
// the proxy held at its last ACK, for both protocol variants: equal once
// ACKed, apart after a NACK (the proxy runs the older config).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TypeUrl } from "@sextant/proto/envoy";
import { DEBUG_HEADERS } from "@sextant/testing";
import { DeltaTestClient } from "./delta-client.js";
import { grpcNode, pushForSuite, putConfig, registerService } from "./harness.js";

const HOST = "diff.default.svc.cluster.local";
const CLUSTER = `outbound|9080||${HOST}`;

type ProxyDiff = {
  types: Array<{
    typeUrl: string;
    acked: Record<string, { transportSocket?: unknown }>;
    current: Record<string, unknown>;
  }>;
};

describe("/debug/proxy_diff", () => {
  const push = pushForSuite({
    seed: (bus) =>
      registerService(bus, HOST, { name: "grpc", number: 9080 }, [
        { address: "10.0.0.9", port: 9080, labels: { app: "diff" } },
      ]),
  });

  const diffOf = async (pod: string) => {
    const response = await fetch(
      `${push.httpUrl}/debug/proxy_diff?proxyID=${encodeURIComponent(grpcNode(pod).id)}`,
      { headers: DEBUG_HEADERS },
    );
    assert.equal(response.status, 200);
    const diff = (await response.json()) as ProxyDiff;
    const clusters = diff.types.find((type) => type.typeUrl === TypeUrl.Cluster);
    assert.ok(clusters, "no cluster type in the diff");
    return clusters;
  };

  it("shows the ACKed clusters equal to push's, then apart after the proxy NACKs a change (SotW, then delta)", async () => {
    const sotw = push.adsClient();
    const delta = push.closeAfter(new DeltaTestClient(push.xdsAddress));
    sotw.send({ node: grpcNode("sotw"), typeUrl: TypeUrl.Cluster, resourceNames: [CLUSTER] });
    const first = await sotw.next();
    sotw.ack(first, [CLUSTER]);
    delta.send({ node: grpcNode("delta"), typeUrl: TypeUrl.Cluster, resourceNamesSubscribe: [CLUSTER] });
    delta.ack(await delta.next());

    for (const pod of ["sotw", "delta"]) {
      const synced = await diffOf(pod);
      assert.deepEqual(Object.keys(synced.acked), [CLUSTER]);
      assert.deepEqual(synced.current, synced.acked);
    }

    // ISTIO_MUTUAL gives the cluster a transport socket; both proxies reject it.
    await putConfig(push.bus, {
      kind: "DestinationRule",
      name: "diff",
      spec: { host: HOST, trafficPolicy: { tls: { mode: "ISTIO_MUTUAL" } } },
    });
    const nack = { code: 3, message: "rejected for the test", details: [] };
    const changed = await sotw.next();
    sotw.send({
      typeUrl: TypeUrl.Cluster,
      resourceNames: [CLUSTER],
      versionInfo: first.versionInfo,
      responseNonce: changed.nonce,
      errorDetail: nack,
    });
    const deltaChanged = await delta.next();
    delta.send({ typeUrl: TypeUrl.Cluster, responseNonce: deltaChanged.nonce, errorDetail: nack });

    for (const pod of ["sotw", "delta"]) {
      const nacked = await diffOf(pod);
      assert.equal(nacked.acked[CLUSTER]?.transportSocket, undefined, `${pod}: the ACKed cluster has no TLS`);
      assert.ok(
        (nacked.current[CLUSTER] as { transportSocket?: unknown }).transportSocket,
        `${pod}: push's has`,
      );
    }
  });
});
