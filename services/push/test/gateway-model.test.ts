// The gateway model (model/gateway.ts): which Gateways a router merges, the
// ports its listeners bind, how conflicting servers are resolved, and which
// VirtualServices and hosts a gateway's routes come from.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Cluster, Listener, TypeUrl } from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import {
  intersectHosts,
  mergedGatewayFor,
  resolveGatewayName,
  virtualServicesForGateway,
} from "../src/model/gateway.js";
import { parseProxy } from "../src/model/proxy.js";
import { buildHttpRoutes } from "../src/translate/sidecar/routes.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { contextOf } from "./golden-inputs.js";

const INGRESS_SERVICE = {
  hostname: "istio-ingressgateway.istio-system.svc.cluster.local",
  namespace: "istio-system",
  name: "istio-ingressgateway",
  addresses: ["10.96.1.10"],
  ports: [
    { name: "http2", number: 80, targetPort: 8080, protocol: "PROTOCOL_HTTP2" },
    { name: "https", number: 443, targetPort: 8443, protocol: "PROTOCOL_HTTPS" },
  ],
  selector: { istio: "ingressgateway" },
  resolution: "RESOLUTION_STATIC",
  registry: "kubernetes",
};

const router = (labels: Record<string, string> = { istio: "ingressgateway" }, namespace = "istio-system") =>
  parseProxy({
    id: `router~10.244.3.20~gw-abc.${namespace}~${namespace}.svc.cluster.local`,
    metadata: { NAMESPACE: namespace, LABELS: labels },
  } as never);

const gateway = (name: string, namespace: string, servers: string, selector = "{istio: ingressgateway}") => `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  selector: ${selector}
  servers: ${servers}
`;

const push = (config: string) => contextOf({ services: [INGRESS_SERVICE], config });

describe("gateway model (Istio's mergeGateways)", () => {
  it("merges the Gateways of every namespace whose selector the router's labels satisfy, in namespace/name order", () => {
    const context = push(
      [
        gateway("b", "default", `[{port: {number: 8081, name: http, protocol: HTTP}, hosts: ["*"]}]`),
        gateway("a", "team", `[{port: {number: 8082, name: http, protocol: HTTP}, hosts: ["*"]}]`),
        gateway(
          "other",
          "default",
          `[{port: {number: 9000, name: http, protocol: HTTP}, hosts: ["*"]}]`,
          "{istio: egressgateway}",
        ),
      ].join("---\n"),
    );
    const merged = mergedGatewayFor(context, router());
    assert.deepEqual(
      merged?.gateways.map((ref) => `${ref.namespace}/${ref.name}`),
      ["default/b", "team/a"],
    );
    assert.deepEqual(
      merged?.ports.map((p) => p.port),
      [8081, 8082],
    );
    assert.equal(mergedGatewayFor(context, router({ app: "nothing" })), undefined);
  });

  it("binds a server port that is a port of the router's Service on that port's targetPort, any other as written", () => {
    const context = push(
      gateway(
        "gw",
        "default",
        `[{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]},
          {port: {number: 443, name: https, protocol: HTTPS}, hosts: [a.example.com], tls: {mode: SIMPLE, credentialName: a}},
          {port: {number: 31400, name: tcp, protocol: TCP}, hosts: ["*"]}]`,
      ),
    );
    const merged = mergedGatewayFor(context, router());
    assert.deepEqual(
      merged?.ports.map((p) => p.port),
      [8080, 8443, 31400],
    );
    // An HTTP server's route is named after the bound port, an HTTPS one's after the server's.
    assert.deepEqual(
      [...(merged?.serversByRouteName.keys() ?? [])],
      ["http.8080", "https.443.https.gw.default"],
    );
    // The Service is the router's only in its own namespace: a router elsewhere binds 80 as written.
    assert.deepEqual(
      mergedGatewayFor(context, router({ istio: "ingressgateway" }, "other"))?.ports.map((p) => p.port),
      [80, 443, 31400],
    );
  });

  it("merges HTTP servers of one port, skips a conflicting protocol and a TLS host already served on the port", () => {
    const context = push(
      [
        gateway(
          "a",
          "default",
          `[{port: {number: 8080, name: http, protocol: HTTP}, hosts: [a.example.com]},
            {port: {number: 8443, name: https, protocol: HTTPS}, hosts: [a.example.com], tls: {mode: SIMPLE, credentialName: a}}]`,
        ),
        gateway(
          "b",
          "default",
          `[{port: {number: 8080, name: http, protocol: HTTP}, hosts: [b.example.com]},
            {port: {number: 8080, name: tcp, protocol: TCP}, hosts: ["*"]},
            {port: {number: 8443, name: https, protocol: HTTPS}, hosts: [a.example.com], tls: {mode: SIMPLE, credentialName: b}},
            {port: {number: 8443, name: https-b, protocol: HTTPS}, hosts: [b.example.com], tls: {mode: SIMPLE, credentialName: b}}]`,
        ),
      ].join("---\n"),
    );
    const warnings: string[] = [];
    const merged = mergedGatewayFor(context, router(), { warn: (_, message) => warnings.push(message) });
    assert.deepEqual(
      merged?.ports.map((p) => [
        p.port,
        p.plaintextHttp,
        p.servers.map((s) => `${s.gatewayName}:${s.hosts}`),
      ]),
      [
        [8080, true, ["default/a:a.example.com", "default/b:b.example.com"]],
        [8443, false, ["default/a:a.example.com", "default/b:b.example.com"]],
      ],
    );
    assert.deepEqual(
      merged?.rejected.map((r) => `${r.gateway}:${r.port}: ${r.reason}`),
      [
        "default/b:8080: protocol TCP conflicts with HTTP",
        "default/b:8443: duplicate TLS hosts a.example.com",
      ],
    );
    assert.equal(merged?.serversByRouteName.get("http.8080")?.length, 2);
    // Each skipped server is logged once per snapshot and router, not on every generation.
    assert.deepEqual(warnings, [
      "gateway server skipped for routers of istio-system: protocol TCP conflicts with HTTP",
      "gateway server skipped for routers of istio-system: duplicate TLS hosts a.example.com",
    ]);
    mergedGatewayFor(context, router(), { warn: (_, message) => warnings.push(message) });
    assert.equal(warnings.length, 2);
  });

  it("merges an HTTP server that redirects to HTTPS into a plaintext port like any other HTTP server", () => {
    const context = push(
      gateway(
        "gw",
        "default",
        `[{port: {number: 8080, name: http, protocol: HTTP}, hosts: [a.example.com]},
          {port: {number: 8080, name: http-redirect, protocol: HTTP}, hosts: [b.example.com], tls: {httpsRedirect: true}}]`,
      ),
    );
    const merged = mergedGatewayFor(context, router());
    assert.deepEqual(merged?.rejected, []);
    assert.equal(merged?.serversByRouteName.get("http.8080")?.length, 2);
  });

  it("gives servers with a bind address a listener port of their own, their route names suffixed with it", () => {
    const context = push(
      gateway(
        "gw",
        "default",
        `[{port: {number: 8080, name: http, protocol: HTTP}, hosts: [a.example.com]},
          {port: {number: 8080, name: http-internal, protocol: HTTP}, hosts: [b.example.com], bind: 10.0.0.1}]`,
      ),
    );
    const merged = mergedGatewayFor(context, router());
    assert.deepEqual(
      merged?.ports.map((p) => [p.port, p.bind, p.servers[0]?.routeName]),
      [
        [8080, "", "http.8080"],
        [8080, "10.0.0.1", "http.8080.10.0.0.1"],
      ],
    );
    assert.deepEqual(merged?.rejected, []);
  });

  it("resolves a VirtualService's gateway names and binds it only to the gateways it names", () => {
    assert.equal(resolveGatewayName("gw", "default"), "default/gw");
    assert.equal(resolveGatewayName("istio-system/gw", "default"), "istio-system/gw");
    assert.equal(resolveGatewayName("mesh", "default"), "mesh");
    const context = push(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bound, namespace: default}
spec:
  hosts: [a.example.com]
  gateways: [gw]
  http: [{route: [{destination: {host: reviews}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: private, namespace: default}
spec:
  hosts: [a.example.com]
  gateways: [gw]
  exportTo: ["."]
  http: [{route: [{destination: {host: reviews}}]}]
`);
    assert.deepEqual(
      virtualServicesForGateway(context, "default", "default/gw").map((vs) => vs.ref.name),
      ["bound", "private"],
    );
    // exportTo "." hides it from a router of another namespace.
    assert.deepEqual(
      virtualServicesForGateway(context, "istio-system", "default/gw").map((vs) => vs.ref.name),
      ["bound"],
    );
    assert.deepEqual(virtualServicesForGateway(context, "default", "default/other"), []);
  });

  it("intersects a server's hosts with a VirtualService's, the more specific name of each pair kept, ns/ hosts only for that namespace", () => {
    assert.deepEqual(intersectHosts(["*"], "default", ["a.example.com"]), ["a.example.com"]);
    assert.deepEqual(intersectHosts(["*.example.com"], "default", ["*"]), ["*.example.com"]);
    assert.deepEqual(intersectHosts(["team/a.example.com"], "default", ["a.example.com"]), []);
    assert.deepEqual(intersectHosts(["default/a.example.com"], "default", ["a.example.com"]), [
      "a.example.com",
    ]);
    assert.deepEqual(intersectHosts(["b.example.com"], "default", ["a.example.com"]), []);
  });

  it("gives a VirtualService bound to mesh and a gateway each of its routes where its matches name them", () => {
    const context = push(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: both, namespace: default}
spec:
  hosts: [reviews]
  gateways: [mesh, gw]
  http:
    - match: [{gateways: [mesh]}]
      route: [{destination: {host: reviews, subset: mesh}}]
    - match: [{gateways: [default/gw]}]
      route: [{destination: {host: reviews, subset: edge}}]
`);
    const [vs] = context.virtualServices;
    assert.ok(vs);
    const clusters = (gatewayName?: string) =>
      buildHttpRoutes(context, router(), vs, 9080, () => {}, gatewayName).map(
        (route) => (route.route as { cluster: string }).cluster,
      );
    assert.deepEqual(clusters(), ["outbound|9080|mesh|reviews.default.svc.cluster.local"]);
    assert.deepEqual(clusters("default/gw"), ["outbound|9080|edge|reviews.default.svc.cluster.local"]);
  });
});

describe("router clusters", () => {
  it("honour a DestinationRule's credentialName without workloadSelector, which sidecars are refused (istiod's buildUpstreamClusterTLSContext)", () => {
    const context = contextOf({
      services: [
        {
          hostname: "edition.cnn.com",
          namespace: "default",
          name: "cnn",
          ports: [{ name: "https", number: 443, protocol: "PROTOCOL_HTTPS" }],
          resolution: "RESOLUTION_DNS",
          meshExternal: true,
          registry: "serviceentry",
        },
      ],
      endpoints: [
        { hostname: "edition.cnn.com", endpoints: [{ address: "edition.cnn.com", ports: { https: 443 } }] },
      ],
      config: `
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: originate-mtls, namespace: default}
spec:
  host: edition.cnn.com
  trafficPolicy:
    tls: {mode: MUTUAL, credentialName: client-credential, sni: edition.cnn.com}
`,
    });
    const cache = new XdsCache();
    const transportSocket = (proxy: ReturnType<typeof router>) => {
      const generator = XDS_TYPES.generator(proxy.kind, TypeUrl.Cluster);
      const [resource] =
        generator?.generate({ push: context, proxy, cache }, new Set(["outbound|443||edition.cnn.com"])) ??
        [];
      assert.ok(resource, proxy.kind);
      return Cluster.decode(resource.resource.value).transportSocket?.name;
    };
    const sidecar = parseProxy({
      id: "sidecar~10.244.1.10~productpage-v1-abc.default~default.svc.cluster.local",
      metadata: { NAMESPACE: "default", LABELS: { app: "productpage" } },
    } as never);
    // One cache for both: the router's cluster is not the sidecar's.
    assert.equal(transportSocket(sidecar), undefined);
    assert.equal(
      transportSocket(router({ istio: "egressgateway" }, "default")),
      "envoy.transport_sockets.tls",
    );
    assert.equal(transportSocket(sidecar), undefined);
  });
});

describe("router scope", () => {
  it("ignores Sidecar resources: a gateway sees every service exported to its namespace (Istio's default scope for gateways)", () => {
    const context = contextOf({
      services: [
        INGRESS_SERVICE,
        {
          hostname: "reviews.default.svc.cluster.local",
          namespace: "default",
          name: "reviews",
          ports: [{ name: "http", number: 9080, targetPort: 9080, protocol: "PROTOCOL_HTTP" }],
          resolution: "RESOLUTION_STATIC",
          registry: "kubernetes",
        },
      ],
      config: `
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress: [{hosts: ["./*"]}]
`,
    });
    const names = XDS_TYPES.generator("router", TypeUrl.Cluster)
      ?.generate({ push: context, proxy: router(), cache: new XdsCache() }, "*")
      .map((r) => r.name);
    assert.ok(names?.includes("outbound|9080||reviews.default.svc.cluster.local"), names?.join());
  });
});

describe("router listeners", () => {
  const listenersOf = (config: string, services: Array<Record<string, unknown>> = []) =>
    XDS_TYPES.generator("router", TypeUrl.Listener)
      ?.generate(
        {
          push: contextOf({ services: [INGRESS_SERVICE, ...services], config }),
          proxy: router(),
          cache: new XdsCache(),
        },
        "*",
      )
      .map((r) => Listener.decode(r.resource.value));

  it("leaves out a port of the proxy's own static listeners (15021, 15090), which Envoy would reject as a duplicate address", () => {
    const listeners = listenersOf(
      gateway(
        "gw",
        "default",
        `[{port: {number: 15021, name: http-status, protocol: HTTP}, hosts: ["*"]},
          {port: {number: 8081, name: http, protocol: HTTP}, hosts: ["*"]}]`,
      ),
    );
    assert.deepEqual(
      listeners?.map((l) => l.name),
      ["0.0.0.0_8081"],
    );
  });

  it("gives AUTO_PASSTHROUGH no chain for a wildcard host, whose SNI would be a partial wildcard", () => {
    const listeners = listenersOf(
      gateway(
        "gw",
        "default",
        `[{port: {number: 15443, name: tls, protocol: TLS}, hosts: ["*"], tls: {mode: AUTO_PASSTHROUGH}}]`,
      ),
      [
        {
          hostname: "*.wild.example.com",
          namespace: "default",
          name: "wild",
          ports: [{ name: "tls", number: 443, protocol: "PROTOCOL_TLS" }],
          resolution: "RESOLUTION_PASSTHROUGH",
          registry: "serviceentry",
        },
      ],
    );
    const names = listeners?.flatMap((l) =>
      l.filterChains.flatMap((c) => c.filterChainMatch?.serverNames ?? []),
    );
    assert.ok(names && names.length > 0);
    assert.deepEqual(
      names.filter((name) => name.includes("*")),
      [],
    );
  });
});
