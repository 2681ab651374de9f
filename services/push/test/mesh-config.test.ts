import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createLogger } from "@sextant/observability";
import { MeshConfigFile } from "../src/inputs/mesh-config-file.js";
import type { MeshConfig } from "../src/model/mesh-config.js";
import { parseMeshConfig } from "../src/model/mesh-config.js";

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
});

describe("MESH_CONFIG_FILE, followed as istiod follows /etc/istio/config/mesh", () => {
  const logger = createLogger({ service: "test", level: "silent" });
  const provider = (name: string) =>
    `extensionProviders:\n- name: ${name}\n  envoyExtAuthzGrpc: {service: x.y.svc.cluster.local, port: 9000}\n`;
  const names = (mesh: MeshConfig) => mesh.extensionProviders.map((p) => p.name);

  it("reads the file at start; a missing file (an optional ConfigMap not created yet) is no providers", () => {
    const dir = mkdtempSync(join(tmpdir(), "mesh-config-"));
    assert.deepEqual(names(new MeshConfigFile(join(dir, "mesh"), logger).current), []);
    writeFileSync(join(dir, "mesh"), provider("first"));
    assert.deepEqual(names(new MeshConfigFile(join(dir, "mesh"), logger).current), ["first"]);
  });

  it("refuses to start on an invalid file", () => {
    const path = join(mkdtempSync(join(tmpdir(), "mesh-config-")), "mesh");
    writeFileSync(path, "- not a mapping\n");
    assert.throws(() => new MeshConfigFile(path, logger), /must be a YAML mapping/);
  });

  it("reports a changed file, and keeps the last good MeshConfig when the new one is invalid", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "mesh-config-")), "mesh");
    writeFileSync(path, provider("first"));
    const file = new MeshConfigFile(path, logger);
    const changes: string[][] = [];
    await file.start();
    try {
      const changed = new Promise<void>((resolve) =>
        file.onChange((mesh) => {
          changes.push(names(mesh));
          resolve();
        }),
      );
      writeFileSync(path, provider("second"));
      await changed; // the directory watch reloads it
      assert.deepEqual(changes, [["second"]]);
      writeFileSync(path, "extensionProviders: not-a-list\n");
      file.reload();
      assert.deepEqual(names(file.current), ["second"]);
      assert.deepEqual(changes, [["second"]], "an invalid file is not reported");
      writeFileSync(path, provider("second"));
      file.reload();
      assert.deepEqual(changes, [["second"]], "the same content is not reported again");
    } finally {
      await file.close();
    }
  });
});
