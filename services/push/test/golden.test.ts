import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { configKey } from "@sextant/model";
import { type ConfigResource, EndpointShard, HealthStatus, Service } from "@sextant/proto";
import { TypeUrl } from "@sextant/proto/envoy";
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
  proxy?: { namespace?: string };
  services: Array<Record<string, unknown>>;
  endpoints?: Array<{ hostname: string; endpoints: Array<Record<string, unknown>> }>;
  config?: string;
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
  return PushContext.build({ config, services, endpointShards: shards, domainSuffix: "cluster.local" });
}

function render(input: GoldenInput, cache = new XdsCache()): Record<string, string> {
  const push = contextOf(input);
  const proxy = parseProxy(grpcNode("golden", { NAMESPACE: input.proxy?.namespace ?? "default" }));
  const out: Record<string, string> = {};
  for (const [type, typeUrl] of Object.entries(TYPES)) {
    const names = input.subscribe[type as keyof typeof TYPES];
    if (!names) continue;
    const resources = GENERATORS.grpc.get(typeUrl)!.generate({ push, proxy, cache }, new Set(names));
    out[type] = stringify(
      resources.map((r) => ({ sources: r.sources, resource: anyToJson(r.resource) })),
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
