import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ResourceInput, validateResource } from "../src/index.js";

/** Validates `spec` as a resource of `kind` and returns its warnings' paths, asserting no errors. */
function warningPaths(kind: string, spec: unknown, apiVersion = "networking.istio.io/v1"): string[] {
  const resource: ResourceInput = { apiVersion, kind, metadata: { name: "a", namespace: "default" }, spec };
  const result = validateResource(resource);
  assert.deepEqual(result.errors, [], JSON.stringify(result.errors));
  return result.warnings.map((w) => w.path);
}

const route = [{ destination: { host: "r" } }];

describe("warnings Istio gives (accepted, not refused)", () => {
  it("deprecated fields: consecutiveErrors, mirrorPercent, minimumRingSize, in Istio's words", () => {
    const dr = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "DestinationRule",
      metadata: { name: "a" },
      spec: {
        host: "r",
        trafficPolicy: {
          outlierDetection: { consecutiveErrors: 5 },
          loadBalancer: { consistentHash: { useSourceIp: true, minimumRingSize: 1024 } },
        },
      },
    });
    assert.deepEqual(dr.errors, []);
    assert.deepEqual(dr.warnings.map((w) => w.path).sort(), [
      "spec.trafficPolicy.loadBalancer.consistentHash.minimumRingSize",
      "spec.trafficPolicy.outlierDetection.consecutiveErrors",
    ]);
    assert.match(
      dr.warnings.map((w) => w.message).join("\n"),
      /consecutiveErrors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors/,
    );
    const vs = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "a" },
      spec: { hosts: ["r"], http: [{ route, mirror: { host: "m" }, mirrorPercent: 50 }] },
    });
    assert.deepEqual(vs.errors, []);
    assert.deepEqual(vs.warnings, [
      {
        path: "spec.http[0].mirrorPercent",
        message: 'using deprecated setting "mirrorPercent", use "mirrorPercentage" instead',
      },
    ]);
  });

  it("older API versions (v1alpha3, v1beta1) are served without a warning, as Istio's CRDs carry none", () => {
    const spec = { hosts: ["r"], http: [{ route }] };
    assert.deepEqual(warningPaths("VirtualService", spec, "networking.istio.io/v1alpha3"), []);
    assert.deepEqual(warningPaths("VirtualService", spec, "networking.istio.io/v1beta1"), []);
    assert.deepEqual(
      warningPaths("PeerAuthentication", { mtls: { mode: "STRICT" } }, "security.istio.io/v1beta1"),
      [],
    );
  });

  it("a workload selector without labels", () => {
    assert.deepEqual(
      warningPaths("Sidecar", { workloadSelector: { labels: {} }, egress: [{ hosts: ["./*"] }] }),
      ["spec.workloadSelector.labels"],
    );
  });

  it("an abort without an error type", () => {
    assert.deepEqual(
      warningPaths("VirtualService", {
        hosts: ["r"],
        http: [{ fault: { abort: { percentage: { value: 1 } } }, route }],
      }),
      ["spec.http[0].fault.abort"],
    );
  });

  it("the legacy name.namespace gateway form", () => {
    assert.deepEqual(
      warningPaths("VirtualService", {
        hosts: ["a.example.com"],
        gateways: ["gw.istio-system"],
        http: [{ route }],
      }),
      ["spec.gateways[0]"],
    );
  });

  it("Gateway: httpsRedirect off HTTP, certificates on PASSTHROUGH, unknown and repeated ciphers, TLS 1.0 without ciphers", () => {
    const server = (tls: unknown, protocol = "HTTPS") => ({
      servers: [{ port: { number: 443, name: "p", protocol }, hosts: ["a.example.com"], tls }],
    });
    assert.deepEqual(warningPaths("Gateway", server({ mode: "PASSTHROUGH", httpsRedirect: true }, "TLS")), [
      "spec.servers[0].tls.httpsRedirect",
    ]);
    assert.deepEqual(warningPaths("Gateway", server({ mode: "PASSTHROUGH", credentialName: "c" })), [
      "spec.servers[0].tls",
    ]);
    const ciphers = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "Gateway",
      metadata: { name: "gw" },
      spec: server({
        mode: "SIMPLE",
        credentialName: "c",
        cipherSuites: ["AES128-SHA", "AES128-SHA", "NOT-A-CIPHER", "-ALL"],
      }),
    });
    assert.deepEqual(ciphers.errors, []);
    assert.deepEqual(
      ciphers.warnings.map((w) => w.message),
      ["ignoring invalid cipher suites: NOT-A-CIPHER", "ignoring duplicate cipher suites: AES128-SHA"],
    );
    assert.deepEqual(
      warningPaths("Gateway", server({ mode: "SIMPLE", credentialName: "c", minProtocolVersion: "TLSV1_0" })),
      ["spec.servers[0].tls.cipherSuites"],
    );
  });

  it("a WorkloadEntry with a network and no address", () => {
    assert.deepEqual(warningPaths("WorkloadEntry", { network: "net2", serviceAccount: "sa" }), [
      "spec.address",
    ]);
  });

  it("a DENY rule on HTTP attributes only (it denies all TCP traffic), but not one that names ports", () => {
    const policy = (to: unknown) => ({ action: "DENY", rules: [{ to: [{ operation: to }] }] });
    assert.deepEqual(
      warningPaths("AuthorizationPolicy", policy({ paths: ["/admin"] }), "security.istio.io/v1"),
      ["spec.rules[0]"],
    );
    assert.deepEqual(
      warningPaths(
        "AuthorizationPolicy",
        policy({ paths: ["/admin"], ports: ["8080"] }),
        "security.istio.io/v1",
      ),
      [],
    );
    assert.deepEqual(
      warningPaths(
        "AuthorizationPolicy",
        { action: "DENY", rules: [{ from: [{ source: { requestPrincipals: ["*"] } }] }] },
        "security.istio.io/v1",
      ),
      ["spec.rules[0]"],
    );
  });

  it("failover without outlier detection", () => {
    const spec = {
      host: "r",
      trafficPolicy: {
        loadBalancer: { localityLbSetting: { failover: [{ from: "us-east", to: "eu-west" }] } },
      },
    };
    assert.deepEqual(warningPaths("DestinationRule", spec), [
      "spec.trafficPolicy.loadBalancer.localityLbSetting",
    ]);
  });

  it("a ServiceEntry with resolution NONE and a workloadSelector", () => {
    const spec = {
      hosts: ["a.example.com"],
      resolution: "NONE",
      workloadSelector: { labels: { app: "a" } },
      ports: [{ number: 80, name: "http", protocol: "HTTP" }],
    };
    assert.deepEqual(warningPaths("ServiceEntry", spec), ["spec.workloadSelector"]);
  });
});

describe("more warnings Istio gives", () => {
  it("Sidecar egress: a host given twice or under ns/*, and */* beside other hosts", () => {
    const spec = {
      egress: [{ hosts: ["ns1/a.example.com", "ns1/*", "./b.example.com", "default/b.example.com", "*/*"] }],
    };
    assert.deepEqual(warningPaths("Sidecar", spec).sort(), [
      "spec.egress[0].hosts",
      "spec.egress[0].hosts[1]",
      "spec.egress[0].hosts[3]",
    ]);
  });

  it("a ServiceEntry host with a partial wildcard", () => {
    const spec = {
      hosts: ["*foo.example.com"],
      resolution: "NONE",
      ports: [{ number: 80, name: "http", protocol: "HTTP" }],
    };
    assert.deepEqual(warningPaths("ServiceEntry", spec), ["spec.hosts[0]"]);
  });
});
