// The cache's dependency tracking: what a config change drops (istiod's
// ConfigsUpdated scoping) and what sidecars of different workloads share.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EndpointShard, Service } from "@sextant/proto";
import { TypeUrl } from "@sextant/proto/envoy";
import {
  ANY_VIRTUAL_SERVICE,
  configChanges,
  mergedConfigs,
  routeDependencies,
  SERVICES,
  UNPLACED_VIRTUAL_SERVICE,
  virtualServiceHost,
} from "../src/cache/dependencies.js";
import { sourceLabelsSelection } from "../src/cache/selection.js";
import { XdsCache } from "../src/cache/xds-cache.js";
import { type MeshProxy, parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import type { ConfigChange, GeneratedResource, PushChange } from "../src/model/types.js";
import { GeneratedResources } from "../src/server/generated-resources.js";
import { PushQueue } from "../src/server/push-queue.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { bookinfo, ratingsVirtualService, sidecarProxy } from "./sidecar-routes.fixtures.test.js";
import type { ConfigItem } from "./stored-config.js";

const RATINGS = "ratings.default.svc.cluster.local";
const REVIEWS = "reviews.default.svc.cluster.local";

const reviewsRule = (subsets: string[]): ConfigItem => ({
  kind: "DestinationRule",
  name: "reviews",
  spec: { host: "reviews", subsets: subsets.map((name) => ({ name, labels: { version: name } })) },
});

const mongoVirtualService = (weight: number): ConfigItem => ({
  kind: "VirtualService",
  name: "mongodb",
  spec: {
    hosts: ["mongodb"],
    tcp: [
      {
        route: [
          { destination: { host: "mongodb" }, weight: 100 - weight },
          { destination: { host: "ratings" }, weight },
        ],
      },
    ],
  },
});

const routeTo = (host: string) => [{ route: [{ destination: { host } }] }];

function sorted(set: ReadonlySet<string>): string[] {
  return [...set].sort();
}

describe("configChanges (what a new snapshot changed)", () => {
  it("is nothing for the same config, and everything without a previous snapshot", () => {
    const push = bookinfo([ratingsVirtualService(routeTo("ratings"))]);
    const again = bookinfo([ratingsVirtualService(routeTo("ratings"))]);
    assert.deepEqual(configChanges(push, again), { all: false, kinds: new Set(), tokens: new Set() });
    assert.equal(configChanges(undefined, push).all, true);
  });

  it("names a changed VirtualService's kind and its hosts", () => {
    const before = bookinfo([ratingsVirtualService(routeTo("ratings")), reviewsRule(["v1"])]);
    const after = bookinfo([ratingsVirtualService(routeTo("reviews")), reviewsRule(["v1"])]);
    const change = configChanges(before, after);
    assert.equal(change.all, false);
    assert.deepEqual(sorted(change.kinds), ["VirtualService"]);
    assert.deepEqual(
      sorted(change.tokens),
      sorted(new Set([ANY_VIRTUAL_SERVICE, virtualServiceHost(RATINGS)])),
    );
  });

  it("names the hosts of an added and of a removed VirtualService", () => {
    const none = bookinfo([]);
    const one = bookinfo([ratingsVirtualService(routeTo("ratings"))]);
    assert.deepEqual(
      sorted(configChanges(none, one).tokens),
      sorted(new Set([ANY_VIRTUAL_SERVICE, virtualServiceHost(RATINGS)])),
    );
    assert.deepEqual(
      sorted(configChanges(one, none).tokens),
      sorted(new Set([ANY_VIRTUAL_SERVICE, virtualServiceHost(RATINGS)])),
    );
  });

  it("cannot place a delegate VirtualService (no hosts) or a wildcard host", () => {
    const delegate = (uri: string): ConfigItem => ({
      kind: "VirtualService",
      name: "ratings-delegate",
      spec: { http: [{ match: [{ uri: { prefix: uri } }], route: [{ destination: { host: "ratings" } }] }] },
    });
    assert.deepEqual(
      sorted(configChanges(bookinfo([delegate("/a")]), bookinfo([delegate("/b")])).tokens),
      sorted(new Set([ANY_VIRTUAL_SERVICE, UNPLACED_VIRTUAL_SERVICE])),
    );
    const wildcard = (host: string): ConfigItem => ({
      kind: "VirtualService",
      name: "wildcard",
      spec: { hosts: ["*.default.svc.cluster.local"], http: routeTo(host) },
    });
    assert.ok(
      configChanges(bookinfo([wildcard("ratings")]), bookinfo([wildcard("reviews")])).tokens.has(
        UNPLACED_VIRTUAL_SERVICE,
      ),
    );
  });

  it("names other kinds without tokens, and a registry change as services", () => {
    const change = configChanges(bookinfo([]), bookinfo([reviewsRule(["v1"])]));
    assert.deepEqual(sorted(change.kinds), ["DestinationRule"]);
    assert.deepEqual(sorted(change.tokens), []);
    const registry = (hosts: string[]) =>
      PushContext.build({
        config: new Map(),
        services: new Map(
          hosts.map((host) => [
            `default/${host}`,
            Service.fromJSON({ hostname: host, namespace: "default", name: host.split(".")[0], ports: [] }),
          ]),
        ),
        endpointShards: new Map(),
        domainSuffix: "cluster.local",
      });
    assert.deepEqual(sorted(configChanges(registry([RATINGS]), registry([RATINGS, REVIEWS])).kinds), [
      SERVICES,
    ]);
  });

  it("is everything when a mesh-wide setting changes", () => {
    const inputs = {
      config: new Map(),
      services: new Map(),
      endpointShards: new Map(),
      domainSuffix: "cluster.local",
    };
    const change = configChanges(
      PushContext.build(inputs),
      PushContext.build({ ...inputs, rootNamespace: "mesh-root" }),
    );
    assert.equal(change.all, true);
  });
});

describe("XdsCache.invalidate", () => {
  const resource = (name: string): GeneratedResource => ({
    name,
    resource: { typeUrl: "", value: Buffer.alloc(0) },
    sources: [],
  });
  const change = (kinds: string[], tokens: string[] = []): ConfigChange => ({
    all: false,
    kinds: new Set(kinds),
    tokens: new Set(tokens),
  });

  function filled(): XdsCache {
    const cache = new XdsCache();
    cache.get("any", () => resource("any"));
    cache.get("cds", () => resource("cds"), { class: "sidecar-cds" });
    cache.get("eds", () => resource("eds"), { class: "sidecar-eds" });
    cache.get("lds", () => resource("lds"), { class: "sidecar-lds" });
    cache.get("rds-ratings", () => resource("rds"), routeDependencies(false, [RATINGS]));
    cache.get("rds-reviews", () => resource("rds"), routeDependencies(false, [REVIEWS]));
    cache.get("rds-scoped", () => resource("rds"), routeDependencies(true, [REVIEWS]));
    return cache;
  }

  /** The keys left after change. */
  function kept(change: ConfigChange): string[] {
    const cache = filled();
    const keys = ["any", "cds", "eds", "lds", "rds-ratings", "rds-reviews", "rds-scoped"];
    cache.invalidate(change);
    // A key is kept if asking for it again builds nothing.
    return keys.filter((key) => {
      const misses = cache.stats.misses;
      cache.get(key, () => resource(key));
      return cache.stats.misses === misses;
    });
  }

  it("drops for a VirtualService of one host the listeners, the route configurations holding that host and those of a Sidecar scope", () => {
    assert.deepEqual(kept(change(["VirtualService"], [ANY_VIRTUAL_SERVICE, virtualServiceHost(REVIEWS)])), [
      "cds",
      "eds",
      "rds-ratings",
    ]);
  });

  it("drops every route configuration for an unplaced VirtualService", () => {
    assert.deepEqual(kept(change(["VirtualService"], [ANY_VIRTUAL_SERVICE, UNPLACED_VIRTUAL_SERVICE])), [
      "cds",
      "eds",
    ]);
  });

  it("keeps clusters, assignments and routes through an AuthorizationPolicy change; drops all but the entries of no config through a DestinationRule's", () => {
    assert.deepEqual(kept(change(["AuthorizationPolicy"])), [
      "cds",
      "eds",
      "rds-ratings",
      "rds-reviews",
      "rds-scoped",
    ]);
    assert.deepEqual(kept(change(["DestinationRule"])), []);
    assert.deepEqual(kept(change(["EnvoyFilter"])), [
      "cds",
      "eds",
      "lds",
      "rds-ratings",
      "rds-reviews",
      "rds-scoped",
    ]);
  });

  it("drops everything for a mesh-wide change", () => {
    assert.deepEqual(kept({ all: true, kinds: new Set(), tokens: new Set() }), []);
  });
});

describe("generated resources through the cache", () => {
  const productpage = sidecarProxy("10.1.0.4", { app: "productpage", version: "v1" });
  const reviews = sidecarProxy("10.1.0.1", { app: "reviews", version: "v1" });

  /** A proxy's four types as Envoy subscribes (the EDS and RDS names are bookinfo's). */
  function snapshot(resources: GeneratedResources, proxy: MeshProxy) {
    const eds = new Set([`outbound|9080||${REVIEWS}`, `outbound|9080||${RATINGS}`]);
    const byName = (list: GeneratedResource[] | undefined) => new Map((list ?? []).map((r) => [r.name, r]));
    return {
      clusters: byName(resources.generate(proxy, TypeUrl.Cluster, "*")),
      listeners: byName(resources.generate(proxy, TypeUrl.Listener, "*")),
      routes: byName(resources.generate(proxy, TypeUrl.RouteConfiguration, new Set(["9080"]))),
      endpoints: byName(resources.generate(proxy, TypeUrl.ClusterLoadAssignment, eds)),
    };
  }

  /** The names whose resource is the same object in both (shared, not rebuilt nor re-encoded). */
  function same(
    a: ReadonlyMap<string, GeneratedResource>,
    b: ReadonlyMap<string, GeneratedResource>,
  ): string[] {
    return [...a].filter(([name, resource]) => b.get(name) === resource).map(([name]) => name);
  }

  /** The outbound clusters' names (inbound ones are the workload's own). */
  function outbound(clusters: ReadonlyMap<string, GeneratedResource>): string[] {
    return outboundOf([...clusters.keys()]);
  }

  function outboundOf(names: string[]): string[] {
    return names.filter((name) => name.startsWith("outbound|"));
  }

  function server(initial: PushContext) {
    let push = initial;
    const cache = new XdsCache();
    return {
      cache,
      resources: new GeneratedResources(XDS_TYPES, cache, () => push),
      switchTo(next: PushContext) {
        push = next;
      },
    };
  }

  it("gives sidecars of different workloads the same outbound resources, encoded once", () => {
    const { resources } = server(bookinfo([ratingsVirtualService(routeTo("ratings")), reviewsRule(["v1"])]));
    const first = snapshot(resources, productpage);
    const second = snapshot(resources, reviews);
    assert.deepEqual(same(first.routes, second.routes), ["9080"]);
    assert.deepEqual(outboundOf(same(first.clusters, second.clusters)), outbound(first.clusters));
    assert.deepEqual(same(first.endpoints, second.endpoints), [...first.endpoints.keys()]);
    const outboundListeners = [...first.listeners.keys()].filter((name) => name !== "virtualInbound");
    assert.deepEqual(same(first.listeners, second.listeners), outboundListeners);
  });

  it("hands a second sidecar of the same scope and locality its assignments without a lookup per cluster", () => {
    const { resources, cache } = server(bookinfo([reviewsRule(["v1", "v2"])]));
    const eds = new Set([
      `outbound|9080||${REVIEWS}`,
      `outbound|9080|v1|${REVIEWS}`,
      "outbound|9080||unknown",
    ]);
    const first = resources.generate(productpage, TypeUrl.ClusterLoadAssignment, eds);
    const lookups = () => cache.stats.hits + cache.stats.misses;
    const before = lookups();
    const second = resources.generate(reviews, TypeUrl.ClusterLoadAssignment, eds);
    assert.equal(lookups(), before);
    assert.deepEqual(second, first);
    const elsewhere = parseProxy({
      id: "sidecar~10.1.0.9~reviews-abc.default~default.svc.cluster.local",
      locality: { region: "eu-west1", zone: "eu-west1-a", subZone: "" },
      metadata: { NAMESPACE: "default", LABELS: { app: "reviews" }, INSTANCE_IPS: "10.1.0.9" },
    } as never);
    resources.generate(elsewhere, TypeUrl.ClusterLoadAssignment, eds);
    assert.ok(lookups() > before, "a proxy in another locality shares no assignment list");
  });

  it("rebuilds for a VirtualService change the route configurations of its host and keeps clusters and assignments", () => {
    const { resources, switchTo } = server(
      bookinfo([ratingsVirtualService(routeTo("ratings")), reviewsRule(["v1"])]),
    );
    const before = snapshot(resources, productpage);
    switchTo(bookinfo([ratingsVirtualService(routeTo("reviews")), reviewsRule(["v1"])]));
    const after = snapshot(resources, productpage);
    assert.deepEqual(same(before.routes, after.routes), []);
    assert.deepEqual(outboundOf(same(before.clusters, after.clusters)), outbound(before.clusters));
    assert.deepEqual(same(before.endpoints, after.endpoints), [...before.endpoints.keys()]);
  });

  it("keeps the route configuration of a port whose services a changed VirtualService is not for", () => {
    const { resources, switchTo } = server(bookinfo([mongoVirtualService(0)]));
    const before = snapshot(resources, productpage);
    switchTo(bookinfo([mongoVirtualService(10)]));
    const after = snapshot(resources, productpage);
    assert.deepEqual(same(before.routes, after.routes), ["9080"]);
    // The TCP route is in the mongodb listener, which is rebuilt.
    assert.notEqual(before.listeners.get("10.96.0.13_27017"), after.listeners.get("10.96.0.13_27017"));
  });

  it("rebuilds clusters and assignments for a DestinationRule change", () => {
    const { resources, switchTo } = server(bookinfo([reviewsRule(["v1"])]));
    const before = snapshot(resources, productpage);
    switchTo(bookinfo([reviewsRule(["v1", "v2"])]));
    const after = snapshot(resources, productpage);
    assert.deepEqual(
      same(before.clusters, after.clusters).filter((name) => name.includes("reviews")),
      [],
    );
    assert.deepEqual(same(before.endpoints, after.endpoints), []);
  });
});

describe("sourceLabelsSelection", () => {
  const selecting = ratingsVirtualService([
    { match: [{ sourceLabels: { app: "reviews" } }], route: [{ destination: { host: "ratings" } }] },
    { route: [{ destination: { host: "ratings" } }] },
  ]);

  it("is empty while no VirtualService matches on source labels", () => {
    const push = bookinfo([ratingsVirtualService(routeTo("ratings"))]);
    assert.equal(sourceLabelsSelection(push, { labels: { app: "reviews" } }), "");
  });

  it("tells the selected workloads from the others, and nothing more", () => {
    const push = bookinfo([selecting]);
    const of = (labels: Record<string, string>) => sourceLabelsSelection(push, { labels });
    assert.notEqual(of({ app: "reviews", version: "v1" }), of({ app: "productpage", version: "v1" }));
    assert.equal(of({ app: "reviews", version: "v1" }), of({ app: "reviews", version: "v2" }));
    assert.equal(of({ app: "productpage" }), of({ app: "ratings" }));
  });

  it("keeps a selected workload's routes apart from the others'", () => {
    const push = bookinfo([selecting]);
    const resources = new GeneratedResources(XDS_TYPES, new XdsCache(), () => push);
    const routes = (proxy: MeshProxy) =>
      resources.generate(proxy, TypeUrl.RouteConfiguration, new Set(["9080"]))?.[0];
    const ratings = sidecarProxy("10.1.0.3", { app: "ratings", version: "v1" });
    assert.notEqual(routes(reviews()), routes(productpage()));
    assert.equal(routes(ratings), routes(productpage()));
  });

  function reviews() {
    return sidecarProxy("10.1.0.2", { app: "reviews", version: "v2" });
  }
  function productpage() {
    return sidecarProxy("10.1.0.4", { app: "productpage", version: "v1" });
  }
});

describe("sidecar EDS push scoping (istiod's edsNeedsPush)", () => {
  const watched = new Set([`outbound|9080||${REVIEWS}`]);
  const full = (configs?: ConfigChange) => ({
    full: true,
    endpointHosts: new Set<string>(),
    ...(configs ? { configs } : {}),
  });
  const resources = new GeneratedResources(XDS_TYPES, new XdsCache(), () => bookinfo([]));
  const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
  const needsPush = (change: ReturnType<typeof full> & { endpointHosts: Set<string> }) =>
    resources.needsPush(proxy, TypeUrl.ClusterLoadAssignment, watched, change);

  it("skips a change of VirtualServices or Sidecars alone, unless its watched endpoints changed too", () => {
    const virtualService = configChanges(
      bookinfo([ratingsVirtualService(routeTo("ratings"))]),
      bookinfo([ratingsVirtualService(routeTo("reviews"))]),
    );
    assert.equal(needsPush(full(virtualService)), false);
    assert.equal(needsPush({ ...full(virtualService), endpointHosts: new Set([REVIEWS]) }), true);
    assert.equal(needsPush({ ...full(virtualService), endpointHosts: new Set([RATINGS]) }), false);
    const sidecar: ConfigChange = {
      all: false,
      kinds: new Set(["Sidecar", "AuthorizationPolicy"]),
      tokens: new Set(),
    };
    assert.equal(needsPush(full(sidecar)), false);
  });

  it("pushes for a DestinationRule, a registry or an unknown change", () => {
    assert.equal(needsPush(full(configChanges(bookinfo([]), bookinfo([reviewsRule(["v1"])])))), true);
    assert.equal(needsPush(full({ all: false, kinds: new Set([SERVICES]), tokens: new Set() })), true);
    assert.equal(needsPush(full({ all: true, kinds: new Set(), tokens: new Set() })), true);
    assert.equal(needsPush(full()), true);
  });
});

describe("outbound listener plans shared within a snapshot", () => {
  // A headless TCP service whose endpoints include productpage's pod: its per-endpoint listeners skip the proxy's own address.
  const push = PushContext.build({
    config: new Map(),
    services: new Map([
      [
        "default/db.default.svc.cluster.local",
        Service.fromJSON({
          hostname: "db.default.svc.cluster.local",
          namespace: "default",
          name: "db",
          ports: [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }],
          resolution: "RESOLUTION_PASSTHROUGH",
          selector: { app: "db" },
          registry: "kubernetes",
        }),
      ],
    ]),
    endpointShards: new Map([
      [
        "db.default.svc.cluster.local",
        {
          hostname: "db.default.svc.cluster.local",
          endpoints: EndpointShard.fromJSON({
            endpoints: ["10.1.0.4", "10.1.0.7"].map((address) => ({
              address,
              ports: { tcp: 5432 },
              labels: { app: "db" },
              namespace: "default",
              health: "HEALTH_STATUS_HEALTHY",
            })),
          }).endpoints,
        },
      ],
    ]),
    domainSuffix: "cluster.local",
  });
  const names = (resources: GeneratedResources, proxy: MeshProxy) =>
    (resources.generate(proxy, TypeUrl.Listener, "*") ?? [])
      .map((r) => r.name)
      .filter((name) => name.endsWith("_5432"));

  it("plans a headless service's endpoint pod apart from the other proxies", () => {
    const shared = new GeneratedResources(XDS_TYPES, new XdsCache(), () => push);
    const fresh = () => new GeneratedResources(XDS_TYPES, new XdsCache(), () => push);
    const own = sidecarProxy("10.1.0.4", { app: "db-client" });
    const other = sidecarProxy("10.1.0.1", { app: "db-client" });
    assert.deepEqual(names(shared, own), ["10.1.0.7_5432"]);
    assert.deepEqual(names(shared, other), ["10.1.0.4_5432", "10.1.0.7_5432"]);
    assert.deepEqual(names(shared, own), names(fresh(), own));
  });
});

describe("a proxy's merged pending pushes keep what their config changes changed", () => {
  const kinds = (...names: string[]): ConfigChange => ({
    all: false,
    kinds: new Set(names),
    tokens: new Set(),
  });
  const endpointsOnly = { full: false };

  it("unites two full changes, keeps a full one's over an endpoint change, and knows nothing if either full one does not", () => {
    assert.deepEqual(
      sorted(
        mergedConfigs(
          { full: true, configs: kinds("VirtualService") },
          { full: true, configs: kinds("Sidecar") },
        )!.kinds,
      ),
      ["Sidecar", "VirtualService"],
    );
    assert.deepEqual(
      mergedConfigs(endpointsOnly, { full: true, configs: kinds("Sidecar") }),
      kinds("Sidecar"),
    );
    assert.deepEqual(
      mergedConfigs({ full: true, configs: kinds("Sidecar") }, endpointsOnly),
      kinds("Sidecar"),
    );
    assert.equal(mergedConfigs({ full: true }, { full: true, configs: kinds("Sidecar") }), undefined);
    assert.equal(
      mergedConfigs(
        { full: true, configs: kinds("Sidecar") },
        { full: true, configs: { ...kinds(), all: true } },
      )?.all,
      true,
    );
  });

  it("carries them through the PushQueue to the push", async () => {
    let release: () => void = () => {};
    const blocked = new Promise<void>((resolve) => {
      release = resolve;
    });
    const received = new Map<string, PushChange>();
    const queue = new PushQueue(1, async (id, change) => {
      if (id === "blocker") await blocked;
      received.set(id, change);
    });
    const change = (configs: ConfigChange): PushChange => ({ full: true, endpointHosts: new Set(), configs });
    queue.enqueue("blocker", change(kinds()), 0);
    // Both wait behind the blocker (one push at a time), so they merge.
    queue.enqueue("proxy", change(kinds("VirtualService")), 1);
    queue.enqueue("proxy", change(kinds("Sidecar")), 2);
    release();
    await queue.idle();
    assert.deepEqual(sorted(received.get("proxy")!.configs!.kinds), ["Sidecar", "VirtualService"]);
  });
});
