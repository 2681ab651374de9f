// Unit tests of the Envoy sidecar CDS/EDS generators and of Sidecar scoping.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type Any, EndpointShard } from "@sextant/proto";
import {
  Cluster,
  ClusterLoadAssignment,
  HttpProtocolOptions,
  UpstreamTlsContext,
} from "@sextant/proto/envoy";
import { Cluster_LbPolicy } from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { HealthStatus as EnvoyHealthStatus } from "@sextant/proto/gen/envoy/config/core/v3/health_check";
import { XdsCache } from "../src/cache/xds-cache.js";
import { type MeshProxy, parseProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import { sidecarScope } from "../src/model/sidecar-scope.js";
import { generateSidecarClusters, sidecarClustersNeedPush } from "../src/translate/sidecar/clusters.js";
import { generateSidecarEndpoints, sidecarEndpointsNeedPush } from "../src/translate/sidecar/endpoints.js";
import { formatViolation, validateAny } from "./envoy-validate.js";
import { contextOf as goldenContext } from "./golden-inputs.js";

const SUFFIX = "svc.cluster.local";
const host = (name: string, namespace = "default") => `${name}.${namespace}.${SUFFIX}`;

/** A Kubernetes service with one HTTP port 9080. */
function kubeService(name: string, namespace = "default", extra: Record<string, unknown> = {}) {
  return {
    hostname: host(name, namespace),
    namespace,
    name,
    ports: [{ name: "http", number: 9080, targetPort: 9080, protocol: "PROTOCOL_HTTP" }],
    selector: { app: name },
    resolution: "RESOLUTION_STATIC",
    registry: "kubernetes",
    ...extra,
  };
}

interface Input {
  services: Array<Record<string, unknown>>;
  endpoints?: Record<string, Array<Record<string, unknown>>>;
  config?: string;
}

/** The snapshot of a case, built as the golden harnesses build theirs. */
function contextOf(input: Input): PushContext {
  return goldenContext({
    services: input.services,
    endpoints: Object.entries(input.endpoints ?? {}).map(([hostname, endpoints]) => ({
      hostname,
      endpoints,
    })),
    ...(input.config ? { config: input.config } : {}),
  });
}

function sidecar(
  namespace = "default",
  labels: Record<string, string> = { app: "productpage" },
  ip = "10.0.0.1",
  locality?: { region: string; zone: string; subZone: string },
): MeshProxy {
  return parseProxy(
    Node.fromPartial({
      id: `sidecar~${ip}~pod-1.${namespace}~${namespace}.svc.cluster.local`,
      metadata: { NAMESPACE: namespace, LABELS: labels, INSTANCE_IPS: ip },
      locality,
      userAgentName: "envoy",
    }),
  );
}

/** Every resource the tests generate must pass Envoy's validate rules (the golden checker's). */
function assertValid(resources: ReadonlyArray<{ name: string; resource: Any }>): void {
  for (const { name, resource } of resources)
    assert.deepEqual(validateAny(resource).map(formatViolation), [], `${name} breaks Envoy's validate rules`);
}

function clusters(push: PushContext, proxy: MeshProxy, cache = new XdsCache()): Map<string, Cluster> {
  const out = generateSidecarClusters({ push, proxy, cache }, "*");
  assertValid(out);
  return new Map(out.map((r) => [r.name, Cluster.decode(r.resource.value)]));
}

function endpoints(push: PushContext, proxy: MeshProxy, names: string[], cache = new XdsCache()) {
  const out = generateSidecarEndpoints({ push, proxy, cache }, new Set(names));
  assertValid(out);
  return new Map(out.map((r) => [r.name, ClusterLoadAssignment.decode(r.resource.value)]));
}

const asJson = (cluster: Cluster) => Cluster.toJSON(cluster) as Record<string, unknown>;
const tlsOf = (socket: { typedConfig?: Any } | undefined) => {
  assert.ok(socket?.typedConfig, "no transport socket");
  return UpstreamTlsContext.decode(socket.typedConfig.value);
};
const httpOptionsOf = (cluster: Cluster) =>
  HttpProtocolOptions.decode(
    (cluster.typedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"] as Any)
      .value,
  );

const outbound = (name: string, namespace = "default", subset = "", port = 9080) =>
  `outbound|${port}|${subset}|${host(name, namespace)}`;

describe("Sidecar scoping", () => {
  const registry: Input = {
    services: [
      kubeService("productpage"),
      kubeService("reviews"),
      kubeService("ratings", "other"),
      kubeService("db", "data"),
      kubeService("private", "other", { exportTo: ["."] }),
    ],
    endpoints: { [host("ratings", "other")]: [{ address: "10.1.0.9", ports: { http: 9080 } }] },
  };

  it("gives a proxy scoped by a Sidecar to its own namespace no cluster from other namespaces", () => {
    const push = contextOf({
      ...registry,
      config: `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress: [{hosts: ["./*"]}]
`,
    });
    const names = [...clusters(push, sidecar()).keys()];
    assert.ok(names.includes(outbound("reviews")), names.join("\n"));
    assert.ok(names.includes(outbound("productpage")));
    const foreign = names.filter(
      (name) => name.startsWith("outbound|") && !name.endsWith(".default.svc.cluster.local"),
    );
    assert.deepEqual(foreign, []);
    // Nor endpoints: a cluster outside the scope gets an empty assignment.
    const eds = endpoints(push, sidecar(), [outbound("ratings", "other")]);
    assert.deepEqual(eds.get(outbound("ratings", "other"))?.endpoints, []);
    // Without the Sidecar, every exported service is there (not the one exported to "other" only).
    const unscoped = [...clusters(contextOf(registry), sidecar()).keys()];
    assert.ok(unscoped.includes(outbound("ratings", "other")));
    assert.ok(unscoped.includes(outbound("db", "data")));
    assert.ok(!unscoped.includes(outbound("private", "other")));
  });

  it("applies Istio's precedence: workload selector, namespace default, root namespace default", () => {
    const push = contextOf({
      ...registry,
      config: `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: mesh-default, namespace: istio-system}
spec:
  egress: [{hosts: ["data/*"]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: reviews-only, namespace: default}
spec:
  workloadSelector: {labels: {app: reviews}}
  egress: [{hosts: ["other/ratings.other.svc.cluster.local"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ns-default, namespace: default}
spec:
  egress: [{hosts: ["./reviews.default.svc.cluster.local", "~/*"]}]
`,
    });
    const hosts = (proxy: MeshProxy) => sidecarScope(push, proxy).services.map((s) => s.hostname);
    assert.deepEqual(hosts(sidecar("default", { app: "reviews" })), [host("ratings", "other")]);
    assert.equal(
      sidecarScope(push, sidecar("default", { app: "reviews" })).sidecar?.ref.name,
      "reviews-only",
    );
    assert.deepEqual(hosts(sidecar("default", { app: "productpage" })), [host("reviews")]);
    assert.equal(sidecarScope(push, sidecar("default")).outboundTrafficPolicy, "ALLOW_ANY");
    const other = sidecarScope(push, sidecar("other"));
    assert.equal(other.sidecar?.ref.name, "mesh-default");
    assert.deepEqual(
      other.services.map((s) => s.hostname),
      [host("db", "data")],
    );
    assert.equal(other.outboundTrafficPolicy, "REGISTRY_ONLY");
  });

  it("lets an explicit namespace entry shadow */ entries, trims to an egress port, and adds VirtualService destinations", () => {
    const push = contextOf({
      services: [
        kubeService("reviews"),
        kubeService("ratings", "other", {
          ports: [
            { name: "http", number: 9080, protocol: "PROTOCOL_HTTP" },
            { name: "admin", number: 9090, protocol: "PROTOCOL_HTTP" },
          ],
        }),
        kubeService("details", "other"),
        kubeService("canary", "other"),
      ],
      config: `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress:
  - hosts: ["other/details.other.svc.cluster.local", "*/reviews.default.svc.cluster.local"]
  - port: {number: 9090, protocol: HTTP, name: admin}
    hosts: ["*/*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: other}
spec:
  hosts: [details.other.svc.cluster.local]
  http: [{route: [{destination: {host: canary.other.svc.cluster.local}}]}]
`,
    });
    const scope = sidecarScope(push, sidecar());
    assert.deepEqual(
      scope.services.map((s) => `${s.hostname}:${s.ports.map((p) => p.number).join(",")}`),
      [
        `${host("canary", "other")}:9080`,
        `${host("details", "other")}:9080`,
        // Only through the port-9090 listener: trimmed to that port.
        `${host("ratings", "other")}:9090`,
        `${host("reviews")}:9080`,
      ],
    );
    const names = [...clusters(push, sidecar()).keys()];
    assert.ok(names.includes(outbound("ratings", "other", "", 9090)));
    assert.ok(!names.includes(outbound("ratings", "other", "", 9080)));
  });
});

describe("sidecar CDS", () => {
  const reviewsEndpoints = [
    {
      address: "10.1.0.1",
      ports: { http: 9080 },
      labels: { app: "reviews", version: "v1", "security.istio.io/tlsMode": "istio" },
      serviceAccount: "bookinfo-reviews",
      namespace: "default",
      workloadName: "reviews-v1",
      locality: { region: "us-east1", zone: "us-east1-b" },
    },
    {
      address: "10.1.0.2",
      ports: { http: 9080 },
      labels: { app: "reviews", version: "v2", "security.istio.io/tlsMode": "istio" },
      serviceAccount: "bookinfo-reviews",
      namespace: "default",
      workloadName: "reviews-v2",
      locality: { region: "us-east1", zone: "us-east1-c" },
    },
  ];

  it("builds the default cluster as istiod: EDS, LEAST_REQUEST, open circuit breakers, auto mTLS", () => {
    const push = contextOf({
      services: [kubeService("reviews")],
      endpoints: { [host("reviews")]: reviewsEndpoints },
    });
    const cluster = clusters(push, sidecar()).get(outbound("reviews"));
    assert.ok(cluster);
    assert.equal(asJson(cluster).type, "EDS");
    assert.equal(cluster.edsClusterConfig?.serviceName, outbound("reviews"));
    assert.ok(cluster.edsClusterConfig?.edsConfig?.ads);
    assert.equal(asJson(cluster).lbPolicy, "LEAST_REQUEST");
    assert.equal(cluster.altStatName, `${outbound("reviews")};`);
    assert.deepEqual(cluster.connectTimeout, { seconds: 10, nanos: 0 });
    assert.equal(cluster.circuitBreakers?.thresholds[0]?.maxRequests, 4294967295);
    assert.equal(cluster.circuitBreakers?.thresholds[0]?.trackRemaining, true);
    assert.equal(cluster.transportSocket, undefined);
    assert.deepEqual(
      cluster.transportSocketMatches.map((m) => [m.name, m.match, m.transportSocket?.name]),
      [
        ["tlsMode-istio", { tlsMode: "istio" }, "envoy.transport_sockets.tls"],
        ["tlsMode-disabled", {}, "envoy.transport_sockets.raw_buffer"],
      ],
    );
    const tls = tlsOf(cluster.transportSocketMatches[0]?.transportSocket);
    assert.equal(tls.sni, "outbound_.9080_._.reviews.default.svc.cluster.local");
    assert.deepEqual(tls.commonTlsContext?.alpnProtocols, ["istio"]);
    assert.deepEqual(
      tls.commonTlsContext?.tlsCertificateSdsSecretConfigs.map((s) => [
        s.name,
        s.sdsConfig?.apiConfigSource?.grpcServices[0]?.envoyGrpc?.clusterName,
      ]),
      [["default", "sds-grpc"]],
    );
    const validation = tls.commonTlsContext?.combinedValidationContext;
    assert.equal(validation?.validationContextSdsSecretConfig?.name, "ROOTCA");
    assert.deepEqual(
      validation?.defaultValidationContext?.matchSubjectAltNames.map((m) => m.exact),
      ["spiffe://cluster.local/ns/default/sa/bookinfo-reviews"],
    );
    assert.deepEqual(cluster.metadata?.filterMetadata.istio, {
      services: [{ host: host("reviews"), name: "reviews", namespace: "default" }],
    });
  });

  it("drops auto mTLS when the service's namespace DISABLEs mTLS", () => {
    const push = contextOf({
      services: [kubeService("reviews")],
      config: `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec: {mtls: {mode: DISABLE}}
`,
    });
    const cluster = clusters(push, sidecar()).get(outbound("reviews"));
    assert.deepEqual(cluster?.transportSocketMatches, []);
    assert.equal(cluster?.transportSocket, undefined);
  });

  it("chooses the DestinationRule as istiod for every generator: the proxy's namespace, the service's, the root namespace, never a third", () => {
    const rule = (name: string, namespace: string, ruleHost: string, extra = "") =>
      `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  host: "${ruleHost}"${extra}
`;
    const push = contextOf({
      services: [kubeService("reviews"), kubeService("ratings", "data")],
      config: [
        // Exported everywhere, but of neither the proxy's, the service's nor the root namespace.
        rule("third", "ns2", host("reviews")),
        rule("third-ratings", "ns2", host("ratings", "data")),
        rule("service-private", "default", host("reviews"), "\n  exportTo: [.]"),
        rule("root-wildcard", "istio-system", "*.svc.cluster.local"),
        rule("root-exact", "istio-system", host("reviews")),
        rule("own-wildcard", "data", "*.data.svc.cluster.local"),
        rule(
          "own-selected",
          "data",
          host("ratings", "data"),
          "\n  workloadSelector: {matchLabels: {app: canary}}",
        ),
      ].join("---\n"),
    });
    const chosen = (ruleHost: string, namespace: string, labels?: Record<string, string>) =>
      push.destinationRuleFor(ruleHost, namespace, labels)?.ref.name;
    // From the service's namespace: its own rule, whatever its exportTo.
    assert.equal(chosen(host("reviews"), "default"), "service-private");
    // From ns1: the service's rule is private, ns2's does not apply, the root's exact host wins over its wildcard.
    assert.equal(chosen(host("reviews"), "ns1"), "root-exact");
    // From ns2: its own rule.
    assert.equal(chosen(host("reviews"), "ns2"), "third");
    // From ns1: the service's namespace's wildcard, not ns2's exact host; its selector rule is not for ns1.
    assert.equal(chosen(host("ratings", "data"), "ns1"), "own-wildcard");
    // A workloadSelector counts for matching proxies of its namespace, and wins there.
    assert.equal(chosen(host("ratings", "data"), "data", { app: "canary" }), "own-selected");
    assert.equal(chosen(host("ratings", "data"), "data", { app: "other" }), "own-wildcard");
    // Clusters follow the same choice.
    const cluster = clusters(push, sidecar("ns1")).get(outbound("reviews"));
    assert.equal(
      (cluster?.metadata?.filterMetadata?.istio as { config?: string } | undefined)?.config,
      "/apis/networking.istio.io/v1/namespaces/istio-system/destination-rule/root-exact",
    );
  });

  it("applies a DestinationRule with Istio's precedence: subsets, port-level replacing, TLS modes", () => {
    const push = contextOf({
      services: [
        kubeService("reviews", "default", {
          ports: [
            { name: "http", number: 9080, protocol: "PROTOCOL_HTTP" },
            { name: "grpc", number: 9090, protocol: "PROTOCOL_GRPC" },
          ],
        }),
      ],
      endpoints: { [host("reviews")]: reviewsEndpoints },
      config: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec:
  host: reviews
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: x-user}}
    connectionPool:
      tcp: {maxConnections: 100, connectTimeout: 3s}
      http: {http2MaxRequests: 1000, maxRequestsPerConnection: 10, idleTimeout: 60s, h2UpgradePolicy: UPGRADE}
    outlierDetection: {consecutive5xxErrors: 7, interval: 5s, baseEjectionTime: 15m, maxEjectionPercent: 100}
    tls: {mode: ISTIO_MUTUAL}
    portLevelSettings:
    - port: {number: 9090}
      loadBalancer: {simple: ROUND_ROBIN}
  subsets:
  - name: v1
    labels: {version: v1}
  - name: v2
    labels: {version: v2}
    trafficPolicy:
      loadBalancer: {consistentHash: {maglev: {tableSize: 65537}}}
      tls: {mode: SIMPLE}
`,
    });
    const all = clusters(push, sidecar());
    assert.deepEqual(
      [...all.keys()].filter((name) => name.startsWith("outbound|")),
      // Sorted by name, as strings: "|v1|" sorts before "||".
      [
        outbound("reviews", "default", "v1"),
        outbound("reviews", "default", "v2"),
        outbound("reviews"),
        outbound("reviews", "default", "v1", 9090),
        outbound("reviews", "default", "v2", 9090),
        outbound("reviews", "default", "", 9090),
      ],
    );
    const main = all.get(outbound("reviews"))!;
    assert.equal(asJson(main).lbPolicy, "RING_HASH");
    assert.equal(main.ringHashLbConfig?.minimumRingSize, 1024);
    assert.deepEqual(main.connectTimeout, { seconds: 3, nanos: 0 });
    assert.equal(main.circuitBreakers?.thresholds[0]?.maxConnections, 100);
    assert.equal(main.circuitBreakers?.thresholds[0]?.maxRequests, 1000);
    assert.equal(main.outlierDetection?.consecutive5xx, 7);
    assert.equal(main.outlierDetection?.enforcingConsecutive5xx, 100);
    assert.equal(main.outlierDetection?.enforcingSuccessRate, 0);
    assert.deepEqual(main.commonLbConfig?.healthyPanicThreshold, { value: 0 });
    const http = httpOptionsOf(main);
    assert.equal(http.commonHttpProtocolOptions?.maxRequestsPerConnection, 10);
    assert.deepEqual(http.commonHttpProtocolOptions?.idleTimeout, { seconds: 60, nanos: 0 });
    assert.ok(http.explicitHttpConfig?.http2ProtocolOptions, "h2UpgradePolicy UPGRADE gives HTTP/2 upstream");
    // ISTIO_MUTUAL set by the rule: a transport socket, not matches; ALPN with h2.
    assert.deepEqual(main.transportSocketMatches, []);
    const mainTls = tlsOf(main.transportSocket);
    assert.equal(mainTls.sni, "outbound_.9080_._.reviews.default.svc.cluster.local");
    assert.deepEqual(mainTls.commonTlsContext?.alpnProtocols, ["istio", "h2"]);
    assert.deepEqual(
      main.metadata?.filterMetadata.istio?.config,
      "/apis/networking.istio.io/v1/namespaces/default/destination-rule/reviews",
    );

    const v1 = all.get(outbound("reviews", "default", "v1"))!;
    assert.equal(asJson(v1).lbPolicy, "RING_HASH");
    assert.equal(tlsOf(v1.transportSocket).sni, "outbound_.9080_.v1_.reviews.default.svc.cluster.local");
    assert.equal(v1.metadata?.filterMetadata.istio?.subset, "v1");

    const v2 = all.get(outbound("reviews", "default", "v2"))!;
    assert.equal(asJson(v2).lbPolicy, "MAGLEV");
    assert.equal(v2.maglevLbConfig?.tableSize, 65537);
    const simple = tlsOf(v2.transportSocket);
    assert.equal(
      simple.commonTlsContext?.combinedValidationContext?.validationContextSdsSecretConfig?.name,
      "file-root:system",
    );
    assert.deepEqual(simple.commonTlsContext?.tlsCertificateSdsSecretConfigs, []);
    assert.equal(httpOptionsOf(v2).upstreamHttpProtocolOptions?.autoSni, true);
    assert.equal(v2.metadata?.filterMetadata.istio?.alpn_override, "false");

    // Port-level settings replace the whole policy for their port: no outlier detection, pool or TLS inherited.
    const grpc = all.get(outbound("reviews", "default", "", 9090))!;
    assert.equal(grpc.lbPolicy, Cluster_LbPolicy.ROUND_ROBIN);
    assert.equal(grpc.outlierDetection, undefined);
    assert.equal(grpc.circuitBreakers?.thresholds[0]?.maxConnections, 4294967295);
    assert.ok(httpOptionsOf(grpc).explicitHttpConfig?.http2ProtocolOptions, "gRPC ports are HTTP/2");
    assert.equal(
      grpc.transportSocketMatches[0]?.name,
      "tlsMode-istio",
      "auto mTLS where the rule sets no TLS",
    );
  });

  it("resolves DNS ServiceEntries as STRICT_DNS and LOGICAL_DNS with their endpoints inline", () => {
    const push = contextOf({
      services: [
        {
          hostname: "api.example.com",
          namespace: "default",
          name: "api",
          ports: [{ name: "https", number: 443, protocol: "PROTOCOL_TLS" }],
          resolution: "RESOLUTION_DNS",
          meshExternal: true,
          registry: "serviceentry",
        },
        {
          hostname: "rr.example.com",
          namespace: "default",
          name: "rr",
          ports: [{ name: "http", number: 80, protocol: "PROTOCOL_HTTP" }],
          resolution: "RESOLUTION_DNS_ROUND_ROBIN",
          meshExternal: true,
          registry: "serviceentry",
        },
        {
          hostname: "empty.example.com",
          namespace: "default",
          name: "empty",
          ports: [{ name: "http", number: 80, protocol: "PROTOCOL_HTTP" }],
          resolution: "RESOLUTION_DNS",
          registry: "serviceentry",
        },
      ],
      endpoints: {
        "api.example.com": [
          { address: "a.example.com", ports: { https: 443 } },
          { address: "b.example.com", ports: { https: 443 } },
        ],
        "rr.example.com": [
          { address: "rr.example.com", ports: { http: 80 } },
          { address: "rr2.example.com", ports: { http: 80 } },
        ],
      },
    });
    const all = clusters(push, sidecar());
    const api = all.get("outbound|443||api.example.com")!;
    assert.equal(asJson(api).type, "STRICT_DNS");
    assert.equal(asJson(api).dnsLookupFamily, "V4_ONLY");
    assert.equal(api.respectDnsTtl, true);
    assert.equal(api.edsClusterConfig, undefined);
    assert.deepEqual(
      api.loadAssignment?.endpoints.flatMap((l) =>
        l.lbEndpoints.map((e) => e.endpoint?.address?.socketAddress?.address),
      ),
      ["a.example.com", "b.example.com"],
    );
    // MESH_EXTERNAL: no auto mTLS, and marked external.
    assert.deepEqual(api.transportSocketMatches, []);
    assert.equal(api.metadata?.filterMetadata.istio?.external, true);
    const rr = all.get("outbound|80||rr.example.com")!;
    assert.equal(asJson(rr).type, "LOGICAL_DNS");
    assert.equal(rr.loadAssignment?.endpoints[0]?.lbEndpoints.length, 1);
    assert.ok(!all.has("outbound|80||empty.example.com"), "a DNS cluster without endpoints is not built");
    // EDS for a DNS cluster: empty.
    assert.deepEqual(
      endpoints(push, sidecar(), ["outbound|443||api.example.com"]).get("outbound|443||api.example.com")
        ?.endpoints,
      [],
    );
  });

  it("builds the catch-all and inbound clusters as istiod (inbound traffic policy PASSTHROUGH)", () => {
    const push = contextOf({
      services: [
        kubeService("reviews", "default", {
          ports: [{ name: "http", number: 80, targetPort: 9080, protocol: "PROTOCOL_HTTP" }],
        }),
      ],
      endpoints: {
        [host("reviews")]: [{ address: "10.0.0.1", ports: { http: 9080 }, labels: { app: "reviews" } }],
      },
    });
    const all = clusters(push, sidecar("default", { app: "reviews" }));
    const blackhole = Cluster.toJSON(all.get("BlackHoleCluster")!) as Record<string, unknown>;
    assert.equal(blackhole.type, "STATIC");
    assert.equal(blackhole.loadAssignment, undefined);
    const passthrough = all.get("PassthroughCluster")!;
    assert.equal(asJson(passthrough).type, "ORIGINAL_DST");
    assert.equal(asJson(passthrough).lbPolicy, "CLUSTER_PROVIDED");
    assert.ok(httpOptionsOf(passthrough).useDownstreamProtocolConfig);
    const inboundPassthrough = all.get("InboundPassthroughCluster")!;
    assert.equal(inboundPassthrough.upstreamBindConfig?.sourceAddress?.address, "127.0.0.6");
    // Named by the workload port, ORIGINAL_DST from 127.0.0.6, never cleaned up.
    const inbound = all.get("inbound|9080||")!;
    assert.equal(asJson(inbound).type, "ORIGINAL_DST");
    assert.equal(asJson(inbound).lbPolicy, "CLUSTER_PROVIDED");
    assert.equal(inbound.upstreamBindConfig?.sourceAddress?.address, "127.0.0.6");
    assert.equal(inbound.cleanupInterval?.seconds, 9223372035);
    assert.deepEqual(inbound.metadata?.filterMetadata.istio?.services, [
      { host: host("reviews"), name: "reviews", namespace: "default" },
    ]);
    // A Sidecar ingress listener with a localhost default endpoint: STATIC to it, no bind address.
    const withIngress = contextOf({
      services: [kubeService("reviews")],
      config: `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ingress, namespace: default}
spec:
  ingress: [{port: {number: 8443, protocol: HTTP, name: web}, defaultEndpoint: "127.0.0.1:8080"}]
`,
    });
    const ingress = clusters(withIngress, sidecar()).get("inbound|8443||")!;
    assert.equal(asJson(ingress).type, "STATIC");
    assert.equal(
      ingress.loadAssignment?.endpoints[0]?.lbEndpoints[0]?.endpoint?.address?.socketAddress?.portValue,
      8080,
    );
    assert.equal(ingress.upstreamBindConfig, undefined);
  });

  it("follows the proxy's IP families: inbound source addresses, DNS lookup family, localhost", () => {
    const services = [
      kubeService("reviews"),
      {
        hostname: "db.example.com",
        namespace: "default",
        name: "db",
        ports: [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }],
        resolution: "RESOLUTION_DNS",
        meshExternal: true,
        registry: "serviceentry",
      },
    ];
    const endpoints = {
      [host("reviews")]: ["10.0.0.1", "fd00::1"].map((address) => ({
        address,
        ports: { http: 9080 },
        labels: { app: "reviews" },
      })),
      "db.example.com": [{ address: "db.example.com", ports: { tcp: 5432 } }],
    };
    const sidecarIngress = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: ingress, namespace: default}
spec:
  ingress:
  - {port: {number: 8443, protocol: HTTP, name: a}, defaultEndpoint: "127.0.0.1:8080"}
  - {port: {number: 8444, protocol: HTTP, name: b}, defaultEndpoint: "[::1]:8081"}
`;
    const plain = contextOf({ services, endpoints });
    const withIngress = contextOf({ services, endpoints, config: sidecarIngress });
    const sources = (cluster: Cluster | undefined) => [
      cluster?.upstreamBindConfig?.sourceAddress?.address,
      ...(cluster?.upstreamBindConfig?.extraSourceAddresses ?? []).map((extra) => extra.address?.address),
    ];
    const endpointOf = (cluster: Cluster | undefined) =>
      cluster?.loadAssignment?.endpoints[0]?.lbEndpoints[0]?.endpoint?.address?.socketAddress?.address;
    const cases: Array<[string, string[], string, string, string]> = [
      ["10.0.0.1", ["127.0.0.6"], "V4_ONLY", "127.0.0.1", "127.0.0.1"],
      ["fd00::1", ["::6"], "V6_ONLY", "::1", "::1"],
      // Dual-stack: Istio's output with ISTIO_DUAL_STACK on (see dual-stack.ts).
      ["10.0.0.1,fd00::1", ["127.0.0.6", "::6"], "ALL", "127.0.0.1", "::1"],
    ];
    for (const [ips, sourceAddresses, family, localhost, localhostV6] of cases) {
      const all = clusters(plain, sidecar("default", { app: "reviews" }, ips));
      assert.deepEqual(sources(all.get("InboundPassthroughCluster")), sourceAddresses, ips);
      assert.deepEqual(sources(all.get("inbound|9080||")), sourceAddresses, ips);
      assert.equal(asJson(all.get("outbound|5432||db.example.com")!).dnsLookupFamily, family, ips);
      const ingress = clusters(withIngress, sidecar("default", { app: "reviews" }, ips));
      assert.equal(endpointOf(ingress.get("inbound|8443||")), localhost, ips);
      assert.equal(endpointOf(ingress.get("inbound|8444||")), localhostV6, ips);
    }
  });

  it("is deterministic and gives the same output from a shared cache as from a fresh one", () => {
    const push = contextOf({
      services: [kubeService("reviews"), kubeService("ratings", "other")],
      endpoints: { [host("reviews")]: reviewsEndpoints },
      config: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: other}
spec: {host: reviews.default.svc.cluster.local, subsets: [{name: v1, labels: {version: v1}}]}
`,
    });
    const shared = new XdsCache();
    const dump = (proxy: MeshProxy, cache?: XdsCache) =>
      generateSidecarClusters({ push, proxy, cache: cache ?? new XdsCache() }, "*").map((r) => [
        r.name,
        Buffer.from(r.resource.value).toString("base64"),
      ]);
    for (const proxy of [
      sidecar("default"),
      sidecar("other"),
      sidecar("default"),
      sidecar("other", { app: "x" }, "10.0.0.7"),
    ]) {
      assert.deepEqual(dump(proxy, shared), dump(proxy));
    }
    assert.ok(shared.stats.hits > 0);
    // The subset comes from the rule in "other": visible to "other" only (exportTo default is everywhere,
    // but istiod looks in the proxy's namespace, then the service's, then the root namespace).
    const inDefault = dump(sidecar("default")).map(([name]) => name);
    const inOther = dump(sidecar("other")).map(([name]) => name);
    assert.ok(!inDefault.includes(outbound("reviews", "default", "v1")));
    assert.ok(inOther.includes(outbound("reviews", "default", "v1")));
    const sorted = [...inDefault].sort();
    assert.deepEqual(inDefault, sorted);
  });
});

describe("sidecar EDS", () => {
  const endpointsOf = (overrides: Array<Record<string, unknown>>) =>
    overrides.map((o, i) => ({
      address: `10.1.0.${i + 1}`,
      ports: { http: 9080 },
      labels: { app: "reviews", version: "v1", "security.istio.io/tlsMode": "istio" },
      namespace: "default",
      workloadName: `reviews-${i}`,
      locality: { region: "us-east1", zone: "us-east1-b" },
      ...o,
    }));

  it("filters by subset labels, maps health, weights and metadata, groups by locality", () => {
    const push = contextOf({
      services: [kubeService("reviews")],
      endpoints: {
        [host("reviews")]: endpointsOf([
          { weight: 3 },
          { labels: { app: "reviews", version: "v2", "security.istio.io/tlsMode": "istio" } },
          { health: "HEALTH_STATUS_UNHEALTHY" },
          { health: "HEALTH_STATUS_DRAINING" },
          { labels: { app: "reviews", version: "v1" }, locality: { region: "us-west1", zone: "us-west1-a" } },
          { address: "not-an-ip.example.com" },
        ]),
      },
      config: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec: {host: reviews, subsets: [{name: v1, labels: {version: v1}}]}
`,
    });
    const cla = endpoints(push, sidecar(), [outbound("reviews", "default", "v1")]).get(
      outbound("reviews", "default", "v1"),
    )!;
    const json = ClusterLoadAssignment.toJSON(cla) as { endpoints: Array<Record<string, unknown>> };
    assert.deepEqual(
      cla.endpoints.map((l) => [
        l.locality?.zone,
        l.loadBalancingWeight,
        l.priority,
        l.lbEndpoints.map((e) => e.endpoint?.address?.socketAddress?.address),
      ]),
      [
        ["us-east1-b", 3, 0, ["10.1.0.1"]],
        ["us-west1-a", 1, 0, ["10.1.0.5"]],
      ],
    );
    const first = cla.endpoints[0]!.lbEndpoints[0]!;
    assert.equal(
      (json.endpoints[0] as { lbEndpoints: Array<{ healthStatus: string }> }).lbEndpoints[0]?.healthStatus,
      "HEALTHY",
    );
    assert.equal(first.loadBalancingWeight, 3);
    assert.deepEqual(first.metadata?.filterMetadata["envoy.transport_socket_match"], { tlsMode: "istio" });
    assert.deepEqual(first.metadata?.filterMetadata.istio, { workload: "reviews-0;default;reviews;v1;" });
    // No tlsMode label: no transport socket match (plaintext under auto mTLS).
    const unlabelled = cla.endpoints[1]!.lbEndpoints[0]!;
    assert.equal(unlabelled.metadata?.filterMetadata["envoy.transport_socket_match"], undefined);
  });

  it("keeps draining endpoints only for persistent-session services, and sets priorities only with outlier detection", () => {
    const eps = endpointsOf([
      { health: "HEALTH_STATUS_DRAINING" },
      { locality: { region: "us-east1", zone: "us-east1-c" } },
      { locality: { region: "eu-west1", zone: "eu-west1-a" } },
    ]);
    const proxy = sidecar("default", { app: "productpage" }, "10.0.0.1", {
      region: "us-east1",
      zone: "us-east1-b",
      subZone: "",
    });
    const plain = contextOf({ services: [kubeService("reviews")], endpoints: { [host("reviews")]: eps } });
    const cla = endpoints(plain, proxy, [outbound("reviews")]).get(outbound("reviews"))!;
    assert.deepEqual(
      cla.endpoints.map((l) => [l.locality?.zone, l.priority]),
      [
        ["eu-west1-a", 0],
        ["us-east1-c", 0],
      ],
    );
    const withOutlier = contextOf({
      services: [kubeService("reviews", "default", { labels: { "istio.io/persistent-session": "session" } })],
      endpoints: { [host("reviews")]: eps },
      config: `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews}
spec: {host: reviews, trafficPolicy: {outlierDetection: {consecutive5xxErrors: 3}}}
`,
    });
    const failover = endpoints(withOutlier, proxy, [outbound("reviews")]).get(outbound("reviews"))!;
    assert.deepEqual(
      failover.endpoints.map((l) => [l.locality?.zone, l.priority, l.lbEndpoints.length]),
      [
        ["eu-west1-a", 2, 1],
        ["us-east1-b", 0, 1],
        ["us-east1-c", 1, 1],
      ],
    );
    const draining = failover.endpoints[1]!.lbEndpoints[0]!;
    assert.equal(draining.healthStatus, EnvoyHealthStatus.DRAINING);
    const cluster = clusters(withOutlier, proxy).get(outbound("reviews"))!;
    assert.ok(cluster.commonLbConfig?.overrideHostStatus?.statuses.includes(EnvoyHealthStatus.DRAINING));
  });

  it("pushes EDS only for watched hosts on endpoint-only changes, CDS on any", () => {
    const watched = new Set([outbound("reviews"), outbound("reviews", "default", "v1")]);
    const change = (hosts: string[]) => ({ full: false, endpointHosts: new Set(hosts) });
    assert.ok(sidecarEndpointsNeedPush(change([host("reviews")]), watched));
    assert.ok(!sidecarEndpointsNeedPush(change([host("ratings")]), watched));
    assert.ok(sidecarEndpointsNeedPush({ full: true, endpointHosts: new Set() }, watched));
    assert.ok(sidecarClustersNeedPush(change([host("ratings")]), "*"));
    assert.ok(!sidecarClustersNeedPush(change([]), "*"));
  });

  it("rebuilds only the changed host's assignment from a shared cache", () => {
    const base = contextOf({
      services: [kubeService("reviews"), kubeService("ratings")],
      endpoints: {
        [host("reviews")]: endpointsOf([{}]),
        [host("ratings")]: endpointsOf([{ labels: { app: "ratings" } }]),
      },
    });
    const cache = new XdsCache();
    const names = [outbound("reviews"), outbound("ratings")];
    endpoints(base, sidecar(), names, cache);
    const misses = cache.stats.misses;
    const shard = (hostname: string, list: Array<Record<string, unknown>>) =>
      [
        hostname,
        {
          hostname,
          endpoints: EndpointShard.fromJSON({
            endpoints: list.map((e) => ({ health: "HEALTH_STATUS_HEALTHY", ...e })),
          }).endpoints,
        },
      ] as const;
    const next = base.withEndpoints(
      new Map([
        shard(host("reviews"), endpointsOf([{}, {}])),
        shard(host("ratings"), endpointsOf([{ labels: { app: "ratings" } }])),
      ]),
    );
    const after = endpoints(next, sidecar(), names, cache);
    assert.equal(after.get(outbound("reviews"))?.endpoints[0]?.lbEndpoints.length, 2);
    assert.equal(cache.stats.misses - misses, 1, "only reviews was rebuilt");
  });
});
