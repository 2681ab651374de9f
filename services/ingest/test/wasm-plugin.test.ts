import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ConfigResource, Severity } from "@sextant/proto";
import { AnalysisCodes } from "../src/analysis/analyzers.js";
import { analyzeResources, get, ingestForSuite, messagesOf, post, storedResource } from "./harness.js";

const plugin = (priority: number) => `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata:
  name: header-adder
  namespace: shop
spec:
  selector:
    matchLabels:
      app: reviews
  url: file:///opt/plugins/header_adder.wasm
  phase: AUTHZ
  priority: ${priority}
  pluginConfig:
    header: x-added
`;

describe("ingest stores WasmPlugins (extensions.istio.io/v1alpha1)", () => {
  const ingest = ingestForSuite();

  it("applies, lists, reads, updates and deletes one", async () => {
    const created = await post(`${ingest.url}/v1/apply`, plugin(10));
    assert.equal(created.status, 200, JSON.stringify(created.json));
    assert.equal(created.json.resources[0].result, "created");
    const changed = await post(`${ingest.url}/v1/apply`, plugin(20));
    assert.equal(changed.json.resources[0].result, "configured");

    const listed = await get(`${ingest.url}/v1/config?kind=wasmplugins&namespace=shop`);
    assert.deepEqual(
      listed.json.items.map((item: { metadata: { name: string } }) => item.metadata.name),
      ["header-adder"],
    );
    const one = await get(`${ingest.url}/v1/config/WasmPlugin/shop/header-adder`);
    assert.equal(one.status, 200);
    assert.equal(one.json.apiVersion, "extensions.istio.io/v1alpha1");
    assert.equal(one.json.spec.phase, "AUTHZ");
    assert.equal(one.json.spec.priority, 20);
    assert.deepEqual(one.json.spec.pluginConfig, { header: "x-added" });

    const url = `${ingest.url}/v1/config/WasmPlugin/shop/header-adder`;
    assert.equal((await fetch(url, { method: "DELETE" })).status, 200);
    assert.equal((await get(url)).status, 404);
  });

  it("rejects one that Istio rejects, naming the field", async () => {
    const rejected = await post(
      `${ingest.url}/v1/apply`,
      plugin(1).replace("file:///opt/plugins/header_adder.wasm", "ftp://example.com/p.wasm"),
    );
    assert.equal(rejected.status, 400, JSON.stringify(rejected.json));
    assert.ok(JSON.stringify(rejected.json).includes("spec.url"), JSON.stringify(rejected.json));
  });
});

describe("WasmPlugin analysis", () => {
  const wasmPlugin = (name: string, spec: Record<string, unknown>) =>
    storedResource(
      { kind: "WasmPlugin", apiVersion: "extensions.istio.io/v1alpha1", namespace: "shop", name },
      spec,
    );
  const messages = (...resources: ConfigResource[]) => {
    const result = analyzeResources(resources);
    return resources.map((r) => messagesOf(result, r).map((m) => [m.code, m.severity, m.field]));
  };

  it("warns that a module to download never runs, and says what is accepted but ignored", () => {
    const [oci, https, local, reload] = messages(
      wasmPlugin("oci", { url: "registry.example.com/plugin:1", imagePullSecret: "pull" }),
      wasmPlugin("https", { url: "https://example.com/p.wasm", failStrategy: "FAIL_OPEN" }),
      wasmPlugin("local", { url: "file:///opt/p.wasm" }),
      wasmPlugin("reload", { url: "file:///opt/p.wasm", failStrategy: "FAIL_RELOAD" }),
    );
    const info = Severity.SEVERITY_INFO;
    const proxyless = [AnalysisCodes.WasmPluginIgnored, info, "spec"];
    assert.deepEqual(oci, [
      [AnalysisCodes.WasmModuleNotFetched, Severity.SEVERITY_WARNING, "spec.url"],
      [AnalysisCodes.WasmPluginIgnored, info, "spec.imagePullSecret"],
      proxyless,
    ]);
    assert.deepEqual(https, [
      [AnalysisCodes.WasmModuleNotFetched, Severity.SEVERITY_WARNING, "spec.url"],
      proxyless,
    ]);
    assert.deepEqual(local, [proxyless]);
    assert.deepEqual(reload, [[AnalysisCodes.WasmPluginIgnored, info, "spec.failStrategy"], proxyless]);
  });
});
