import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { credentialKey } from "@sextant/model";
import { type ConfigResource, Severity } from "@sextant/proto";
import { AnalysisCodes } from "../src/analysis/analyzers.js";
import type { AnalysisWorkload, CredentialIndex } from "../src/analysis/gateway-analyzers.js";
import { analyzeResources, messagesOf, storedResource } from "./harness.js";

const resource = (kind: string, name: string, spec: Record<string, unknown>, namespace = "default") =>
  storedResource({ kind, apiVersion: "networking.istio.io/v1", namespace, name }, spec);
const registry = new Set(["reviews.default.svc.cluster.local", "ratings.default.svc.cluster.local"]);
/** Istio's ingress gateway pods, and a Bookinfo workload. */
const workloads: AnalysisWorkload[] = [
  { namespace: "istio-system", labels: { app: "istio-ingressgateway", istio: "ingressgateway" } },
  { namespace: "default", labels: { app: "reviews", version: "v1" } },
];
const run = (resources: ConfigResource[], credentials: CredentialIndex = new Map()) =>
  analyzeResources(resources, { registryHosts: registry, workloads, credentials });
const codes = (result: ReturnType<typeof run>, r: ConfigResource) =>
  messagesOf(result, r).map((m) => [m.code, m.field]);

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
    assert.deepEqual(messagesOf(result, withSelector), []);
    const [ignored] = messagesOf(result, withoutSelector);
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
    messagesOf(result, r).map((m) => [m.code, m.field, m.message]);
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

  describe("credentialName (IST0101 as Istio's gateway secret analyzer; SXT0003)", () => {
    const https = (mode: string, credentialName: string) => ({
      port: { number: 443, name: "https", protocol: "HTTPS" },
      hosts: ["web.example.com"],
      tls: { mode, credentialName },
    });
    const present = (hasCertificate: boolean, hasCaCertificate: boolean) => ({
      hasCertificate,
      hasCaCertificate,
    });
    const index = (...entries: Array<[string, string, ReturnType<typeof present>]>): CredentialIndex =>
      new Map(entries.map(([namespace, name, presence]) => [credentialKey({ namespace, name }), presence]));
    const notFound = (name: string, server = 0) => [
      "IST0101",
      `spec.servers[${server}].tls.credentialName`,
      `Referenced credentialName not found: "${name}"`,
    ];

    it("looks for the Secret in the gateway workload's namespace, not the Gateway's", () => {
      const web = gateway("web", [https("SIMPLE", "web-cred")]);
      const inGatewayNamespace = index(["default", "web-cred", present(true, false)]);
      assert.deepEqual(messages(run([web], inGatewayNamespace), web), [notFound("web-cred")]);
      const inWorkloadNamespace = index(["istio-system", "web-cred", present(true, false)]);
      assert.equal(run([web], inWorkloadNamespace).size, 0);
    });

    it("takes a namespace/name credentialName at its word", () => {
      const web = gateway("web", [https("SIMPLE", "certs/web-cred")]);
      assert.deepEqual(messages(run([web]), web), [notFound("certs/web-cred")]);
      assert.equal(run([web], index(["certs", "web-cred", present(true, false)])).size, 0);
    });

    it("reports each server on its own field", () => {
      const web = gateway("web", [https("SIMPLE", "a"), http(80, "*"), https("MUTUAL", "b")]);
      const result = run([web], index(["istio-system", "a", present(true, false)]));
      assert.deepEqual(messages(result, web), [notFound("b", 2)]);
    });

    it("needs a CA for MUTUAL: in the Secret or its -cacert companion", () => {
      const web = gateway("web", [https("MUTUAL", "web-cred")]);
      const noCa = run([web], index(["istio-system", "web-cred", present(true, false)]));
      assert.deepEqual(messages(noCa, web), [
        [
          "SXT0003",
          "spec.servers[0].tls.credentialName",
          'Secret "istio-system/web-cred" has no CA certificate to verify clients (ca.crt or cacert), ' +
            'and no Secret "istio-system/web-cred-cacert" holds one',
        ],
      ]);
      const caInSecret = index(["istio-system", "web-cred", present(true, true)]);
      assert.equal(run([web], caInSecret).size, 0);
      const caInCompanion = index(
        ["istio-system", "web-cred", present(true, false)],
        ["istio-system", "web-cred-cacert", present(false, true)],
      );
      assert.equal(run([web], caInCompanion).size, 0);
    });

    it("reports a Secret without a certificate and key pair (SXT0003)", () => {
      const web = gateway("web", [https("SIMPLE", "web-cred")]);
      const result = run([web], index(["istio-system", "web-cred", present(false, true)]));
      assert.deepEqual(codes(result, web), [["SXT0003", "spec.servers[0].tls.credentialName"]]);
      assert.match(messagesOf(result, web)[0]?.message ?? "", /holds no certificate and private key/);
    });

    it("leaves alone modes that read no Secret, and builtin:// names", () => {
      const web = gateway("web", [
        https("PASSTHROUGH", "a"),
        https("AUTO_PASSTHROUGH", "b"),
        https("ISTIO_MUTUAL", ""),
        https("SIMPLE", "builtin://"),
      ]);
      assert.equal(run([web]).size, 0, JSON.stringify([...run([web])]));
    });

    it("checks each of credentialNames on its own field; MUTUAL needs the first one's CA unless caCertCredentialName", () => {
      const server = (tls: Record<string, unknown>) => ({
        port: { number: 443, name: "https", protocol: "HTTPS" },
        hosts: ["web.example.com"],
        tls,
      });
      const web = gateway("web", [
        server({ mode: "SIMPLE", credentialNames: ["rsa", "ecdsa"] }),
        server({ mode: "MUTUAL", credentialNames: ["rsa", "ecdsa"] }),
        server({ mode: "MUTUAL", credentialNames: ["rsa"], caCertCredentialName: "clients-cacert" }),
      ]);
      const result = run([web], index(["istio-system", "rsa", present(true, false)]));
      assert.deepEqual(codes(result, web), [
        ["IST0101", "spec.servers[0].tls.credentialNames[1]"],
        ["SXT0003", "spec.servers[1].tls.credentialNames[0]"],
        ["IST0101", "spec.servers[1].tls.credentialNames[1]"],
      ]);
    });

    it("warns that tlsCertificates (files the agent does not serve) are ignored (SXT0004)", () => {
      const files = gateway("files", [
        {
          port: { number: 443, name: "https", protocol: "HTTPS" },
          hosts: ["web.example.com"],
          tls: { mode: "SIMPLE", tlsCertificates: [{ serverCertificate: "/a.crt", privateKey: "/a.key" }] },
        },
      ]);
      const result = run([files]);
      assert.deepEqual(codes(result, files), [
        [AnalysisCodes.FieldIgnored, "spec.servers[0].tls.tlsCertificates"],
      ]);
      assert.equal(messagesOf(result, files)[0]?.severity, Severity.SEVERITY_WARNING);
    });

    it("says only that the selector finds nothing when no workload is selected", () => {
      const lost = gateway("lost", [https("SIMPLE", "web-cred")], { app: "nowhere" });
      assert.deepEqual(codes(run([lost]), lost), [
        [AnalysisCodes.ReferencedResourceNotFound, "spec.selector"],
      ]);
    });
  });

  it("warns that RequestAuthentication spaceDelimitedClaims has no effect (SXT0004), and is silent without it", () => {
    const jwt = (spaceDelimitedClaims: string[]) =>
      resource("RequestAuthentication", "jwt", {
        jwtRules: [{ issuer: "https://example.com", spaceDelimitedClaims }],
      });
    const withClaims = jwt(["roles"]);
    assert.deepEqual(codes(run([withClaims]), withClaims), [
      [AnalysisCodes.FieldIgnored, "spec.jwtRules[0].spaceDelimitedClaims"],
    ]);
    assert.equal(run([jwt([])]).size, 0);
  });

  it("warns of the other accepted fields without effect: proxyProtocol, tunnel, retryRemoteLocalities, egressProxy (SXT0004)", () => {
    const rule = resource("DestinationRule", "reviews", {
      host: "reviews",
      trafficPolicy: { proxyProtocol: { version: "V2" } },
      subsets: [
        {
          name: "v1",
          labels: { version: "v1" },
          trafficPolicy: { tunnel: { targetHost: "x", targetPort: 80 } },
        },
      ],
    });
    const routes = resource("VirtualService", "reviews", {
      hosts: ["reviews"],
      http: [
        {
          route: [{ destination: { host: "reviews" } }],
          retries: { attempts: 2, retryRemoteLocalities: false },
        },
        {
          route: [{ destination: { host: "reviews" } }],
          retries: { attempts: 2, retryRemoteLocalities: true },
        },
      ],
    });
    const sidecar = resource("Sidecar", "default", {
      outboundTrafficPolicy: { mode: "ALLOW_ANY", egressProxy: { host: "egress", port: { number: 80 } } },
    });
    const result = run([rule, routes, sidecar]);
    assert.deepEqual(codes(result, rule), [
      [AnalysisCodes.FieldIgnored, "spec.trafficPolicy.proxyProtocol"],
      [AnalysisCodes.FieldIgnored, "spec.subsets[0].trafficPolicy.tunnel"],
    ]);
    assert.deepEqual(codes(result, routes), [
      [AnalysisCodes.FieldIgnored, "spec.http[1].retries.retryRemoteLocalities"],
    ]);
    assert.deepEqual(codes(result, sidecar), [
      [AnalysisCodes.FieldIgnored, "spec.outboundTrafficPolicy.egressProxy"],
    ]);
  });
});

describe("EnvoyFilter analyzers", () => {
  const envoyFilter = (configPatches: unknown[]) =>
    resource("EnvoyFilter", "ef", { configPatches }, "istio-system");

  it("warns of patches Sextant stores but never applies: bootstrap, extension config, waypoints", () => {
    const filter = envoyFilter([
      { applyTo: "BOOTSTRAP", patch: { operation: "MERGE", value: {} } },
      { applyTo: "EXTENSION_CONFIG", patch: { operation: "ADD", value: { name: "x" } } },
      { applyTo: "HTTP_FILTER", match: { context: "WAYPOINT" }, patch: { operation: "REMOVE" } },
      { applyTo: "CLUSTER", patch: { operation: "MERGE", value: {} } },
    ]);
    const messages = messagesOf(run([filter]), filter);
    assert.deepEqual(
      messages.map((m) => [m.code, m.field, m.severity]),
      [0, 1, 2].map((i) => ["SXT0020", `spec.configPatches[${i}]`, Severity.SEVERITY_WARNING]),
    );
    assert.match(messages[0]?.message ?? "", /bootstrap/);
  });

  it("warns of HTTP filters that land after the router, which Envoy rejects, and not of those before it", () => {
    const hcm = "envoy.filters.network.http_connection_manager";
    const value = { name: "envoy.filters.http.grpc_web" };
    const filter = envoyFilter([
      { applyTo: "HTTP_FILTER", patch: { operation: "ADD", value } },
      {
        applyTo: "HTTP_FILTER",
        match: {
          listener: {
            filterChain: { filter: { name: hcm, subFilter: { name: "envoy.filters.http.router" } } },
          },
        },
        patch: { operation: "INSERT_AFTER", value },
      },
      {
        applyTo: "HTTP_FILTER",
        match: {
          listener: {
            filterChain: { filter: { name: hcm, subFilter: { name: "envoy.filters.http.router" } } },
          },
        },
        patch: { operation: "INSERT_BEFORE", value },
      },
      { applyTo: "HTTP_FILTER", patch: { operation: "INSERT_FIRST", value } },
    ]);
    assert.deepEqual(codes(run([filter]), filter), [
      ["SXT0021", "spec.configPatches[0].patch.operation"],
      ["SXT0021", "spec.configPatches[1].patch.operation"],
    ]);
  });
});
