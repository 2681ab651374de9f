// WasmPlugins: which proxy and listener a plugin attaches to (selector,
// targetRefs, namespace, match), what a proxy may ask ECDS for, and the ECDS
// type served over both ADS variants through the type table. Filter
// placement and resource content per case are in the golden files
// testdata/{sidecar,gateway}/wasm-plugins.*.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TypedExtensionConfig, TypeUrl, Wasm } from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { StringValue } from "@sextant/proto/gen/google/protobuf/wrappers";
import { eventually } from "@sextant/testing";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import { type ListenerInfo, wasmPluginResourceName, wasmPluginsFor } from "../src/model/wasm-plugin.js";
import { moduleSource } from "../src/translate/extension/wasm-config.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { DeltaTestClient } from "./delta-client.js";
import { contextOf } from "./golden-inputs.js";
import { AdsTestClient, startDiscoveryServer } from "./harness.js";

const node = (namespace: string, labels: Record<string, string> = { app: "reviews" }) =>
  Node.fromPartial({
    id: `sidecar~10.244.1.12~reviews-v1-abc.${namespace}~${namespace}.svc.cluster.local`,
    metadata: { NAMESPACE: namespace, LABELS: labels },
  });

const plugin = (name: string, namespace: string, spec: string) => `apiVersion: extensions.istio.io/v1alpha1
kind: WasmPlugin
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  url: file:///opt/filters/${name}.wasm
${spec
  .split("\n")
  .map((line) => `  ${line}`)
  .join("\n")}
`;

const contextWith = (...plugins: string[]) => contextOf({ services: [], config: plugins.join("---\n") });

/** The names of the plugins of a listener, phase by phase in Istio's slot order. */
function attached(
  push: PushContext,
  proxyNode: Node,
  listener: ListenerInfo,
  chain: "http" | "network" = "http",
) {
  const byPhase = wasmPluginsFor(push, parseProxy(proxyNode), listener, chain);
  return [...byPhase.values()].flat().map((p) => `${p.ref.namespace}/${p.ref.name}`);
}

const ref = (namespace: string, name: string) => ({ kind: "WasmPlugin", namespace, name });

describe("WasmPlugin attachment", () => {
  const push = contextWith(
    plugin("selected", "shop", "selector: {matchLabels: {app: reviews}}"),
    plugin("other-app", "shop", "selector: {matchLabels: {app: ratings}}"),
    plugin("whole-namespace", "shop", ""),
    plugin("mesh-wide", "istio-system", "selector: {matchLabels: {app: reviews}}"),
    plugin("other-namespace", "elsewhere", ""),
    plugin(
      "gateway-ref",
      "shop",
      "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: edge}]",
    ),
    plugin("server-9080", "shop", "match: [{mode: SERVER, ports: [{number: 9080}]}]"),
    plugin("client-any", "shop", "match: [{mode: CLIENT}]"),
    plugin("network", "shop", "type: NETWORK"),
  );

  it("takes the proxy's namespace and the root namespace, by selector; targetRefs are for gateways only", () => {
    const names = attached(push, node("shop"), { class: "outbound", port: 8080 });
    assert.deepEqual(names.sort(), [
      "istio-system/mesh-wide",
      "shop/client-any",
      "shop/selected",
      "shop/whole-namespace",
    ]);
  });

  it("takes a listener by mode and port: SERVER is inbound, CLIENT outbound and gateways", () => {
    assert.ok(attached(push, node("shop"), { class: "inbound", port: 9080 }).includes("shop/server-9080"));
    assert.ok(!attached(push, node("shop"), { class: "inbound", port: 9081 }).includes("shop/server-9080"));
    assert.ok(!attached(push, node("shop"), { class: "inbound", port: 9080 }).includes("shop/client-any"));
    assert.ok(attached(push, node("shop"), { class: "gateway", port: 8080 }).includes("shop/client-any"));
  });

  it("puts NETWORK plugins only on network chains, and the others only in HCMs", () => {
    assert.deepEqual(attached(push, node("shop"), { class: "outbound", port: 80 }, "network"), [
      "shop/network",
    ]);
    assert.ok(!attached(push, node("shop"), { class: "outbound", port: 80 }).includes("shop/network"));
  });

  it("attaches targetRefs to a Gateway API gateway of the same namespace by its gateway-name label", () => {
    const gateway = node("shop", { "gateway.networking.k8s.io/gateway-name": "edge" });
    const names = attached(push, gateway, { class: "gateway", port: 80 });
    assert.ok(names.includes("shop/gateway-ref"), names.join());
    const otherGateway = node("shop", { "gateway.networking.k8s.io/gateway-name": "internal" });
    assert.ok(!attached(push, otherGateway, { class: "gateway", port: 80 }).includes("shop/gateway-ref"));
  });

  it("reads a url as Istio: file:// is a local path, no scheme is an OCI image", () => {
    assert.deepEqual(moduleSource("file:///opt/a.wasm"), { kind: "file", filename: "/opt/a.wasm" });
    assert.deepEqual(moduleSource("registry.example.com/a:1"), { kind: "remote", scheme: "oci" });
    assert.deepEqual(moduleSource("HTTPS://example.com/a.wasm"), { kind: "remote", scheme: "https" });
  });
});

describe("ECDS", () => {
  const generate = (push: PushContext, proxyNode: Node, names: "*" | string[]) =>
    XDS_TYPES.generator("sidecar", TypeUrl.TypedExtensionConfig)
      ?.generate(
        { push, proxy: parseProxy(proxyNode), cache: new XdsCache() },
        names === "*" ? "*" : new Set(names),
      )
      .map((r) => r.name);

  it("answers names of the proxy's and the root namespace only, and nothing to a wildcard", () => {
    const push = contextWith(
      plugin("local", "shop", ""),
      plugin("mesh", "istio-system", ""),
      plugin("foreign", "elsewhere", ""),
    );
    const names = [ref("shop", "local"), ref("istio-system", "mesh"), ref("elsewhere", "foreign")].map(
      wasmPluginResourceName,
    );
    assert.deepEqual(
      generate(push, node("shop"), [...names, "extensions.istio.io/trafficextension/shop.missing"]),
      [names[1], names[0]],
    );
    assert.deepEqual(generate(push, node("shop"), "*"), []);
  });

  it("is served over both ADS variants: the plugin's Wasm filter by name, ACKed, and again when the plugin changes", async () => {
    let push = contextWith(plugin("header-adder", "shop", "pluginConfig: {header: x-a}"));
    const acked: string[] = [];
    const nacked: string[] = [];
    const server = await startDiscoveryServer({
      context: () => push,
      tracer: {
        sent: () => {},
        acked: (_connection, typeUrl) => acked.push(typeUrl),
        nacked: (_connection, typeUrl, message) => nacked.push(`${typeUrl}: ${message}`),
        pushed: () => {},
      },
    });
    const name = wasmPluginResourceName(ref("shop", "header-adder"));
    const configOf = (any: { value: Uint8Array } | undefined) => {
      assert.ok(any, "an extension config");
      const extension = TypedExtensionConfig.decode(any.value);
      assert.equal(extension.name, name);
      assert.equal(extension.typedConfig?.typeUrl, TypeUrl.Wasm);
      const configuration = Wasm.decode(extension.typedConfig.value).config?.configuration;
      return StringValue.decode(configuration?.value ?? new Uint8Array()).value;
    };
    const sotw = new AdsTestClient(server.address);
    const delta = new DeltaTestClient(server.address);
    try {
      sotw.send({ node: node("shop"), typeUrl: TypeUrl.TypedExtensionConfig, resourceNames: [name] });
      const first = await sotw.next();
      assert.equal(first.typeUrl, TypeUrl.TypedExtensionConfig);
      assert.equal(configOf(first.resources[0]), '{"header":"x-a"}');
      sotw.send({
        typeUrl: TypeUrl.TypedExtensionConfig,
        resourceNames: [name],
        responseNonce: first.nonce,
        versionInfo: first.versionInfo,
      });

      delta.send({
        node: node("shop"),
        typeUrl: TypeUrl.TypedExtensionConfig,
        resourceNamesSubscribe: [name],
      });
      const initial = await delta.next();
      assert.deepEqual(
        initial.resources.map((r) => r.name),
        [name],
      );
      delta.ack(initial);
      // Both ACKs are in before the change, so that each answers the response it names.
      await eventually(() => acked.length === 2 || undefined, { message: "both ACKs" });

      push = contextWith(plugin("header-adder", "shop", "pluginConfig: {header: x-b}"));
      server.discovery.push({ full: true, endpointHosts: new Set() }, Date.now());
      await server.discovery.idle();
      const [pushed, incremental] = [await sotw.next(), await delta.next()];
      assert.equal(configOf(pushed.resources[0]), '{"header":"x-b"}');
      assert.notEqual(pushed.versionInfo, first.versionInfo);
      assert.equal(configOf(incremental.resources[0]?.resource), '{"header":"x-b"}');
      assert.deepEqual(acked, [TypeUrl.TypedExtensionConfig, TypeUrl.TypedExtensionConfig]);
      assert.deepEqual(nacked, []);
    } finally {
      sotw.close();
      delta.close();
      await server.close();
    }
  });
});
