import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Service } from "@sextant/proto";
import {
  HTTPFault,
  HttpConnectionManager,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { type MeshProxy, parseProxy } from "../src/model/proxy.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { generateSidecarRoutes, virtualHostDomains } from "../src/translate/sidecar/routes.js";
import { contextOf } from "./golden-inputs.js";
import {
  bookinfo,
  decode,
  productpageRoutes,
  ratingsVirtualService,
  sidecarProxy,
} from "./sidecar-routes.fixtures.test.js";

const reviews9010 = {
  kind: "VirtualService",
  name: "reviews",
  spec: {
    hosts: ["reviews"],
    http: [
      {
        route: [
          { destination: { host: "reviews", subset: "v1" }, weight: 90 },
          { destination: { host: "reviews", subset: "v2" }, weight: 10 },
        ],
      },
    ],
  },
};

describe("sidecar RDS", () => {
  it("routes Bookinfo's virtual-service-reviews-90-10 as Istio: weighted clusters 90/10", () => {
    const { json, generated } = productpageRoutes(bookinfo([reviews9010]));
    assert.equal(json.name, "9080");
    const names = json.virtualHosts.map((v: { name: string }) => v.name);
    assert.deepEqual(names, [
      "productpage.default.svc.cluster.local:9080",
      "ratings.default.svc.cluster.local:9080",
      "reviews.default.svc.cluster.local:9080",
      "allow_any",
    ]);
    const vhost = json.virtualHosts[2];
    assert.deepEqual(vhost.routes[0].route.weightedClusters.clusters, [
      { name: "outbound|9080|v1|reviews.default.svc.cluster.local", weight: 90 },
      { name: "outbound|9080|v2|reviews.default.svc.cluster.local", weight: 10 },
    ]);
    assert.equal(vhost.routes[0].decorator.operation, "reviews:9080/*");
    assert.equal(vhost.routes[0].route.retryPolicy.numRetries, 2);
    assert.deepEqual(generated.sources, [{ kind: "VirtualService", namespace: "default", name: "reviews" }]);
    // The others keep the default route.
    const ratings = json.virtualHosts[1];
    assert.equal(ratings.routes[0].name, "default");
    assert.equal(ratings.routes[0].route.cluster, "outbound|9080||ratings.default.svc.cluster.local");
    assert.equal(
      ratings.routes[0].route.retryPolicy.retryOn,
      "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
    );
    assert.equal(
      ratings.routes[0].route.retryPolicy.retryHostPredicate[0].name,
      "envoy.retry_host_predicates.previous_hosts",
    );
    // Istio >= 1.24: no retriable status codes by default (a 503 is not retried).
    assert.equal(ratings.routes[0].route.retryPolicy.retriableStatusCodes, undefined);
    assert.deepEqual(ratings.routes[0].route.maxGrpcTimeout, {});
    assert.equal(ratings.routes[0].decorator.operation, "ratings.default.svc.cluster.local:9080/*");
  });

  describe("virtual host domains", () => {
    const proxyIn = (namespace: string, instanceIps: string) =>
      parseProxy({
        id: `sidecar~${instanceIps.split(",")[0]}~client-xyz.${namespace}~${namespace}.svc.cluster.local`,
        metadata: { NAMESPACE: namespace, INSTANCE_IPS: instanceIps },
      } as never);
    const ipv4 = proxyIn("default", "10.1.0.4");
    const ipv6 = proxyIn("default", "fd00:10:244::4");
    const dual = proxyIn("default", "10.1.0.4,fd00:10:244::4");
    const service = (fields: Record<string, unknown>) =>
      Service.fromJSON({
        hostname: "reviews.default.svc.cluster.local",
        namespace: "default",
        ports: [{ name: "http", number: 9080, protocol: "PROTOCOL_HTTP" }],
        resolution: "RESOLUTION_STATIC",
        registry: "kubernetes",
        ...fields,
      });
    const domains = (s: Service, proxy: MeshProxy) => virtualHostDomains(s, proxy, "cluster.local").domains;

    it("lists the FQDN, its absolute form, the short names of the proxy's namespace and the VIP, without ports", () => {
      const reviews = service({ addresses: ["10.96.0.10"] });
      assert.deepEqual(virtualHostDomains(reviews, ipv4, "cluster.local"), {
        domains: [
          "reviews.default.svc.cluster.local",
          "reviews.default.svc.cluster.local.",
          "reviews",
          "reviews.default.svc",
          "reviews.default",
          "10.96.0.10",
        ],
        altHosts: ["reviews.default.svc.cluster.local.", "reviews", "reviews.default.svc", "reviews.default"],
      });
      assert.deepEqual(domains(reviews, proxyIn("other", "10.1.0.4")), [
        "reviews.default.svc.cluster.local",
        "reviews.default.svc.cluster.local.",
        "reviews.default",
        "reviews.default.svc",
        "10.96.0.10",
      ]);
    });

    it("gives no short names to a hostname outside the proxy's .svc.<domain suffix>", () => {
      const external = service({ hostname: "db.prod.svc.corp.example", registry: "serviceentry" });
      assert.deepEqual(domains(external, ipv4), ["db.prod.svc.corp.example", "db.prod.svc.corp.example."]);
    });

    it("lists every cluster IP of a dual-stack service the proxy's families reach, IPv6 bracketed", () => {
      const mysql = service({ addresses: ["10.96.0.40", "fd00:10:96::40"] });
      assert.deepEqual(domains(mysql, dual).slice(-2), ["10.96.0.40", "[fd00:10:96::40]"]);
      assert.deepEqual(domains(mysql, ipv4).slice(-1), ["10.96.0.40"]);
      assert.deepEqual(domains(mysql, ipv6).slice(-2), ["reviews.default", "[fd00:10:96::40]"]);
      // An IPv6-only service has no address an IPv4 proxy can use.
      assert.deepEqual(domains(service({ addresses: ["fd00:10:96::41"] }), ipv4).slice(-1), [
        "reviews.default",
      ]);
    });

    it("keeps the route configs of proxies of different IP families apart in a shared cache", () => {
      const mysql = service({ addresses: ["10.96.0.40", "fd00:10:96::40"] });
      const push = contextOf({ services: [Service.toJSON(mysql) as Record<string, unknown>] });
      const routeDomains = (proxy: MeshProxy, cache: XdsCache) =>
        generateSidecarRoutes({ push, proxy, cache }, new Set(["9080"])).flatMap((generated) =>
          RouteConfiguration.decode(generated.resource.value).virtualHosts.flatMap((host) => host.domains),
        );
      const shared = new XdsCache();
      // Same namespace, no labels, no Sidecar: only the IP families tell the two apart.
      const fromShared = [routeDomains(ipv4, shared), routeDomains(dual, shared)];
      assert.deepEqual(fromShared, [routeDomains(ipv4, new XdsCache()), routeDomains(dual, new XdsCache())]);
      assert.ok(fromShared[1]?.includes("[fd00:10:96::40]"));
      assert.ok(!fromShared[0]?.includes("[fd00:10:96::40]"));
    });

    it("lists one address of a ServiceEntry, the first, whatever its family", () => {
      const entry = service({
        hostname: "api.example.com",
        addresses: ["fd00:20::1", "240.0.0.5"],
        registry: "serviceentry",
      });
      assert.deepEqual(domains(entry, ipv4), ["api.example.com", "api.example.com.", "[fd00:20::1]"]);
    });

    it("adds the *.-prefixed names of a headless Kubernetes service, not of a ServiceEntry with resolution NONE", () => {
      const headless = service({
        hostname: "mysql.default.svc.cluster.local",
        addresses: ["0.0.0.0"],
        resolution: "RESOLUTION_PASSTHROUGH",
      });
      assert.deepEqual(domains(headless, ipv4), [
        "mysql.default.svc.cluster.local",
        "mysql.default.svc.cluster.local.",
        "mysql",
        "mysql.default.svc",
        "mysql.default",
        "*.mysql.default.svc.cluster.local",
        "*.mysql.default.svc.cluster.local.",
        "*.mysql",
        "*.mysql.default.svc",
        "*.mysql.default",
      ]);
      const none = service({
        hostname: "legacy.example.com",
        resolution: "RESOLUTION_PASSTHROUGH",
        registry: "serviceentry",
      });
      assert.deepEqual(domains(none, ipv4), ["legacy.example.com", "legacy.example.com."]);
    });
  });

  it("sets ignore_port_in_host_matching on <port> and <hostname>:<port> route configurations", () => {
    const proxy = sidecarProxy("10.1.0.4", { app: "productpage", version: "v1" });
    const names = ["9080", "reviews.default.svc.cluster.local:9080"];
    const generated = generateSidecarRoutes(
      { push: bookinfo([]), proxy, cache: new XdsCache() },
      new Set(names),
    );
    assert.deepEqual(
      generated.map((g) => g.name),
      names,
    );
    for (const { resource } of generated) {
      const json = decode(resource, TypeUrl.RouteConfiguration, RouteConfiguration);
      assert.equal(json.ignorePortInHostMatching, true);
    }
  });

  it("translates matches, sourceLabels, fault, retries, timeouts, mirrors, rewrite, headers and CORS", () => {
    const push = bookinfo([
      ratingsVirtualService([
        {
          name: "only-v2",
          match: [{ sourceLabels: { version: "v2" } }],
          route: [{ destination: { host: "ratings" } }],
        },
        {
          name: "jason",
          match: [
            {
              name: "m",
              uri: { prefix: "/ratings" },
              headers: { "end-user": { exact: "jason" } },
              queryParams: { debug: { exact: "" } },
              method: { exact: "GET" },
              withoutHeaders: { "x-skip": {} },
            },
          ],
          fault: { delay: { fixedDelay: "7s", percentage: { value: 50 } }, abort: { httpStatus: 500 } },
          timeout: "2s",
          retries: { attempts: 3, perTryTimeout: "1s", retryOn: "5xx,503" },
          mirror: { host: "reviews", subset: "v2" },
          mirrorPercentage: { value: 25 },
          rewrite: { uri: "/v2/ratings", authority: "ratings-v2" },
          headers: { request: { set: { "x-a": "1" }, add: { "x-b": "2" }, remove: ["x-c"] } },
          corsPolicy: { allowOrigins: [{ exact: "https://example.com" }], allowMethods: ["GET", "POST"] },
          route: [{ destination: { host: "ratings", subset: "v1" } }],
        },
        { redirect: { uri: "/moved", redirectCode: 302 } },
        { route: [{ destination: { host: "ratings" } }] },
      ]),
    ]);
    const { json } = productpageRoutes(push);
    const vhost = json.virtualHosts.find((v: { name: string }) => v.name.startsWith("ratings."));
    // The sourceLabels route is not for a v1 proxy; the redirect is a catch-all, so the last route goes.
    assert.equal(vhost.routes.length, 2);
    const [jason, redirect] = vhost.routes;
    assert.equal(jason.name, "jason.m");
    assert.equal(jason.match.prefix, "/ratings");
    assert.deepEqual(
      jason.match.headers.map((h: { name: string }) => h.name),
      ["end-user", "x-skip", ":method"],
    );
    assert.equal(jason.match.headers[1].invertMatch, true);
    // An empty exact is a string match, as Istio's translateQueryParamMatch (not "present").
    assert.deepEqual(jason.match.queryParameters, [{ name: "debug", stringMatch: { exact: "" } }]);
    assert.equal(jason.route.cluster, "outbound|9080|v1|ratings.default.svc.cluster.local");
    assert.deepEqual(jason.route.timeout, { seconds: 2 });
    assert.equal(jason.route.maxStreamDuration, undefined);
    assert.deepEqual(jason.route.maxGrpcTimeout, { seconds: 2 });
    assert.equal(jason.route.retryPolicy.numRetries, 3);
    assert.equal(jason.route.retryPolicy.retryOn, "5xx,retriable-status-codes");
    assert.deepEqual(jason.route.retryPolicy.retriableStatusCodes, [503]);
    assert.deepEqual(jason.route.retryPolicy.perTryTimeout, { seconds: 1 });
    assert.deepEqual(jason.route.requestMirrorPolicies, [
      {
        cluster: "outbound|9080|v2|reviews.default.svc.cluster.local",
        runtimeFraction: { defaultValue: { numerator: 250000, denominator: "MILLION" } },
        traceSampled: false,
      },
    ]);
    assert.equal(jason.route.prefixRewrite, "/v2/ratings");
    assert.equal(jason.route.hostRewriteLiteral, "ratings-v2");
    assert.deepEqual(jason.requestHeadersToRemove, ["x-c"]);
    assert.deepEqual(
      jason.requestHeadersToAdd.map((h: { header: { key: string }; appendAction: string }) => [
        h.header.key,
        h.appendAction,
      ]),
      [
        ["x-a", "OVERWRITE_IF_EXISTS_OR_ADD"],
        ["x-b", undefined], // APPEND_IF_EXISTS_OR_ADD is the enum's zero value
      ],
    );
    const fault = jason.typedPerFilterConfig["envoy.filters.http.fault"];
    assert.equal(fault.typeUrl, TypeUrl.HTTPFault);
    const decodedFault = HTTPFault.decode(Buffer.from(fault.value, "base64"));
    assert.equal(decodedFault.delay?.percentage?.numerator, 500000);
    assert.equal(decodedFault.abort?.httpStatus, 500);
    assert.equal(jason.typedPerFilterConfig["envoy.filters.http.cors"].typeUrl, TypeUrl.CorsPolicy);
    assert.deepEqual(redirect.redirect, { pathRedirect: "/moved", responseCode: "FOUND" });

    // A v2 proxy gets the sourceLabels route first, and it is a catch-all.
    const v2 = productpageRoutes(push, { app: "productpage", version: "v2" }).json.virtualHosts.find(
      (v: { name: string }) => v.name.startsWith("ratings."),
    );
    assert.deepEqual(
      v2.routes.map((r: { name: string }) => r.name),
      ["only-v2"],
    );
  });

  it("ends with block_all under REGISTRY_ONLY", () => {
    const push = bookinfo([
      { kind: "Sidecar", name: "default", spec: { outboundTrafficPolicy: { mode: "REGISTRY_ONLY" } } },
    ]);
    const { json } = productpageRoutes(push);
    const last = json.virtualHosts.at(-1);
    assert.equal(last.name, "block_all");
    assert.deepEqual(last.routes[0].directResponse, { status: 502 });
  });

  it("is deterministic and equal from the cache", () => {
    const push = bookinfo([reviews9010]);
    const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
    const cache = new XdsCache();
    const first = generateSidecarRoutes({ push, proxy, cache }, new Set(["9080", "nope"]));
    const second = generateSidecarRoutes({ push, proxy, cache }, new Set(["9080", "nope"]));
    const fresh = generateSidecarRoutes({ push, proxy, cache: new XdsCache() }, new Set(["9080"]));
    assert.deepEqual(second, first);
    assert.deepEqual(fresh, first);
  });

  describe("protocol sniffing", () => {
    const service = (name: string, vip: string, protocol: string) => ({
      hostname: `${name}.default.svc.cluster.local`,
      namespace: "default",
      name,
      addresses: [vip],
      ports: [{ name: "", number: 9153, protocol }],
      selector: { app: name },
      resolution: "RESOLUTION_STATIC",
      registry: "kubernetes",
    });
    const push = contextOf({
      services: [
        service("metrics", "10.96.0.70", "PROTOCOL_UNSPECIFIED"),
        service("web", "10.96.0.71", "PROTOCOL_HTTP"),
        service("db", "10.96.0.72", "PROTOCOL_TCP"),
        // Headless: a listener per pod address, each sniffing by RDS <hostname>:<port>.
        {
          ...service("cache", "", "PROTOCOL_UNSPECIFIED"),
          addresses: [],
          resolution: "RESOLUTION_PASSTHROUGH",
        },
      ],
      endpoints: [
        {
          hostname: "cache.default.svc.cluster.local",
          endpoints: ["10.244.1.80", "10.244.1.81"].map((address) => ({
            address,
            ports: { "": 9153 },
            namespace: "default",
          })),
        },
      ],
      config: [
        "apiVersion: networking.istio.io/v1",
        "kind: VirtualService",
        "metadata: {name: metrics, namespace: default}",
        "spec:",
        "  hosts: [metrics]",
        "  http:",
        "  - name: scrape",
        "    route:",
        "    - destination: {host: metrics}",
        "      headers: {request: {set: {x-scrape: 'yes'}}}",
      ].join("\n"),
    });
    const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
    const served = (names: string[]) =>
      new Map(
        generateSidecarRoutes({ push, proxy, cache: new XdsCache() }, new Set(names)).map((g) => [
          g.name,
          { sources: g.sources, json: decode(g.resource, TypeUrl.RouteConfiguration, RouteConfiguration) },
        ]),
      );
    const vhostNames = (json: { virtualHosts?: Array<{ name: string }> }) =>
      (json.virtualHosts ?? []).map((v) => v.name);

    it("serves <hostname>:<port> with the sniffed service's virtual host alone: domains *, its VirtualService's routes, no catch-all", () => {
      const { json, sources } = served(["metrics.default.svc.cluster.local:9153"]).get(
        "metrics.default.svc.cluster.local:9153",
      )!;
      assert.deepEqual(vhostNames(json), ["metrics.default.svc.cluster.local:9153"]);
      const [vhost] = json.virtualHosts;
      assert.deepEqual(vhost.domains, ["*"]);
      assert.deepEqual(
        vhost.routes.map((r: { name: string }) => r.name),
        ["scrape"],
      );
      assert.equal(vhost.routes[0].route.cluster, "outbound|9153||metrics.default.svc.cluster.local");
      assert.equal(vhost.routes[0].requestHeadersToAdd[0].header.key, "x-scrape");
      assert.equal(json.validateClusters, false);
      assert.equal(json.maxDirectResponseBodySizeBytes, 1048576);
      assert.deepEqual(sources, [{ kind: "VirtualService", namespace: "default", name: "metrics" }]);
    });

    it("keeps the default route where none of a VirtualService's http routes applies (only tcp routes, as Istio)", () => {
      const tcpOnly = contextOf({
        services: [service("metrics", "10.96.0.70", "PROTOCOL_UNSPECIFIED")],
        config: [
          "apiVersion: networking.istio.io/v1",
          "kind: VirtualService",
          "metadata: {name: metrics, namespace: default}",
          "spec:",
          "  hosts: [metrics]",
          "  tcp:",
          "  - route:",
          "    - destination: {host: metrics}",
        ].join("\n"),
      });
      const name = "metrics.default.svc.cluster.local:9153";
      const [generated] = generateSidecarRoutes(
        { push: tcpOnly, proxy, cache: new XdsCache() },
        new Set([name]),
      );
      const json = decode(generated!.resource, TypeUrl.RouteConfiguration, RouteConfiguration);
      assert.deepEqual(
        json.virtualHosts[0].routes.map((r: { name: string }) => r.name),
        ["default"],
      );
      assert.equal(
        json.virtualHosts[0].routes[0].route.cluster,
        "outbound|9153||metrics.default.svc.cluster.local",
      );
    });

    it("lists sniffed ports in <port> beside HTTP ones, not TCP ones", () => {
      const { json } = served(["9153"]).get("9153")!;
      assert.deepEqual(vhostNames(json), [
        "cache.default.svc.cluster.local:9153",
        "metrics.default.svc.cluster.local:9153",
        "web.default.svc.cluster.local:9153",
        "allow_any",
      ]);
      assert.ok(json.virtualHosts[1].domains.includes("metrics.default.svc.cluster.local"));
      assert.equal(json.virtualHosts[1].routes[0].name, "scrape");
    });

    it("answers <hostname>:<port> of a TCP port or unknown host with no virtual host, and no other names", () => {
      const out = served([
        "db.default.svc.cluster.local:9153",
        "nothing.default.svc.cluster.local:9153",
        "metrics.default.svc.cluster.local:0",
        "metrics.default.svc.cluster.local:x",
        "a:b:9153",
      ]);
      assert.deepEqual([...out.keys()].sort(), [
        "db.default.svc.cluster.local:9153",
        "nothing.default.svc.cluster.local:9153",
      ]);
      for (const { json } of out.values()) assert.deepEqual(vhostNames(json), []);
    });

    it("serves every route configuration the sniffing listeners name", () => {
      const named: string[] = [];
      for (const generated of generateSidecarListeners({ push, proxy, cache: new XdsCache() }, "*")) {
        const listener = Listener.decode(generated.resource.value);
        for (const chain of listener.filterChains) {
          const config = chain.filters[0]?.typedConfig;
          // Inbound HCMs carry their route configuration inline.
          const rds =
            config?.typeUrl === TypeUrl.HttpConnectionManager
              ? HttpConnectionManager.decode(config.value).rds
              : undefined;
          if (rds) named.push(rds.routeConfigName);
        }
      }
      assert.deepEqual(named.sort(), [
        "9153",
        "cache.default.svc.cluster.local:9153",
        "cache.default.svc.cluster.local:9153",
        "metrics.default.svc.cluster.local:9153",
      ]);
      const out = served(named);
      for (const name of named) assert.ok(vhostNames(out.get(name)?.json ?? {}).length > 0, name);
    });
  });
});
