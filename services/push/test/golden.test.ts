import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { type Any, EndpointShard, HealthStatus } from "@sextant/proto";
import { TypeUrl } from "@sextant/proto/envoy";
import { checkGoldenDir, goldenCases } from "@sextant/testing";
import { parse, stringify } from "yaml";
import { XdsCache } from "../src/cache/xds-cache.js";
import { type MeshProxy, parseProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import type { GeneratedResource } from "../src/model/types.js";
import type { GenerationContext } from "../src/translate/generator.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { contextOf, dumpAny, type GoldenInput, TYPES } from "./golden-inputs.js";
import { grpcNode } from "./harness.js";
import { followReferences, inconsistencies, undefinedSubsets } from "./snapshot-consistency.js";
import { snapshotViolations } from "./xds-checks.js";

const testdata = fileURLToPath(new URL("./testdata/grpc", import.meta.url));

/** The proxyless client a case describes. */
function proxyOf(input: GoldenInput): MeshProxy {
  return parseProxy(
    grpcNode("golden", {
      NAMESPACE: input.proxy?.namespace ?? "default",
      ...(input.proxy?.labels ? { LABELS: input.proxy.labels } : {}),
      ...(input.proxy?.ip ? { INSTANCE_IPS: input.proxy.ip } : {}),
      ...(input.proxy?.serviceAccount ? { SERVICE_ACCOUNT: input.proxy.serviceAccount } : {}),
    }),
  );
}

function render(input: GoldenInput, cache = new XdsCache()): Record<string, string> {
  const push = contextOf(input);
  const proxy = proxyOf(input);
  const out: Record<string, string> = {};
  const snapshot: Partial<Record<keyof typeof TYPES, readonly GeneratedResource[]>> = {};
  for (const [type, typeUrl] of Object.entries(TYPES)) {
    const names = input.subscribe[type as keyof typeof TYPES];
    if (!names) continue;
    const resources = XDS_TYPES.generator("grpc", typeUrl)!.generate({ push, proxy, cache }, new Set(names));
    snapshot[type as keyof typeof TYPES] = resources;
    out[type] = stringify(
      resources.map((r) => ({ sources: r.sources, resource: dumpAny(r.resource) })),
      { aliasDuplicateObjects: false },
    );
  }
  // Every resource must also meet Envoy's validate rules and what gRPC checks when it loads them.
  assert.deepEqual(snapshotViolations(snapshot, { proxy: "grpc" }), [], "the snapshot breaks xDS rules");
  return out;
}

describe("proxyless gRPC translation (golden files)", () => {
  it("matches testdata/grpc/<case>.<type>.out.yaml", () => {
    const produced = checkGoldenDir(testdata, (testCase) => render(parse(testCase.input) as GoldenInput));
    assert.ok(produced.length >= 8, `only ${produced.length} golden outputs`);
  });

  it("gives every case's client a consistent snapshot once it follows the names it is sent", () => {
    const decode = (any: Any) => dumpAny(any);
    const problems: string[] = [];
    for (const testCase of goldenCases(testdata)) {
      const input = parse(testCase.input) as GoldenInput;
      const push = contextOf(input);
      const context = { push, proxy: proxyOf(input), cache: new XdsCache() };
      const subscription = Object.fromEntries(
        Object.entries(input.subscribe).map(([type, names]) => [type, new Set(names)]),
      );
      const snapshot = followReferences(
        subscription,
        (type, names) => XDS_TYPES.generator("grpc", TYPES[type])!.generate(context, names),
        decode,
      );
      for (const problem of inconsistencies(snapshot, subscription, decode, undefinedSubsets(push)))
        problems.push(`${testCase.name}: ${problem}`);
    }
    assert.deepEqual(problems, []);
  });

  it("writes header matchers only in the fields every gRPC version parses (C-core 1.51 rejects string_match)", () => {
    const offenders: string[] = [];
    for (const testCase of goldenCases(testdata)) {
      for (const [type, yaml] of Object.entries(render(parse(testCase.input) as GoldenInput)))
        if (/\bstringMatch:/.test(yaml)) offenders.push(`${testCase.name} ${type}`);
    }
    assert.deepEqual(offenders, []);
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
    const generator = XDS_TYPES.generator("grpc", TypeUrl.Cluster)!;
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

  it("logs each load balancer it cannot send as written (testdata/grpc/lb-fallback)", () => {
    const input = parse(readFileSync(`${testdata}/lb-fallback.in.yaml`, "utf8")) as GoldenInput;
    const warnings: Array<{ cluster: string; lbPolicy?: string; minimumRingSize?: number; message: string }> =
      [];
    const logger = {
      warn: (fields: { cluster: string; lbPolicy?: string }, message: string) => {
        warnings.push({ ...fields, message });
      },
    } as unknown as GenerationContext["logger"];
    const context = { push: contextOf(input), proxy: proxyOf(input), cache: new XdsCache(), logger };
    XDS_TYPES.generator("grpc", TypeUrl.Cluster)!.generate(context, new Set(input.subscribe.clusters));
    const subset = (cluster: string) => cluster.split("|")[2];
    assert.deepEqual(
      warnings.map((w) => [subset(w.cluster), w.lbPolicy ?? w.minimumRingSize ?? "", w.message]).sort(),
      [
        ["", "LEAST_REQUEST", "proxyless gRPC cannot apply this load balancer; sending ROUND_ROBIN"],
        [
          "huge-ring",
          10000000,
          "proxyless gRPC rings hold at most 8388608 entries; sending that as minimum_ring_size",
        ],
        ["least-conn", "LEAST_CONN", "proxyless gRPC cannot apply this load balancer; sending ROUND_ROBIN"],
        ["maglev", "", "proxyless gRPC has no MAGLEV load balancer; sending RING_HASH"],
        ["passthrough", "PASSTHROUGH", "proxyless gRPC cannot apply this load balancer; sending ROUND_ROBIN"],
        ["random", "RANDOM", "proxyless gRPC cannot apply this load balancer; sending ROUND_ROBIN"],
      ],
    );
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
