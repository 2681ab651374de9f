// EnvoyFilter in push, beyond the golden cases: which filters a proxy takes
// and in which order, merge semantics, listener filters, the proxyless and
// proxy-version rules, and refused patches through GeneratedResources (what
// connections send), agreeing with the test suite's Envoy checker.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createMetricsRegistry } from "@sextant/observability";
import { messageFromJson, messageToJson } from "@sextant/proto/descriptors";
import { Listener, TypeUrl } from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { envoyFiltersOf, PatchContext, preparedPatches, proxyPatches } from "../src/model/envoy-filter.js";
import { parseProxy } from "../src/model/proxy.js";
import { GeneratedResources } from "../src/server/generated-resources.js";
import { applyEnvoyFilters } from "../src/translate/envoyfilter/apply.js";
import { Applied } from "../src/translate/envoyfilter/common.js";
import { EnvoyFilterFailures } from "../src/translate/envoyfilter/failures.js";
import { patchListener } from "../src/translate/envoyfilter/listeners.js";
import { mergeMessage } from "../src/translate/envoyfilter/merge.js";
import { patchRouteConfiguration } from "../src/translate/envoyfilter/routes.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { contextOf } from "./golden-inputs.js";
import { snapshotViolations } from "./xds-checks.js";

const SERVICES = [
  {
    hostname: "reviews.default.svc.cluster.local",
    namespace: "default",
    name: "reviews",
    addresses: ["10.96.0.10"],
    ports: [{ name: "http", number: 9080, protocol: "HTTP" }],
    selector: { app: "reviews" },
  },
];
const ENDPOINTS = [
  {
    hostname: "reviews.default.svc.cluster.local",
    endpoints: [
      {
        address: "10.0.0.5",
        ports: { http: 9080 },
        labels: { app: "reviews", "security.istio.io/tlsMode": "istio" },
        serviceAccount: "bookinfo-reviews",
        namespace: "default",
      },
    ],
  },
];

function node(metadata: Record<string, unknown> = {}, type = "sidecar") {
  return parseProxy({
    id: `${type}~10.0.0.5~reviews-v1-abc.default~default.svc.cluster.local`,
    metadata: {
      NAMESPACE: "default",
      LABELS: { app: "reviews", version: "v1" },
      INSTANCE_IPS: "10.0.0.5",
      ISTIO_VERSION: "1.30.3",
      ...metadata,
    },
  } as never);
}

function envoyFilter(namespace: string, name: string, spec: string): string {
  return `apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: ${name}, namespace: ${namespace}}\nspec:\n${spec
    .trim()
    .split("\n")
    .map((line) => `  ${line}`)
    .join("\n")}\n`;
}

const pushWith = (...filters: string[]) =>
  contextOf({ services: SERVICES, endpoints: ENDPOINTS, config: filters.join("---\n") });

const REMOVE_LISTENERS = "configPatches: [{applyTo: LISTENER, patch: {operation: REMOVE}}]";

describe("EnvoyFilter: which filters a proxy takes", () => {
  it("orders by priority, then the root namespace first, then name; other namespaces and selectors that miss are left out", () => {
    const push = pushWith(
      envoyFilter("default", "b", REMOVE_LISTENERS),
      envoyFilter("default", "a", REMOVE_LISTENERS),
      envoyFilter("istio-system", "z", REMOVE_LISTENERS),
      envoyFilter("default", "early", `priority: -5\n${REMOVE_LISTENERS}`),
      envoyFilter("istio-system", "late", `priority: 10\n${REMOVE_LISTENERS}`),
      envoyFilter("prod", "elsewhere", REMOVE_LISTENERS),
      envoyFilter("default", "ratings", `workloadSelector: {labels: {app: ratings}}\n${REMOVE_LISTENERS}`),
      envoyFilter("default", "reviews", `workloadSelector: {labels: {app: reviews}}\n${REMOVE_LISTENERS}`),
      envoyFilter(
        "default",
        "targeted",
        `targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: gw}]\n${REMOVE_LISTENERS}`,
      ),
    );
    const names = (proxy = node()) =>
      envoyFiltersOf(push.envoyFilters, push.rootNamespace, proxy).map(
        (c) => `${c.ref.namespace}/${c.ref.name}`,
      );
    assert.deepEqual(names(), [
      "default/early",
      "istio-system/z",
      "default/a",
      "default/b",
      "default/reviews",
      "istio-system/late",
    ]);
    // A Gateway API gateway takes the filters that target its Gateway, and selector-based ones.
    const gateway = node(
      { LABELS: { app: "reviews", "gateway.networking.k8s.io/gateway-name": "gw" } },
      "router",
    );
    assert.ok(names(gateway).includes("default/targeted"));
  });

  it("applies none to proxyless gRPC clients, as Istio's gRPC generators never do", () => {
    const push = pushWith(envoyFilter("istio-system", "all", REMOVE_LISTENERS));
    assert.ok(proxyPatches(push.envoyFilters, push.rootNamespace, node()));
    assert.equal(proxyPatches(push.envoyFilters, push.rootNamespace, node({ GENERATOR: "grpc" })), undefined);
  });

  it("matches proxyVersion as a regex against ISTIO_VERSION and metadata entries exactly", () => {
    const push = pushWith(
      envoyFilter(
        "default",
        "versioned",
        `configPatches:
  - applyTo: LISTENER
    match: {proxy: {proxyVersion: '^1\\.30.*', metadata: {DNS_CAPTURE: "true"}}}
    patch: {operation: REMOVE}`,
      ),
    );
    const patched = (metadata: Record<string, unknown>) =>
      proxyPatches(push.envoyFilters, push.rootNamespace, node(metadata)) !== undefined;
    assert.equal(patched({ DNS_CAPTURE: "true" }), true);
    assert.equal(patched({}), false, "metadata missing");
    assert.equal(patched({ DNS_CAPTURE: "true", ISTIO_VERSION: "1.29.0" }), false, "version does not match");
    assert.equal(patched({ DNS_CAPTURE: "true", ISTIO_VERSION: "" }), false, "no version at all");
  });
});

describe("EnvoyFilter: merge semantics (Istio's merge.Merge)", () => {
  const CLUSTER = "envoy.config.cluster.v3.Cluster";

  it("replaces scalars and Durations, appends lists, merges messages and switches oneof members", () => {
    const target = messageToJson(
      CLUSTER,
      messageFromJson(CLUSTER, {
        name: "c",
        connect_timeout: "10.5s",
        type: "EDS",
        eds_cluster_config: { service_name: "c" },
        circuit_breakers: { thresholds: [{ max_connections: 10 }] },
        common_lb_config: { healthy_panic_threshold: { value: 50 } },
      }),
    );
    const merged = mergeMessage(CLUSTER, target, {
      connectTimeout: "2s",
      type: "STATIC",
      circuitBreakers: { thresholds: [{ maxRequests: 5 }] },
      commonLbConfig: { localityWeightedLbConfig: {} },
    });
    assert.equal(
      merged.connectTimeout,
      "2s",
      "a Duration is replaced, not merged (10.5s + 2s would keep the nanos)",
    );
    assert.equal(merged.type, "STATIC");
    assert.deepEqual(merged.circuitBreakers, { thresholds: [{ maxConnections: 10 }, { maxRequests: 5 }] });
    assert.deepEqual(merged.commonLbConfig, {
      healthyPanicThreshold: { value: 50 },
      localityWeightedLbConfig: {},
    });
    assert.deepEqual(merged.edsClusterConfig, { serviceName: "c" });
  });
});

describe("EnvoyFilter: transport socket merges (Istio's cluster and filter chain rules)", () => {
  it("merges a cluster patch's transport socket into the match of that name, and nothing else of the patch", () => {
    const push = pushWith(
      envoyFilter(
        "default",
        "sni",
        `configPatches:
  - applyTo: CLUSTER
    match: {context: SIDECAR_OUTBOUND, cluster: {service: reviews.default.svc.cluster.local}}
    patch:
      operation: MERGE
      value:
        connect_timeout: 9s
        transport_socket:
          name: envoy.transport_sockets.tls
          typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext, sni: patched.example}`,
      ),
    );
    const generated = new GeneratedResources(XDS_TYPES, new XdsCache(), () => pushWith("")).generate(
      node(),
      TypeUrl.Cluster,
      "*",
    );
    const outcome = applyEnvoyFilters(push, node(), TypeUrl.Cluster, generated ?? [], true);
    assert.deepEqual(outcome.failures, []);
    const name = "outbound|9080||reviews.default.svc.cluster.local";
    const before = (generated ?? []).find((r) => r.name === name);
    const after = outcome.resources.find((r) => r.name === name);
    assert.ok(before && after);
    const json = (resource: typeof before) =>
      messageToJson("envoy.config.cluster.v3.Cluster", resource.resource.value);
    const [was, is] = [json(before), json(after)];
    assert.equal(is.connectTimeout, was.connectTimeout, "the rest of the patch does not apply");
    const sockets = (cluster: Record<string, unknown>) =>
      (
        cluster.transportSocketMatches as Array<{
          name: string;
          transportSocket: { typedConfig: { sni?: string } };
        }>
      ).map((m) => [m.name, m.transportSocket.typedConfig.sni]);
    assert.deepEqual(
      sockets(is).find(([match]) => match === "tlsMode-istio"),
      ["tlsMode-istio", "patched.example"],
    );
    assert.notDeepEqual(sockets(was), sockets(is));
  });
});

describe("EnvoyFilter: listener filters", () => {
  it("inserts, merges and removes listener filters by name", () => {
    const push = pushWith(
      envoyFilter(
        "default",
        "lf",
        `configPatches:
  - applyTo: LISTENER_FILTER
    match: {listener: {name: l, listenerFilter: envoy.filters.listener.tls_inspector}}
    patch:
      operation: INSERT_BEFORE
      value: {name: envoy.filters.listener.http_inspector, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector}}
  - applyTo: LISTENER_FILTER
    match: {listener: {name: l, listenerFilter: envoy.filters.listener.original_dst}}
    patch: {operation: REMOVE}
  - applyTo: LISTENER_FILTER
    match: {listener: {name: l, listenerFilter: envoy.filters.listener.tls_inspector}}
    patch: {operation: MERGE, value: {filter_disabled: {destination_port_range: {start: 80, end: 81}}}}`,
      ),
    );
    const patches = proxyPatches(push.envoyFilters, push.rootNamespace, node());
    assert.ok(patches);
    const listener: Record<string, unknown> = {
      name: "l",
      listenerFilters: [
        { name: "envoy.filters.listener.original_dst" },
        { name: "envoy.filters.listener.tls_inspector" },
      ],
      filterChains: [{ filters: [{ name: "x" }] }],
    };
    const applied = new Applied();
    assert.equal(patchListener(listener, patches, PatchContext.SIDECAR_OUTBOUND, applied), true);
    assert.deepEqual(listener.listenerFilters, [
      {
        name: "envoy.filters.listener.http_inspector",
        typedConfig: {
          "@type": "type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector",
        },
      },
      {
        name: "envoy.filters.listener.tls_inspector",
        filterDisabled: { destinationPortRange: { start: 80, end: 81 } },
      },
    ]);
    assert.deepEqual(
      applied.refs.map((ref) => ref.name),
      ["lf"],
    );
  });
});

describe("EnvoyFilter: virtual hosts and routes", () => {
  it("replaces, removes and merges virtual hosts in patch order, then removes and merges the routes of those kept", () => {
    const push = pushWith(
      envoyFilter(
        "default",
        "vh",
        `configPatches:
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: old}}}
    patch: {operation: REPLACE, value: {name: new, domains: [new.example]}}
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: gone}}}
    patch: {operation: REMOVE}
  - applyTo: VIRTUAL_HOST
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: new}}}
    patch: {operation: MERGE, value: {include_request_attempt_count: true}}
  - applyTo: HTTP_ROUTE
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: kept, route: {name: drop}}}}
    patch: {operation: REMOVE}
  - applyTo: HTTP_ROUTE
    match: {context: SIDECAR_OUTBOUND, routeConfiguration: {vhost: {name: kept, route: {name: keep}}}}
    patch: {operation: MERGE, value: {route: {timeout: 5s}}}`,
      ),
    );
    const patches = proxyPatches(push.envoyFilters, push.rootNamespace, node());
    assert.ok(patches);
    const route = (name: string) => ({ name, match: { prefix: "/" }, route: { cluster: "c" } });
    const config: Record<string, unknown> = {
      name: "9080",
      virtualHosts: [
        { name: "old", domains: ["old.example"], routes: [route("old-route")] },
        { name: "gone", domains: ["gone.example"] },
        { name: "kept", domains: ["kept.example"], routes: [route("drop"), route("keep")] },
      ],
    };
    const applied = new Applied();
    patchRouteConfiguration(config, patches, PatchContext.SIDECAR_OUTBOUND, applied);
    assert.deepEqual(config.virtualHosts, [
      // The MERGE matches the host as the REPLACE before it left it.
      { name: "new", domains: ["new.example"], includeRequestAttemptCount: true },
      {
        name: "kept",
        domains: ["kept.example"],
        routes: [{ name: "keep", match: { prefix: "/" }, route: { cluster: "c", timeout: "5s" } }],
      },
    ]);
    assert.deepEqual(
      applied.refs.map((ref) => ref.name),
      ["vh"],
    );
  });
});

describe("EnvoyFilter through GeneratedResources (what connections send)", () => {
  const AFTER_ROUTER = `configPatches:
  - applyTo: HTTP_FILTER
    match: {context: SIDECAR_INBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager}}}}
    patch:
      operation: ADD
      value: {name: late, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb}}`;

  function serve(config: string, proxy = node()) {
    const push = pushWith(config);
    const registry = createMetricsRegistry("push");
    const warnings: unknown[] = [];
    const failures = new EnvoyFilterFailures(registry, { warn: (object: unknown) => warnings.push(object) });
    const resources = new GeneratedResources(XDS_TYPES, new XdsCache(), () => push, undefined, failures);
    const listeners = resources.generate(proxy, TypeUrl.Listener, "*") ?? [];
    return { push, registry, warnings, failures, listeners };
  }

  it("sends the unpatched listener when the patch would make Envoy reject it, and reports the failure once per distinct failure", async () => {
    const unpatched = serve("").listeners;
    const { listeners, failures, warnings, registry, push } = serve(
      envoyFilter("default", "late", AFTER_ROUTER),
    );
    assert.deepEqual(listeners, unpatched);
    const [failure] = failures.recent();
    assert.ok(failure);
    assert.equal(failure.resource, "virtualInbound");
    assert.deepEqual(failure.filters, [{ kind: "EnvoyFilter", namespace: "default", name: "late" }]);
    assert.match(failure.reason, /is terminal but not the last HTTP filter/);
    assert.equal(warnings.length, 1);
    new GeneratedResources(XDS_TYPES, new XdsCache(), () => push, undefined, failures).generate(
      node(),
      TypeUrl.Listener,
      "*",
    );
    assert.equal(warnings.length, 1, "the same failure again is counted, not logged again");
    assert.equal(failures.recent()[0]?.count, 2);
    assert.match(
      await registry.metrics(),
      /sextant_envoyfilter_patch_rejected_total\{envoyfilter="default\/late",type="Listener"[^}]*\} 2/,
    );
  });

  it("agrees with the test suite's Envoy checker about the refused listener", () => {
    const { listeners, push } = serve("");
    const inbound = listeners.find((r) => r.name === "virtualInbound");
    assert.ok(inbound);
    const patches = proxyPatches(push.envoyFilters, push.rootNamespace, node());
    assert.equal(patches, undefined);
    const withFilter = pushWith(envoyFilter("default", "late", AFTER_ROUTER));
    const forced = messageToJson("envoy.config.listener.v3.Listener", inbound.resource.value);
    const proxyPatchSet = proxyPatches(withFilter.envoyFilters, withFilter.rootNamespace, node());
    assert.ok(proxyPatchSet);
    patchListener(forced, proxyPatchSet, PatchContext.SIDECAR_INBOUND, new Applied());
    const decoded = Listener.decode(messageFromJson("envoy.config.listener.v3.Listener", forced));
    const violations = snapshotViolations({ listeners: [decoded] });
    assert.ok(
      violations.some((v) => v.includes("virtualInbound")),
      `the checker should refuse it too: ${violations.join("\n")}`,
    );
  });

  it("sends a resource unpatched, naming the proxy's EnvoyFilters, when patching itself throws", () => {
    const push = pushWith(
      envoyFilter(
        "default",
        "merge",
        "configPatches: [{applyTo: CLUSTER, patch: {operation: MERGE, value: {}}}]",
      ),
    );
    const [config] = push.envoyFilters;
    assert.ok(config);
    // A value that no longer decodes (prepared values always do): the merge throws.
    const [patch] = preparedPatches(config).patches;
    assert.ok(patch);
    (patch as { value: unknown }).value = { notAClusterField: 1 };
    const generated = new GeneratedResources(XDS_TYPES, new XdsCache(), () => pushWith("")).generate(
      node(),
      TypeUrl.Cluster,
      "*",
    );
    const outcome = applyEnvoyFilters(push, node(), TypeUrl.Cluster, generated ?? [], true);
    assert.deepEqual(outcome.resources, generated);
    assert.ok(outcome.failures.length > 0);
    for (const failure of outcome.failures) {
      assert.deepEqual(failure.filters, [{ kind: "EnvoyFilter", namespace: "default", name: "merge" }]);
      assert.match(failure.reason, /^patching failed: .*notAClusterField/);
    }
  });

  it("leaves proxyless gRPC clients' resources alone", () => {
    const proxy = node({ GENERATOR: "grpc" });
    const removeAll = envoyFilter("istio-system", "all", REMOVE_LISTENERS);
    const push = pushWith(removeAll);
    const resources = new GeneratedResources(XDS_TYPES, new XdsCache(), () => push);
    const before = new GeneratedResources(XDS_TYPES, new XdsCache(), () => pushWith(""));
    const names = new Set(["reviews.default.svc.cluster.local:9080"]);
    assert.equal(before.generate(proxy, TypeUrl.Listener, names)?.length, 1);
    assert.deepEqual(
      resources.generate(proxy, TypeUrl.Listener, names),
      before.generate(proxy, TypeUrl.Listener, names),
    );
  });
});
