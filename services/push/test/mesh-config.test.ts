import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { loadMeshConfigFile, parseMeshConfig } from "../src/model/mesh-config.js";

describe("MeshConfig (MESH_CONFIG_FILE)", () => {
  it("reads HTTP and gRPC ext_authz providers with Istio's field names, defaults for what is not written", () => {
    const mesh = parseMeshConfig(`
accessLogFile: /dev/stdout
extensionProviders:
- name: opa-http
  envoyExtAuthzHttp:
    service: opa.authz.svc.cluster.local
    port: 8181
    timeout: 2.5s
    failOpen: true
    statusOnError: "503"
    pathPrefix: /check
    includeRequestHeadersInCheck: [x-user, "x-ext-*"]
    includeAdditionalHeadersInCheck: { x-source: sidecar }
    headersToUpstreamOnAllow: [x-auth-user]
    headersToDownstreamOnDeny: ["*-reason"]
    includeRequestBodyInCheck: { maxRequestBytes: 1024, allowPartialMessage: true }
- name: opa-grpc
  envoyExtAuthzGrpc:
    service: authz/opa.authz.svc.cluster.local
    port: 9191
- name: zipkin
  zipkin: { service: zipkin.istio-system.svc.cluster.local, port: 9411 }
`);
    assert.equal(mesh.extensionProviders.length, 2, "tracing providers are not authorization providers");
    const [http, grpc] = mesh.extensionProviders;
    assert.deepEqual(http, {
      name: "opa-http",
      kind: "http",
      service: "opa.authz.svc.cluster.local",
      port: 8181,
      timeout: { seconds: 2, nanos: 500_000_000 },
      failOpen: true,
      statusOnError: 503,
      pathPrefix: "/check",
      includeRequestHeadersInCheck: ["x-user", "x-ext-*"],
      includeAdditionalHeadersInCheck: { "x-source": "sidecar" },
      headersToUpstreamOnAllow: ["x-auth-user"],
      headersToDownstreamOnDeny: ["*-reason"],
      headersToDownstreamOnAllow: [],
      includeRequestBodyInCheck: { maxRequestBytes: 1024, allowPartialMessage: true, packAsBytes: false },
      errors: [],
    });
    assert.equal(grpc?.kind, "grpc");
    assert.equal(grpc?.service, "authz/opa.authz.svc.cluster.local");
    assert.deepEqual(grpc?.timeout, { seconds: 600, nanos: 0 }, "Istio's default timeout");
    assert.equal(grpc?.failOpen, false);
    assert.equal(grpc?.statusOnError, undefined);
    assert.deepEqual(grpc?.errors, []);
  });

  it("keeps an invalid provider with its errors, so a CUSTOM policy naming it denies", () => {
    const mesh = parseMeshConfig(`
extensionProviders:
- name: Bad_Name
  envoyExtAuthzHttp: { service: a.b.svc.cluster.local, port: 80 }
- name: no-port
  envoyExtAuthzHttp: { service: a.b.svc.cluster.local, pathPrefix: check, statusOnError: "999" }
- name: wildcard
  envoyExtAuthzHttp: { service: a.b.svc.cluster.local, port: 80, includeRequestHeadersInCheck: ["*"] }
- name: wildcard
  envoyExtAuthzGrpc: { port: 70000, timeout: soon }
`);
    const errors = mesh.extensionProviders.map((provider) => provider.errors);
    assert.match(errors[0]?.join() ?? "", /invalid provider name "Bad_Name"/);
    assert.match(errors[1]?.join() ?? "", /port must be in the range/);
    assert.match(errors[1]?.join() ?? "", /pathPrefix must begin with "\/"/);
    assert.match(errors[1]?.join() ?? "", /unsupported statusOnError 999/);
    assert.match(errors[2]?.join() ?? "", /single wildcard/);
    assert.match(errors[3]?.join() ?? "", /must be unique/);
    assert.match(errors[3]?.join() ?? "", /service must not be empty/);
    assert.match(errors[3]?.join() ?? "", /invalid timeout "soon"/);
  });

  it("uses the deprecated includeHeadersInCheck only when includeRequestHeadersInCheck is empty", () => {
    const [provider] = parseMeshConfig(`
extensionProviders:
- name: legacy
  envoyExtAuthzHttp: { service: a.b.svc.cluster.local, port: 80, includeHeadersInCheck: [cookie] }
`).extensionProviders;
    assert.deepEqual(provider?.includeRequestHeadersInCheck, ["cookie"]);
  });

  it("reads an empty document as no providers, and refuses what is not a mapping", () => {
    assert.deepEqual(parseMeshConfig(""), { extensionProviders: [] });
    assert.throws(() => parseMeshConfig("- a\n- b\n"), /must be a YAML mapping/);
    assert.throws(() => parseMeshConfig("extensionProviders: x\n"), /must be a list/);
  });

  it("loads the file MESH_CONFIG_FILE names", () => {
    const path = join(mkdtempSync(join(tmpdir(), "mesh-config-")), "mesh");
    writeFileSync(
      path,
      "extensionProviders:\n- name: x\n  envoyExtAuthzGrpc: { service: x.y.svc.cluster.local, port: 9000 }\n",
    );
    assert.equal(loadMeshConfigFile(path).extensionProviders[0]?.name, "x");
  });
});
