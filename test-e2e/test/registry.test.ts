// The registry as Istio builds it (issue 18 §4), end to end: real
// nats-server, ingest, discovery and push processes, and a sidecar's EDS.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  ClusterLoadAssignment,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { eventually, ordersOnOneAddressYaml } from "@sextant/testing";
import { type Mesh, startMesh } from "../src/mesh.js";

const CLUSTER = "outbound|80||orders.shop.example";

/**
 * A sidecar's ADS stream watching one EDS cluster, ACKing every response
 * (as Envoy does, so push keeps sending updates); `latest` is the last
 * assignment's endpoints as `address:port`, sorted.
 */
function watchEndpoints(xdsPort: number, cluster: string) {
  const client = new AggregatedDiscoveryServiceClient(
    `127.0.0.1:${xdsPort}`,
    grpc.credentials.createInsecure(),
  );
  const stream = client.streamAggregatedResources();
  let latest: string[] = [];
  const request = (versionInfo: string, responseNonce: string) => ({
    versionInfo,
    node: Node.fromPartial({
      id: "sidecar~10.9.0.1~client-0.shop~shop.svc.cluster.local",
      metadata: { NAMESPACE: "shop" },
      userAgentName: "envoy",
    }),
    resourceNames: [cluster],
    resourceLocators: [],
    typeUrl: TypeUrl.ClusterLoadAssignment,
    responseNonce,
    errorDetail: undefined,
  });
  stream.on("data", (response: DiscoveryResponse) => {
    for (const resource of response.resources) {
      const assignment = ClusterLoadAssignment.decode(resource.value);
      if (assignment.clusterName !== cluster) continue;
      latest = assignment.endpoints
        .flatMap((group) => group.lbEndpoints)
        .map(
          (lb) =>
            `${lb.endpoint?.address?.socketAddress?.address}:${lb.endpoint?.address?.socketAddress?.portValue}`,
        )
        .sort();
    }
    stream.write(request(response.versionInfo, response.nonce));
  });
  stream.on("error", () => {});
  stream.write(request("", ""));
  return {
    latest: () => latest,
    close() {
      stream.cancel();
      client.close();
    },
  };
}

describe("registry end to end: endpoints are workloads, not addresses", () => {
  let mesh: Mesh;
  let watch: ReturnType<typeof watchEndpoints> | undefined;

  before(async () => {
    mesh = await startMesh();
  });
  after(async () => {
    watch?.close();
    await mesh?.close();
  });

  it("sends both WorkloadEntries of one address, each on its own port, in push's EDS (IstioEndpoint.Key)", async () => {
    // Istio keys an endpoint by workload and address, among others (see ordersOnOneAddressYaml).
    await mesh.apply(ordersOnOneAddressYaml("10.9.0.7", "240.0.9.1"));
    const xdsPort = mesh.xdsPorts[0];
    assert.ok(xdsPort, "the mesh serves plaintext xDS");
    watch = watchEndpoints(xdsPort, CLUSTER);
    const current = watch;
    await eventually(() => current.latest().length >= 2, {
      timeoutMs: 30_000,
      message: `EDS for ${CLUSTER} never held two endpoints`,
    });
    assert.deepEqual(current.latest(), ["10.9.0.7:8081", "10.9.0.7:8082"]);
  });
});
