import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { configKey } from "@sextant/model";
import { type Any, type ConfigResource, EndpointShard, HealthStatus, Service } from "@sextant/proto";
import { DownstreamTlsContext, HttpRBAC, TypeUrl, UpstreamTlsContext } from "@sextant/proto/envoy";
import { checkGoldenDir } from "@sextant/testing";
import { decodeSpec, findKind, parseDocuments } from "@sextant/validation";
import { parse, stringify } from "yaml";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import { anyToJson } from "../src/server/debug.js";
import { GENERATORS } from "../src/translate/generators.js";
import { grpcNode } from "./harness.js";

const testdata = fileURLToPath(new URL("./testdata/grpc", import.meta.url));

interface GoldenInput {
  /** The proxy asking: its namespace, labels, address and service account (Istio's node metadata). */
  proxy?: { namespace?: string; labels?: Record<string, string>; ip?: string; serviceAccount?: string };
  services: Array<Record<string, unknown>>;
  endpoints?: Array<{ hostname: string; endpoints: Array<Record<string, unknown>> }>;
  config?: string;
  /** The SPIFFE trust domain push is configured with (default cluster.local). */
  trustDomain?: string;
  subscribe: Partial<Record<"listeners" | "routes" | "clusters" | "endpoints", string[]>>;
}

const TYPES = {
  listeners: TypeUrl.Listener,
  routes: TypeUrl.RouteConfiguration,
  clusters: TypeUrl.Cluster,
  endpoints: TypeUrl.ClusterLoadAssignment,
} as const;

/** Builds the snapshot a golden case describes: config as ingest stores it, the registry as discovery writes it. */
function contextOf(input: GoldenInput): PushContext {
  const config = new Map<string, ConfigResource>();
  for (const { value } of parseDocuments(input.config ?? "", { maxDocuments: 100 }).documents) {
    const document = value as {
      kind: string;
      apiVersion: string;
      metadata: { name: string; namespace?: string };
      spec: unknown;
    };
    const decoded = decodeSpec(document.kind, document.spec);
    assert.deepEqual(decoded.errors, [], `${document.kind} ${document.metadata.name} is invalid`);
    const resource: ConfigResource = {
      kind: document.kind,
      apiVersion: document.apiVersion,
      namespace: document.metadata.namespace ?? "default",
      name: document.metadata.name,
      labels: {},
      annotations: {},
      generation: 1,
      revision: 0,
      spec: findKind(document.kind)!.codec.toJSON(decoded.value) as Record<string, unknown>,
    };
    config.set(configKey(resource), resource);
  }
  const services = new Map(input.services.map((s) => [String(s.hostname), Service.fromJSON(s)]));
  const shards = new Map(
    (input.endpoints ?? []).map((shard) => [
      shard.hostname,
      {
        hostname: shard.hostname,
        endpoints: EndpointShard.fromJSON({
          endpoints: shard.endpoints.map((e) => ({ health: "HEALTH_STATUS_HEALTHY", ...e })),
        }).endpoints,
      },
    ]),
  );
  return PushContext.build({
    config,
    services,
    endpointShards: shards,
    domainSuffix: "cluster.local",
    ...(input.trustDomain ? { trustDomain: input.trustDomain } : {}),
  });
}

/**
 * An Any as JSON, as /debug/config_dump shows it, with the nested Anys the
 * server listeners and mTLS clusters hold (RBAC, TLS contexts) decoded too.
 */
function dumpAny(any: Any): unknown {
  const expand = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(expand);
    if (value === null || typeof value !== "object") return value;
    const object = value as Record<string, unknown>;
    const codec = typeof object.typeUrl === "string" ? NESTED[object.typeUrl] : undefined;
    if (codec && typeof object.value === "string") {
      const decoded = codec.toJSON(codec.decode(Buffer.from(object.value, "base64")) as never);
      return { "@type": object.typeUrl, ...(expand(decoded) as object) };
    }
    return Object.fromEntries(Object.entries(object).map(([key, inner]) => [key, expand(inner)]));
  };
  return expand(anyToJson(any));
}

const NESTED: Record<string, { decode(bytes: Uint8Array): unknown; toJSON(message: never): unknown }> = {
  [TypeUrl.RBAC]: HttpRBAC,
  [TypeUrl.DownstreamTlsContext]: DownstreamTlsContext,
  [TypeUrl.UpstreamTlsContext]: UpstreamTlsContext,
};

function render(input: GoldenInput, cache = new XdsCache()): Record<string, string> {
  const push = contextOf(input);
  const proxy = parseProxy(
    grpcNode("golden", {
      NAMESPACE: input.proxy?.namespace ?? "default",
      ...(input.proxy?.labels ? { LABELS: input.proxy.labels } : {}),
      ...(input.proxy?.ip ? { INSTANCE_IPS: input.proxy.ip } : {}),
      ...(input.proxy?.serviceAccount ? { SERVICE_ACCOUNT: input.proxy.serviceAccount } : {}),
    }),
  );
  const out: Record<string, string> = {};
  for (const [type, typeUrl] of Object.entries(TYPES)) {
    const names = input.subscribe[type as keyof typeof TYPES];
    if (!names) continue;
    const resources = GENERATORS.grpc.get(typeUrl)!.generate({ push, proxy, cache }, new Set(names));
    out[type] = stringify(
      resources.map((r) => ({ sources: r.sources, resource: dumpAny(r.resource) })),
      { aliasDuplicateObjects: false },
    );
  }
  return out;
}

describe("proxyless gRPC translation (golden files)", () => {
  it("matches testdata/grpc/<case>.<type>.out.yaml", () => {
    const produced = checkGoldenDir(testdata, (testCase) => render(parse(testCase.input) as GoldenInput));
    assert.ok(produced.length >= 8, `only ${produced.length} golden outputs`);
  });

  it("gives the same output from a shared cache as from a fresh one, across namespaces", () => {
    const input = parse(
      `services:
  - {hostname: reviews.default.svc.cluster.local, namespace: default, name: reviews, ports: [{name: grpc, number: 9080}]}
  - {hostname: reviews.prod.svc.cluster.local, namespace: prod, name: reviews, ports: [{name: grpc, number: 9080}]}
subscribe:
  listeners: ["reviews:9080"]
  routes: ["reviews:9080"]
`,
    ) as GoldenInput;
    const shared = new XdsCache();
    for (const namespace of ["default", "prod", "default"]) {
      const withShared = render({ ...input, proxy: { namespace } }, shared);
      const fresh = render({ ...input, proxy: { namespace } });
      assert.deepEqual(withShared, fresh, `namespace ${namespace}`);
    }
    assert.ok(shared.stats.hits > 0, "the shared cache was never hit");
  });

  it("keys server listeners by the proxy's labels, so a shared cache never mixes workloads", () => {
    const input = parse(
      `services: [{hostname: reviews.default.svc.cluster.local, namespace: default, name: reviews, ports: [{name: grpc, number: 9080}]}]
config: |
  apiVersion: security.istio.io/v1
  kind: PeerAuthentication
  metadata: {name: reviews, namespace: default}
  spec:
    selector: {matchLabels: {app: reviews}}
    mtls: {mode: STRICT}
  ---
  apiVersion: security.istio.io/v1
  kind: AuthorizationPolicy
  metadata: {name: ratings, namespace: default}
  spec:
    selector: {matchLabels: {app: ratings}}
    action: DENY
    rules: [{to: [{operation: {paths: ["/admin/*"]}}]}]
subscribe: {listeners: ["xds.istio.io/grpc/lds/inbound/10.1.0.1:9080"]}
`,
    ) as GoldenInput;
    const shared = new XdsCache();
    const outputs = new Set<string>();
    for (const app of ["reviews", "ratings", "reviews", "ratings"]) {
      const proxy = { namespace: "default", labels: { app } };
      const withShared = render({ ...input, proxy }, shared);
      assert.deepEqual(withShared, render({ ...input, proxy }), `app ${app}`);
      outputs.add(withShared.listeners ?? "");
    }
    assert.equal(outputs.size, 2, "reviews and ratings got the same listener");
    assert.ok(shared.stats.hits > 0, "the shared cache was never hit");
  });

  it("follows the endpoints' service accounts in ISTIO_MUTUAL clusters, and pushes CDS when they change", () => {
    const host = "reviews.default.svc.cluster.local";
    const name = `outbound|9080||${host}`;
    const input = parse(
      `services: [{hostname: ${host}, namespace: default, name: reviews, ports: [{name: grpc, number: 9080}]}]
config: |
  apiVersion: networking.istio.io/v1
  kind: DestinationRule
  metadata: {name: reviews}
  spec: {host: reviews, trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}}
subscribe: {clusters: ["${name}"]}
`,
    ) as GoldenInput;
    const shard = (accounts: string[]) =>
      new Map([
        [
          host,
          {
            hostname: host,
            endpoints: EndpointShard.fromJSON({
              endpoints: accounts.map((serviceAccount, i) => ({
                address: `10.1.0.${i + 1}`,
                namespace: "default",
                serviceAccount,
              })),
            }).endpoints,
          },
        ],
      ]);
    const proxy = parseProxy(grpcNode("golden", { NAMESPACE: "default" }));
    const cache = new XdsCache();
    const generator = GENERATORS.grpc.get(TypeUrl.Cluster)!;
    const sans = (push: PushContext) =>
      JSON.stringify(
        generator.generate({ push, proxy, cache }, new Set([name])).map((r) => dumpAny(r.resource)),
      )
        .match(/spiffe:\/\/[^"]+/g)
        ?.sort() ?? [];
    const first = contextOf(input).withEndpoints(shard(["bookinfo-reviews"]));
    assert.deepEqual(sans(first), ["spiffe://cluster.local/ns/default/sa/bookinfo-reviews"]);
    const second = first.withEndpoints(shard(["bookinfo-reviews", "reviews-v3"]));
    assert.equal(second.configVersion, first.configVersion, "an endpoint change kept the config version");
    assert.deepEqual(sans(second), [
      "spiffe://cluster.local/ns/default/sa/bookinfo-reviews",
      "spiffe://cluster.local/ns/default/sa/reviews-v3",
    ]);
    const change = (hosts: string[]) => ({ full: false, endpointHosts: new Set(hosts) });
    assert.ok(generator.needsPush(change([host]), new Set([name])), "CDS not pushed on its host's endpoints");
    assert.ok(!generator.needsPush(change(["ratings.default.svc.cluster.local"]), new Set([name])));
  });

  it("drops unhealthy endpoints", () => {
    const input = parse(
      `services: [{hostname: a.default.svc.cluster.local, namespace: default, name: a, ports: [{name: grpc, number: 80}]}]
subscribe: {endpoints: ["outbound|80||a.default.svc.cluster.local"]}
`,
    ) as GoldenInput;
    input.endpoints = [
      {
        hostname: "a.default.svc.cluster.local",
        endpoints: [
          { address: "10.0.0.1", ports: { grpc: 80 } },
          {
            address: "10.0.0.2",
            ports: { grpc: 80 },
            health: HealthStatus[HealthStatus.HEALTH_STATUS_UNHEALTHY],
          },
        ],
      },
    ];
    assert.match(render(input).endpoints ?? "", /10\.0\.0\.1/);
    assert.doesNotMatch(render(input).endpoints ?? "", /10\.0\.0\.2/);
  });
});
