// ExternalName services (resolution ALIAS) across push: the alias index
// (Istio's resolveServiceAliases), the sidecar's listeners and routes, and
// proxyless gRPC's route configurations.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { unpackAny } from "@sextant/proto";
import { Listener, RouteConfiguration, TcpProxy, TypeUrl } from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { aliasesByTarget, aliasTarget, clusterHost } from "../src/model/aliases.js";
import type { PushContext } from "../src/model/push-context.js";
import { buildRouteConfiguration } from "../src/translate/grpc/routes.js";
import { generateSidecarClusters } from "../src/translate/sidecar/clusters.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { generateSidecarRoutes, virtualHostDomains } from "../src/translate/sidecar/routes.js";
import { contextOf, type GoldenInput } from "./golden-inputs.js";
import { decode, sidecarProxy } from "./sidecar-routes.fixtures.test.js";

type ServiceInput = GoldenInput["services"][number];

const kube = (name: string, namespace: string, fields: Record<string, unknown> = {}): ServiceInput => ({
  hostname: `${name}.${namespace}.svc.cluster.local`,
  namespace,
  name,
  ports: [{ name: "http", number: 9080, protocol: "PROTOCOL_HTTP" }],
  resolution: "RESOLUTION_STATIC",
  registry: "kubernetes",
  ...fields,
});

/** An ExternalName service `name.namespace` naming externalName. */
const alias = (name: string, namespace: string, externalName: string, fields: Record<string, unknown> = {}) =>
  kube(name, namespace, { resolution: "RESOLUTION_ALIAS", meshExternal: true, externalName, ...fields });

const ratings = kube("ratings", "default", { addresses: ["10.96.0.11"] });

function push(services: ServiceInput[], config = ""): PushContext {
  return contextOf({ services, config });
}

/** The virtual hosts of the sidecar route configuration `name` productpage's sidecar gets (none if no such configuration). */
function sidecarVirtualHosts(
  context: PushContext,
  name = "9080",
): Array<{ name: string; domains: string[] }> {
  const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
  const [generated] = generateSidecarRoutes({ push: context, proxy, cache: new XdsCache() }, new Set([name]));
  if (!generated) return [];
  return decode(generated.resource, TypeUrl.RouteConfiguration, RouteConfiguration).virtualHosts ?? [];
}

describe("ExternalName aliases", () => {
  describe("alias index (Istio's resolveServiceAliases)", () => {
    it("follows an alias of an alias to its end and lists a target's aliases by namespace, then hostname", () => {
      const context = push([
        ratings,
        alias("b-alias", "default", "ratings.default.svc.cluster.local"),
        alias("a-alias", "prod", "ratings.default.svc.cluster.local"),
        alias("c-alias", "default", "a-alias.prod.svc.cluster.local"),
        alias("db", "default", "db.example.com"),
      ]);
      assert.deepEqual(aliasesByTarget(context).get("ratings.default.svc.cluster.local"), [
        "b-alias.default.svc.cluster.local",
        "c-alias.default.svc.cluster.local",
        "a-alias.prod.svc.cluster.local",
      ]);
      assert.equal(
        aliasTarget(context, "c-alias.default.svc.cluster.local"),
        "ratings.default.svc.cluster.local",
      );
      // A target outside the registry is still a target: whether it routes is the caller's check.
      assert.deepEqual(aliasesByTarget(context).get("db.example.com"), ["db.default.svc.cluster.local"]);
      assert.equal(aliasTarget(context, "ratings.default.svc.cluster.local"), undefined);
    });

    it("drops aliases in a loop (Kubernetes DNS answers them NXDOMAIN) and aliases without an external name", () => {
      const context = push([
        alias("x", "default", "y.default.svc.cluster.local"),
        alias("y", "default", "x.default.svc.cluster.local"),
        alias("z", "default", "x.default.svc.cluster.local"),
        alias("empty", "default", ""),
      ]);
      assert.equal(aliasesByTarget(context).size, 0);
      assert.equal(aliasTarget(context, "z.default.svc.cluster.local"), undefined);
    });

    it("names a destination's cluster after the name an alias leads to (Istio's GetDestinationCluster, whole chain)", () => {
      const context = push([
        ratings,
        alias("old", "default", "ratings.default.svc.cluster.local"),
        alias("older", "default", "old.default.svc.cluster.local"),
      ]);
      assert.equal(
        clusterHost(context, "old.default.svc.cluster.local"),
        "ratings.default.svc.cluster.local",
      );
      // Istio's one hop would name outbound|…|old.default…, a cluster that does not exist.
      assert.equal(
        clusterHost(context, "older.default.svc.cluster.local"),
        "ratings.default.svc.cluster.local",
      );
      assert.equal(
        clusterHost(context, "ratings.default.svc.cluster.local"),
        "ratings.default.svc.cluster.local",
      );
      assert.equal(clusterHost(context, "unknown.example.com"), "unknown.example.com");
    });
  });

  describe("sidecar", () => {
    it("adds an alias's names (and their *. forms for a headless target) to the target's domains", () => {
      const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
      const headless = push([
        kube("mysql", "default", { resolution: "RESOLUTION_PASSTHROUGH" }),
      ]).servicesByHost.get("mysql.default.svc.cluster.local")!;
      const { domains, altHosts } = virtualHostDomains(headless, proxy, "cluster.local", [
        "db.prod.svc.cluster.local",
      ]);
      assert.deepEqual(domains, [
        "mysql.default.svc.cluster.local",
        "mysql.default.svc.cluster.local.",
        "mysql",
        "mysql.default.svc",
        "mysql.default",
        "db.prod.svc.cluster.local",
        "db.prod.svc.cluster.local.",
        "db.prod",
        "db.prod.svc",
        "*.mysql.default.svc.cluster.local",
        "*.mysql.default.svc.cluster.local.",
        "*.mysql",
        "*.mysql.default.svc",
        "*.mysql.default",
        "*.db.prod.svc.cluster.local",
        "*.db.prod.svc.cluster.local.",
        "*.db.prod",
        "*.db.prod.svc",
      ]);
      assert.deepEqual(altHosts.slice(4), ["db.prod.svc.cluster.local.", "db.prod", "db.prod.svc"]);
    });

    it("gives an alias no virtual host, and its names nowhere when its target is out of the proxy's scope", () => {
      const services = [
        ratings,
        kube("reviews", "prod", { addresses: ["10.96.0.12"] }),
        alias("old-reviews", "default", "reviews.prod.svc.cluster.local"),
      ];
      const hosts = (context: PushContext) =>
        sidecarVirtualHosts(context).map((vh) => [
          vh.name,
          vh.domains.filter((d) => d.includes("old-reviews")),
        ]);
      assert.deepEqual(hosts(push(services)), [
        ["ratings.default.svc.cluster.local:9080", []],
        [
          "reviews.prod.svc.cluster.local:9080",
          [
            "old-reviews.default.svc.cluster.local",
            "old-reviews.default.svc.cluster.local.",
            "old-reviews",
            "old-reviews.default.svc",
            "old-reviews.default",
          ],
        ],
        ["allow_any", []],
      ]);
      // A Sidecar importing only its own namespace: reviews.prod is not in scope, so neither is its alias.
      const scoped = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  egress:
  - hosts: ["./*"]`;
      assert.deepEqual(hosts(push(services, scoped)), [
        ["ratings.default.svc.cluster.local:9080", []],
        ["allow_any", []],
      ]);
    });

    it("gives an alias with a VirtualService of its own a virtual host of its routes, else its names go to the target", () => {
      const services = [ratings, alias("canary", "default", "ratings.default.svc.cluster.local")];
      const virtualService = (http: string) => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: canary, namespace: default}
spec:
  hosts: [canary]
${http}`;
      const routed = sidecarVirtualHosts(
        push(services, virtualService("  http:\n  - route:\n    - destination: {host: ratings, subset: v2}")),
      );
      assert.deepEqual(
        routed.map((vh) => [vh.name, vh.domains.filter((d) => d.startsWith("canary"))]),
        [
          [
            "canary.default.svc.cluster.local:9080",
            [
              "canary.default.svc.cluster.local",
              "canary.default.svc.cluster.local.",
              "canary",
              "canary.default.svc",
              "canary.default",
            ],
          ],
          ["ratings.default.svc.cluster.local:9080", []],
          ["allow_any", []],
        ],
      );
      // A VirtualService with no http route for the port builds nothing: the alias has no default route.
      const tcpOnly = sidecarVirtualHosts(
        push(services, virtualService("  tcp:\n  - route:\n    - destination: {host: ratings}")),
      );
      assert.deepEqual(
        tcpOnly.map((vh) => vh.name),
        ["ratings.default.svc.cluster.local:9080", "allow_any"],
      );
      assert.ok(tcpOnly[0]!.domains.includes("canary"));
    });

    it("builds no cluster for an alias, but one for a headless service that also names an external host (Istio keys on the resolution)", () => {
      const context = push([
        alias("old", "default", "ratings.default.svc.cluster.local"),
        // clusterIP None wins over type ExternalName in ConvertService: PASSTHROUGH, external name kept.
        kube("odd", "default", { resolution: "RESOLUTION_PASSTHROUGH", externalName: "db.example.com" }),
      ]);
      const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
      const names = generateSidecarClusters({ push: context, proxy, cache: new XdsCache() }, "*").map(
        (c) => c.name,
      );
      assert.ok(!names.some((name) => name.includes("old.default")), names.join(" "));
      assert.ok(names.includes("outbound|9080||odd.default.svc.cluster.local"), names.join(" "));
    });

    it("serves no <alias>:<port> route configuration's virtual host", () => {
      const context = push([ratings, alias("old", "default", "ratings.default.svc.cluster.local")]);
      assert.deepEqual(sidecarVirtualHosts(context, "old.default.svc.cluster.local:9080"), []);
      assert.equal(sidecarVirtualHosts(context, "ratings.default.svc.cluster.local:9080").length, 1);
    });

    it("builds no listener for an alias's port, and a tcp route to an alias goes to its target's cluster", () => {
      const context = push(
        [
          alias("mysql", "default", "db.example.com", {
            ports: [{ name: "tcp", number: 3306, protocol: "PROTOCOL_TCP" }],
          }),
          kube("db", "default", {
            addresses: ["10.96.0.30"],
            ports: [{ name: "tcp", number: 3306, protocol: "PROTOCOL_TCP" }],
          }),
          alias("db-alias", "default", "db.default.svc.cluster.local", {
            ports: [{ name: "tcp", number: 3306, protocol: "PROTOCOL_TCP" }],
          }),
          kube("front", "default", {
            addresses: ["10.96.0.31"],
            ports: [{ name: "tcp", number: 5000, protocol: "PROTOCOL_TCP" }],
          }),
        ],
        `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: default}
spec:
  hosts: [front]
  tcp:
  - route:
    - destination: {host: db-alias, port: {number: 3306}}`,
      );
      const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
      const listeners = generateSidecarListeners({ push: context, proxy, cache: new XdsCache() }, "*");
      const names = listeners.map((l) => l.name);
      assert.ok(!names.includes("0.0.0.0_3306"), names.join(" "));
      assert.ok(names.includes("10.96.0.30_3306"), names.join(" "));
      const front = listeners.find((l) => l.name === "10.96.0.31_5000")!;
      const listener = unpackAny(front.resource, TypeUrl.Listener, Listener);
      const filter = listener.filterChains[0]!.filters[0]!;
      const proxied = unpackAny(filter.typedConfig!, TypeUrl.TcpProxy, TcpProxy);
      assert.equal(proxied.cluster, "outbound|3306||db.default.svc.cluster.local");
    });
  });

  describe("proxyless gRPC", () => {
    const routes = (context: PushContext, name: string, namespace = "default") => {
      const generated = buildRouteConfiguration(context, namespace, name);
      assert.ok(generated, name);
      return decode(generated.resource, TypeUrl.RouteConfiguration, RouteConfiguration).virtualHosts ?? [];
    };

    it("answers an alias whose target is not visible from the client's namespace, or loops, with no virtual host", () => {
      const context = push([
        kube("ratings", "prod", { exportTo: ["."] }),
        alias("ratings", "default", "ratings.prod.svc.cluster.local"),
        alias("x", "default", "y.default.svc.cluster.local"),
        alias("y", "default", "x.default.svc.cluster.local"),
      ]);
      assert.deepEqual(routes(context, "ratings:9080"), []);
      assert.deepEqual(routes(context, "x:9080"), []);
      // From prod the target is visible.
      assert.equal(
        routes(context, "ratings.default:9080", "prod")[0]?.name,
        "ratings.prod.svc.cluster.local:9080",
      );
    });

    it("answers an alias whose target lacks the port with no virtual host", () => {
      const context = push([
        kube("ratings", "default", { ports: [{ name: "grpc", number: 7070, protocol: "PROTOCOL_GRPC" }] }),
        alias("old", "default", "ratings.default.svc.cluster.local"),
      ]);
      assert.deepEqual(routes(context, "old:9080"), []);
    });
  });
});
