// EDS from the registry's endpoint facts (issue 18 §4): health as Istio
// names it, node-local services, and UDP ports. Each case cites the istiod
// code it follows.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClusterLoadAssignment } from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { HealthStatus as EnvoyHealthStatus } from "@sextant/proto/gen/envoy/config/core/v3/health_check";
import { XdsCache } from "../src/cache/xds-cache.js";
import { type MeshProxy, parseProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import { generateGrpcEndpoints } from "../src/translate/grpc/endpoints.js";
import { generateSidecarClusters } from "../src/translate/sidecar/clusters.js";
import { generateSidecarEndpoints } from "../src/translate/sidecar/endpoints.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { contextOf } from "./golden-inputs.js";

const host = (name: string) => `${name}.default.svc.cluster.local`;
const outbound = (name: string, port = 80) => `outbound|${port}||${host(name)}`;

/** A Kubernetes service of default with an HTTP port 80 to 8080, and any other fields. */
const service = (name: string, extra: Record<string, unknown> = {}) => ({
  hostname: host(name),
  namespace: "default",
  name,
  addresses: [`10.96.0.${name.length}`],
  ports: [{ name: "http", number: 80, targetPort: 8080, protocol: "PROTOCOL_HTTP" }],
  selector: { app: name },
  resolution: "RESOLUTION_STATIC",
  registry: "kubernetes",
  ...extra,
});

const endpoint = (address: string, health: string, extra: Record<string, unknown> = {}) => ({
  address,
  ports: { http: 8080 },
  labels: { app: "web" },
  namespace: "default",
  health,
  ...extra,
});

/** A proxy of default; metadata as the injector sets it (NODE_NAME from the pod's spec.nodeName). */
function proxyOf(metadata: Record<string, unknown> = {}, generator?: "grpc"): MeshProxy {
  return parseProxy(
    Node.fromPartial({
      id: "sidecar~10.0.0.1~client-0.default~default.svc.cluster.local",
      metadata: { NAMESPACE: "default", ...(generator ? { GENERATOR: generator } : {}), ...metadata },
      userAgentName: "envoy",
    }),
  );
}

/** The endpoints (address:port and Envoy health) sidecar EDS gives proxy for cluster name. */
function sidecarEds(push: PushContext, proxy: MeshProxy, name: string, cache = new XdsCache()) {
  const [resource] = generateSidecarEndpoints({ push, proxy, cache }, new Set([name]));
  assert.ok(resource, `no assignment for ${name}`);
  return ClusterLoadAssignment.decode(resource.resource.value).endpoints.flatMap((group) =>
    group.lbEndpoints.map(
      (lb) =>
        `${lb.endpoint?.address?.socketAddress?.address}:${lb.endpoint?.address?.socketAddress?.portValue} ${EnvoyHealthStatus[lb.healthStatus]}`,
    ),
  );
}

/** The endpoint addresses proxyless gRPC EDS gives proxy for cluster name. */
function grpcEds(push: PushContext, proxy: MeshProxy, name: string, cache = new XdsCache()) {
  const [resource] = generateGrpcEndpoints({ push, proxy, cache }, new Set([name]));
  assert.ok(resource, `no assignment for ${name}`);
  return ClusterLoadAssignment.decode(resource.resource.value).endpoints.flatMap((group) =>
    group.lbEndpoints.map((lb) => lb.endpoint?.address?.socketAddress?.address),
  );
}

describe("EDS by endpoint health, as istiod's EndpointBuilder filters it", () => {
  // pilot/pkg/xds/endpoints/endpoint_builder.go filterIstioEndpoint: UnHealthy
  // is dropped (unless the service sends unhealthy endpoints), Terminating is
  // always dropped, Draining is kept only when the service has the
  // istio.io/persistent-session label, and then sent as DRAINING
  // (buildEnvoyLbEndpoint: model.HealthStatus is Envoy's number).
  const shard = [
    endpoint("10.1.0.1", "HEALTH_STATUS_HEALTHY"),
    endpoint("10.1.0.2", "HEALTH_STATUS_UNHEALTHY"),
    endpoint("10.1.0.3", "HEALTH_STATUS_DRAINING"),
    endpoint("10.1.0.4", "HEALTH_STATUS_TERMINATING"),
  ];
  const push = contextOf({
    services: [service("web"), service("cart", { labels: { "istio.io/persistent-session": "SESSION" } })],
    endpoints: [
      { hostname: host("web"), endpoints: shard },
      { hostname: host("cart"), endpoints: shard },
    ],
  });

  it("sends only the healthy endpoint of a service without persistent sessions (TERMINATING and DRAINING left out)", () => {
    assert.deepEqual(sidecarEds(push, proxyOf(), outbound("web")), ["10.1.0.1:8080 HEALTHY"]);
  });

  it("keeps a DRAINING endpoint, as DRAINING, for a persistent-session service, and never a TERMINATING one", () => {
    assert.deepEqual(sidecarEds(push, proxyOf(), outbound("cart")), [
      "10.1.0.1:8080 HEALTHY",
      "10.1.0.3:8080 DRAINING",
    ]);
  });

  it("gives proxyless gRPC only the healthy endpoint", () => {
    assert.deepEqual(grpcEds(push, proxyOf({}, "grpc"), outbound("web")), ["10.1.0.1"]);
  });
});

describe("node-local services (internalTrafficPolicy: Local)", () => {
  // pilot/pkg/serviceregistry/kube/conversion.go ConvertService sets
  // NodeLocal; endpoint_builder.go filterIstioEndpoint drops an endpoint whose
  // NodeName is not the proxy's GetNodeName() (metadata NODE_NAME), and the
  // builder's cache key includes the node name for such a service.
  const endpoints = [
    endpoint("10.2.0.1", "HEALTH_STATUS_HEALTHY", { nodeName: "node-a" }),
    endpoint("10.2.0.2", "HEALTH_STATUS_HEALTHY", { nodeName: "node-b" }),
    endpoint("10.2.0.3", "HEALTH_STATUS_HEALTHY", { nodeName: "node-a" }),
  ];
  const push = contextOf({
    services: [service("local", { nodeLocal: true }), service("web")],
    endpoints: [
      { hostname: host("local"), endpoints },
      { hostname: host("web"), endpoints },
    ],
  });

  it("reads the proxy's node from metadata NODE_NAME (Proxy.GetNodeName)", () => {
    assert.equal(proxyOf({ NODE_NAME: "node-a" }).nodeName, "node-a");
    assert.equal(proxyOf().nodeName, "");
  });

  it("gives each sidecar only the endpoints on its own node, even from one cache", () => {
    const cache = new XdsCache();
    assert.deepEqual(sidecarEds(push, proxyOf({ NODE_NAME: "node-a" }), outbound("local"), cache), [
      "10.2.0.1:8080 HEALTHY",
      "10.2.0.3:8080 HEALTHY",
    ]);
    assert.deepEqual(sidecarEds(push, proxyOf({ NODE_NAME: "node-b" }), outbound("local"), cache), [
      "10.2.0.2:8080 HEALTHY",
    ]);
    // A proxy without a node (a VM) matches only endpoints without one: none here.
    assert.deepEqual(sidecarEds(push, proxyOf(), outbound("local"), cache), []);
  });

  it("leaves a cluster-wide service's endpoints alone", () => {
    assert.equal(sidecarEds(push, proxyOf({ NODE_NAME: "node-b" }), outbound("web")).length, 3);
  });

  it("filters proxyless gRPC's endpoints by node too", () => {
    const cache = new XdsCache();
    assert.deepEqual(grpcEds(push, proxyOf({ NODE_NAME: "node-b" }, "grpc"), outbound("local"), cache), [
      "10.2.0.2",
    ]);
    assert.deepEqual(grpcEds(push, proxyOf({ NODE_NAME: "node-a" }, "grpc"), outbound("local"), cache), [
      "10.2.0.1",
      "10.2.0.3",
    ]);
  });
});

describe("a UDP port from its name (udp-stats on a TCP port)", () => {
  // pkg/config/kube/conversion.go ConvertProtocol makes it UDP; istiod builds
  // no outbound listener or cluster for a UDP port (Envoy sidecars proxy TCP).
  const push = contextOf({
    services: [
      service("stats", {
        ports: [
          { name: "http", number: 80, targetPort: 8080, protocol: "PROTOCOL_HTTP" },
          { name: "udp-stats", number: 8125, targetPort: 8125, protocol: "PROTOCOL_UDP" },
        ],
      }),
    ],
    endpoints: [{ hostname: host("stats"), endpoints: [endpoint("10.3.0.1", "HEALTH_STATUS_HEALTHY")] }],
  });

  it("gets no cluster and no listener", () => {
    const proxy = proxyOf();
    const clusters = generateSidecarClusters({ push, proxy, cache: new XdsCache() }, "*").map((r) => r.name);
    assert.ok(clusters.includes(outbound("stats")), clusters.join("\n"));
    assert.equal(clusters.filter((name) => name.includes("|8125|")).length, 0, clusters.join("\n"));
    const listeners = generateSidecarListeners({ push, proxy, cache: new XdsCache() }, "*").map(
      (r) => r.name,
    );
    assert.equal(listeners.filter((name) => name.endsWith("_8125")).length, 0, listeners.join("\n"));
  });
});
