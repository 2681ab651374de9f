import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { configKey } from "@sextant/model";
import { type ConfigResource, Severity } from "@sextant/proto";
import { AnalysisCodes, analyze } from "../src/analysis/analyzers.js";
import type { AnalysisWorkload } from "../src/analysis/gateway-analyzers.js";

const resource = (
  kind: string,
  name: string,
  spec: Record<string, unknown>,
  namespace = "default",
): ConfigResource => ({
  kind,
  apiVersion: "networking.istio.io/v1",
  namespace,
  name,
  labels: {},
  annotations: {},
  generation: 1,
  revision: 0,
  spec,
});
const registry = new Set(["reviews.default.svc.cluster.local", "ratings.default.svc.cluster.local"]);
/** Istio's ingress gateway pods, and a Bookinfo workload. */
const workloads: AnalysisWorkload[] = [
  { namespace: "istio-system", labels: { app: "istio-ingressgateway", istio: "ingressgateway" } },
  { namespace: "default", labels: { app: "reviews", version: "v1" } },
];
const run = (resources: ConfigResource[]) =>
  analyze({ resources, registryHosts: registry, workloads, domainSuffix: "cluster.local" });
const codes = (result: ReturnType<typeof run>, r: ConfigResource) =>
  (result.get(configKey(r)) ?? []).map((m) => [m.code, m.field]);

describe("analyzers", () => {
  it("warns that a credentialName without workloadSelector gives sidecars no TLS, and is silent with one (served over SDS)", () => {
    const withSelector = resource("DestinationRule", "a", {
      host: "reviews",
      workloadSelector: { matchLabels: { app: "productpage" } },
      trafficPolicy: { tls: { mode: "SIMPLE", credentialName: "reviews-ca" } },
    });
    const withoutSelector = resource("DestinationRule", "b", {
      host: "ratings",
      trafficPolicy: { tls: { mode: "SIMPLE", credentialName: "ratings-ca" } },
    });
    const result = run([withSelector, withoutSelector]);
    assert.deepEqual(result.get(configKey(withSelector)) ?? [], []);
    const [ignored] = result.get(configKey(withoutSelector)) ?? [];
    assert.equal(ignored?.severity, Severity.SEVERITY_WARNING);
    assert.match(ignored?.message ?? "", /without workloadSelector is ignored .* no TLS/);
  });

  const reviewsRule = resource("DestinationRule", "reviews", {
    host: "reviews",
    subsets: [{ name: "v1" }, { name: "v2" }],
  });

  it("finds nothing wrong with a consistent config", () => {
    const vs = resource("VirtualService", "reviews", {
      hosts: ["reviews"],
      http: [
        {
          route: [
            { destination: { host: "reviews", subset: "v1" } },
            { destination: { host: "reviews.default.svc.cluster.local", subset: "v2" } },
          ],
        },
      ],
    });
    assert.equal(run([vs, reviewsRule]).size, 0);
  });

  const cases: Array<[string, ConfigResource[], number, Array<[string, string]>]> = [
    [
      "a gateway that does not exist, by name and by namespace/name",
      [
        resource("VirtualService", "ingress", {
          hosts: ["*"],
          gateways: ["missing", "prod/gw", "mesh"],
          http: [],
        }),
        resource("Gateway", "gw", { servers: [] }, "prod"),
      ],
      0,
      [[AnalysisCodes.ReferencedResourceNotFound, "spec.gateways[0]"]],
    ],
    [
      "a subset that no DestinationRule defines, in http and tcp routes",
      [
        resource("VirtualService", "reviews", {
          hosts: ["reviews"],
          http: [{ route: [{ destination: { host: "reviews", subset: "v3" } }] }],
          tcp: [{ route: [{ destination: { host: "ratings", subset: "v1" } }] }],
        }),
        reviewsRule,
      ],
      0,
      [
        [AnalysisCodes.ReferencedResourceNotFound, "spec.http[0].route[0].destination.subset"],
        [AnalysisCodes.ReferencedResourceNotFound, "spec.tcp[0].route[0].destination.subset"],
      ],
    ],
    [
      "a DestinationRule whose host matches no service",
      [resource("DestinationRule", "ghost", { host: "ghost" })],
      0,
      [[AnalysisCodes.ReferencedResourceNotFound, "spec.host"]],
    ],
    [
      "a DestinationRule host known from a ServiceEntry is fine",
      [
        resource("DestinationRule", "google", { host: "www.google.com" }),
        resource("ServiceEntry", "google", { hosts: ["www.google.com"] }),
      ],
      0,
      [],
    ],
    [
      "two mesh VirtualServices claiming one host, short and long",
      [
        resource("VirtualService", "a", { hosts: ["reviews"] }),
        resource("VirtualService", "b", { hosts: ["reviews.default.svc.cluster.local"] }),
        resource("VirtualService", "gateway-only", { hosts: ["reviews"], gateways: ["gw"] }),
        resource("Gateway", "gw", {}),
      ],
      1,
      [[AnalysisCodes.ConflictingMeshGatewayVirtualServiceHosts, "spec.hosts[0]"]],
    ],
    [
      "credentialName on SIMPLE/MUTUAL TLS, wherever a DestinationRule sets TLS (not ISTIO_MUTUAL, not a configmap:// CA)",
      [
        resource("DestinationRule", "ratings", {
          host: "ratings",
          trafficPolicy: {
            tls: { mode: "MUTUAL", credentialName: "ratings-client" },
            portLevelSettings: [
              { port: { number: 9080 }, tls: { mode: "SIMPLE", credentialName: "configmap://ratings-ca" } },
              { port: { number: 9443 }, tls: { mode: "SIMPLE", credentialName: "ratings-ca" } },
            ],
          },
          subsets: [
            { name: "v1", trafficPolicy: { tls: { mode: "ISTIO_MUTUAL", credentialName: "ignored" } } },
            { name: "v2", trafficPolicy: { tls: { mode: "SIMPLE", credentialName: "v2-ca" } } },
          ],
        }),
      ],
      0,
      [
        [AnalysisCodes.CredentialNameNotServed, "spec.trafficPolicy.tls.credentialName"],
        [AnalysisCodes.CredentialNameNotServed, "spec.trafficPolicy.portLevelSettings[1].tls.credentialName"],
        [AnalysisCodes.CredentialNameNotServed, "spec.subsets[1].trafficPolicy.tls.credentialName"],
      ],
    ],
  ];
  for (const [name, resources, index, expected] of cases) {
    it(name, () => {
      assert.deepEqual(codes(run(resources), resources[index]!), expected);
    });
  }
});

describe("gateway analyzers", () => {
  const messages = (result: ReturnType<typeof run>, r: ConfigResource) =>
    (result.get(configKey(r)) ?? []).map((m) => [m.code, m.field, m.message]);
  const gateway = (
    name: string,
    servers: unknown[],
    selector: Record<string, string> = { istio: "ingressgateway" },
    namespace = "default",
  ) => resource("Gateway", name, { selector, servers }, namespace);
  const http = (port: number, ...hosts: string[]) => ({
    port: { number: port, name: `http-${port}`, protocol: "HTTP" },
    hosts,
  });

  it("finds Bookinfo's gateway, whose selector picks the ingress gateway in istio-system", () => {
    const bookinfo = gateway("bookinfo-gateway", [http(8080, "*")]);
    assert.equal(run([bookinfo]).size, 0);
  });

  it("reports a selector that picks no workload in any namespace (IST0101), as Istio words it", () => {
    const lost = gateway("lost", [http(80, "*")], { istio: "ingressgateway", app: "elsewhere" });
    assert.deepEqual(messages(run([lost]), lost), [
      [
        AnalysisCodes.ReferencedResourceNotFound,
        "spec.selector",
        'Referenced selector not found: "app=elsewhere,istio=ingressgateway"',
      ],
    ]);
    assert.equal(messages(run([lost]), lost)[0]?.[0], "IST0101");
  });

  it("reports two Gateways on one workload and port with overlapping hosts, on both sides (IST0145)", () => {
    const bookinfo = gateway("bookinfo-gateway", [http(80, "*"), http(9000, "a.example.com")]);
    const demo = gateway("demo-gateway", [http(80, "helloworld.com")], { istio: "ingressgateway" }, "demo");
    const result = run([bookinfo, demo]);
    assert.deepEqual(messages(result, bookinfo), [
      [
        "IST0145",
        "spec.servers[0]",
        "Conflict with gateways demo/demo-gateway (workload selector istio=ingressgateway, port 80, hosts *).",
      ],
    ]);
    assert.deepEqual(messages(result, demo), [
      [
        "IST0145",
        "spec.servers[0]",
        "Conflict with gateways default/bookinfo-gateway (workload selector istio=ingressgateway, port 80, hosts helloworld.com).",
      ],
    ]);
  });

  it("counts a different selector that picks the same workload as the same workload", () => {
    const byIstio = gateway("by-istio", [http(80, "*.example.com")]);
    const byApp = gateway("by-app", [http(80, "shop.example.com")], { app: "istio-ingressgateway" });
    assert.deepEqual(codes(run([byIstio, byApp]), byApp), [
      [AnalysisCodes.ConflictingGateways, "spec.servers[0]"],
    ]);
  });

  for (const [why, mine, theirs] of [
    ["another port", http(80, "*"), http(8081, "*")],
    ["hosts that do not overlap", http(80, "a.example.com", "*.shop.example.com"), http(80, "b.example.com")],
    ["hosts for another namespace's VirtualServices", http(80, "./*"), http(80, "other/*")],
  ] as const) {
    it(`leaves alone a second Gateway on the same workload with ${why}`, () => {
      const result = run([gateway("first", [mine]), gateway("second", [theirs])]);
      assert.equal(result.size, 0, JSON.stringify([...result]));
    });
  }

  it("leaves alone Gateways with overlapping servers on different workloads", () => {
    const ingress = gateway("ingress", [http(80, "*")]);
    const reviews = gateway("reviews", [http(80, "*")], { app: "reviews" });
    assert.equal(run([ingress, reviews]).size, 0);
  });
});
