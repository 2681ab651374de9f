// Which Telemetry applies to a proxy and how levels merge (Istio's
// pilot/pkg/model/telemetry.go), and the MeshConfig telemetry settings.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseMeshConfig } from "../src/model/mesh-config.js";
import { parseProxy } from "../src/model/proxy.js";
import { applicableTelemetries, effectiveTelemetry } from "../src/model/telemetry.js";
import { findTelemetryProvider } from "../src/model/telemetry-providers.js";
import { configDumpDecoder } from "../src/server/debug.js";
import { listenerTelemetry } from "../src/translate/common/telemetry.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { contextOf } from "./golden-inputs.js";

const sidecar = (labels: Record<string, string>, namespace = "default") =>
  parseProxy({
    id: `sidecar~10.244.1.10~pod-abc.${namespace}~${namespace}.svc.cluster.local`,
    metadata: { NAMESPACE: namespace, LABELS: labels },
  } as never);

const telemetry = (name: string, namespace: string, spec: string) => `
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: ${name}, namespace: ${namespace}}
spec: ${spec}
---`;

const ZIPKIN_SERVICE = {
  hostname: "zipkin.istio-system.svc.cluster.local",
  namespace: "istio-system",
  name: "zipkin",
  addresses: ["10.96.0.30"],
  ports: [{ name: "http", number: 9411, targetPort: 9411, protocol: "PROTOCOL_HTTP" }],
  resolution: "RESOLUTION_STATIC",
  registry: "kubernetes",
};

const MESH = `
extensionProviders:
- name: zipkin
  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}
- name: other-zipkin
  zipkin: {service: istio-system/zipkin.istio-system.svc.cluster.local, port: 9411}
- name: datadog
  datadog: {service: datadog-agent.datadog.svc.cluster.local, port: 8126}
- name: json
  envoyFileAccessLog: {path: /var/log/access.json, logFormat: {labels: {code: "%RESPONSE_CODE%"}}}
`;

const context = (config: string, meshConfig = MESH) =>
  contextOf({ services: [ZIPKIN_SERVICE], config, meshConfig });

const names = (config: string, proxy = sidecar({ app: "reviews" })) =>
  applicableTelemetries(context(config), proxy).map((t) => `${t.ref.namespace}/${t.ref.name}`);

describe("Telemetry precedence (Istio's applicableTelemetries)", () => {
  const config = [
    telemetry("mesh", "istio-system", "{tracing: [{randomSamplingPercentage: 1}]}"),
    telemetry("mesh-selected", "istio-system", "{selector: {matchLabels: {app: reviews}}}"),
    telemetry("ns", "default", "{tracing: [{randomSamplingPercentage: 2}]}"),
    telemetry("reviews", "default", "{selector: {matchLabels: {app: reviews}}}"),
    telemetry("ratings", "default", "{selector: {matchLabels: {app: ratings}}}"),
    telemetry("other-ns", "prod", "{}"),
  ].join("\n");

  it("takes the root namespace's namespace-wide one, then the proxy namespace's, then the workload's that select it", () => {
    assert.deepEqual(names(config), ["istio-system/mesh", "default/ns", "default/reviews"]);
  });

  it("never applies a root-namespace Telemetry with a selector to another namespace's workloads", () => {
    assert.ok(!names(config).includes("istio-system/mesh-selected"));
  });

  it("gives a proxy of the root namespace its namespace-wide Telemetry once, and the selected ones there", () => {
    assert.deepEqual(names(config, sidecar({ app: "reviews" }, "istio-system")), [
      "istio-system/mesh",
      "istio-system/mesh-selected",
    ]);
  });

  it("matches a Gateway API targetRef to the routers deployed for that Gateway", () => {
    const router = parseProxy({
      id: "router~10.244.3.20~gw-abc.default~default.svc.cluster.local",
      metadata: { NAMESPACE: "default", LABELS: { "gateway.networking.k8s.io/gateway-name": "web" } },
    } as never);
    const refs = [
      telemetry(
        "web",
        "default",
        "{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: web}]}",
      ),
      telemetry(
        "api",
        "default",
        "{targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: api}}",
      ),
    ].join("\n");
    assert.deepEqual(names(refs, router), ["default/web"]);
    assert.deepEqual(names(refs), [], "a targetRef selects no sidecar");
  });

  it("lets the most specific tracing setting win, field by field", () => {
    const push = context(
      [
        telemetry(
          "mesh",
          "istio-system",
          "{tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 5}]}",
        ),
        telemetry(
          "reviews",
          "default",
          "{selector: {matchLabels: {app: reviews}}, tracing: [{match: {mode: SERVER}, randomSamplingPercentage: 50, customTags: {a: {literal: {value: b}}}}]}",
        ),
      ].join("\n"),
    );
    const tracing = effectiveTelemetry(push, sidecar({ app: "reviews" })).tracing;
    assert.ok(tracing);
    assert.equal(tracing.client.randomSamplingPercentage, 5);
    assert.equal(tracing.server.randomSamplingPercentage, 50);
    assert.equal(tracing.client.provider?.name, "zipkin");
    assert.equal(tracing.server.provider?.name, "zipkin", "the provider is inherited");
    assert.deepEqual(Object.keys(tracing.server.customTags), ["a"]);
    assert.deepEqual(Object.keys(tracing.client.customTags), []);
  });

  it("disables tracing of a direction without a provider, and configures none without Telemetry or default provider", () => {
    const push = context(telemetry("mesh", "istio-system", "{tracing: [{randomSamplingPercentage: 5}]}"));
    const tracing = effectiveTelemetry(push, sidecar({ app: "reviews" })).tracing;
    assert.equal(tracing?.client.disabled, true);
    assert.equal(effectiveTelemetry(context(""), sidecar({})).tracing, undefined);
  });

  it("uses defaultProviders.tracing where no Telemetry names a provider", () => {
    const push = context("", `${MESH}\ndefaultProviders: {tracing: [other-zipkin]}`);
    const tracing = effectiveTelemetry(push, sidecar({})).tracing;
    assert.equal(tracing?.client.provider?.name, "other-zipkin");
    assert.equal(tracing?.client.disabled, false);
  });
});

describe("access logging merge (Istio's mergeLogs)", () => {
  const logs = (config: string, meshConfig = MESH, proxy = sidecar({ app: "reviews" })) => {
    const access = effectiveTelemetry(context(config, meshConfig), proxy).accessLogs;
    const show = (list: readonly { provider: { name: string }; disabled: boolean; filter?: string }[]) =>
      list.map((c) => `${c.provider.name}${c.disabled ? " off" : ""}${c.filter ? ` [${c.filter}]` : ""}`);
    return access && { client: show(access.client), server: show(access.server) };
  };

  it("falls back to MeshConfig (undefined) when neither Telemetry nor defaultProviders configure access logs", () => {
    assert.equal(logs(""), undefined);
  });

  it("enables the default providers with an empty Telemetry access log entry", () => {
    assert.deepEqual(
      logs(
        telemetry("mesh", "istio-system", "{accessLogging: [{}]}"),
        `${MESH}\ndefaultProviders: {accessLogging: [envoy]}`,
      ),
      {
        client: ["envoy"],
        server: ["envoy"],
      },
    );
  });

  it("lets a workload Telemetry disable server logs of the provider a namespace Telemetry enabled, keeping the filter for clients", () => {
    const config = [
      telemetry(
        "ns",
        "default",
        '{accessLogging: [{providers: [{name: envoy}], filter: {expression: "response.code >= 400"}}]}',
      ),
      telemetry(
        "reviews",
        "default",
        "{selector: {matchLabels: {app: reviews}}, accessLogging: [{match: {mode: SERVER}, disabled: true}]}",
      ),
    ].join("\n");
    assert.deepEqual(logs(config), { client: ["envoy [response.code >= 400]"], server: ["envoy off"] });
  });

  it("replaces the mesh's providers with those a more specific level names", () => {
    const config = [
      telemetry("mesh", "istio-system", "{accessLogging: [{providers: [{name: envoy}]}]}"),
      telemetry("ns", "default", "{accessLogging: [{providers: [{name: json}]}]}"),
    ].join("\n");
    assert.deepEqual(logs(config), { client: ["json"], server: ["json"] });
  });

  it("drops a provider that makes no access log, such as prometheus (Istio then falls back to accessLogFile)", () => {
    const config = telemetry("mesh", "istio-system", "{accessLogging: [{providers: [{name: prometheus}]}]}");
    assert.deepEqual(logs(config), { client: [], server: [] });
    const push = context(config, `${MESH}\naccessLogFile: /dev/stdout`);
    assert.equal(listenerTelemetry(push, sidecar({})).byClass["sidecar-outbound"].accessLogs.length, 1);
  });

  it("drops a provider MeshConfig does not define (Istio then falls back to accessLogFile)", () => {
    const config = telemetry("mesh", "istio-system", "{accessLogging: [{providers: [{name: nowhere}]}]}");
    assert.deepEqual(logs(config), { client: [], server: [] });
  });
});

describe("listener telemetry", () => {
  it("builds nothing (an empty key, so listeners stay as they were) without Telemetry or MeshConfig logging", () => {
    const built = listenerTelemetry(context(""), sidecar({}));
    assert.equal(built.key, "");
  });

  it("leaves tracing out for a provider it cannot build, and for a service the registry lacks", () => {
    for (const provider of ["datadog", "json"]) {
      const push = context(
        telemetry("mesh", "istio-system", `{tracing: [{providers: [{name: ${provider}}]}]}`),
      );
      assert.equal(
        listenerTelemetry(push, sidecar({})).byClass["sidecar-outbound"].tracing,
        undefined,
        provider,
      );
    }
    const missing = contextOf({
      services: [],
      config: telemetry("mesh", "istio-system", "{tracing: [{providers: [{name: zipkin}]}]}"),
      meshConfig: MESH,
    });
    assert.equal(listenerTelemetry(missing, sidecar({})).byClass["sidecar-outbound"].tracing, undefined);
  });

  it("samples at PILOT_TRACE_SAMPLING's 1 % unless Telemetry or defaultConfig.tracing.sampling says otherwise", () => {
    const config = telemetry("mesh", "istio-system", "{tracing: [{providers: [{name: zipkin}]}]}");
    const sampling = (mesh: string) =>
      listenerTelemetry(context(config, mesh), sidecar({})).byClass["sidecar-inbound"].tracing?.randomSampling
        ?.value;
    assert.equal(sampling(MESH), 1);
    assert.equal(sampling(`${MESH}\ndefaultConfig: {tracing: {sampling: 25}}`), 25);
  });
});

describe("MeshConfig telemetry settings", () => {
  it("keeps Istio's built-in providers unless redefined, and finds providers case-insensitively", () => {
    const mesh = parseMeshConfig(`
accessLogFile: /dev/stdout
extensionProviders:
- name: envoy
  envoyFileAccessLog: {path: /tmp/log}
`).telemetry;
    assert.ok(mesh);
    assert.deepEqual(
      mesh.providers.map((p) => `${p.name}:${p.type}`),
      ["prometheus:prometheus", "stackdriver:stackdriver", "envoy:envoyFileAccessLog"],
    );
    assert.equal((findTelemetryProvider(mesh, "ENVOY") as { path: string }).path, "/tmp/log");
    assert.equal(mesh.accessLogFile, "/dev/stdout");
  });

  it("leaves a MeshConfig with only ext_authz providers without telemetry settings (Istio's defaults)", () => {
    assert.equal(
      parseMeshConfig("extensionProviders: [{name: a, envoyExtAuthzGrpc: {service: a, port: 1}}]").telemetry,
      undefined,
    );
  });
});

describe("/debug/config_dump of a listener with telemetry", () => {
  it("shows the access log, its CEL filter and the tracer decoded, not as base64", () => {
    const push = context(
      telemetry(
        "mesh",
        "istio-system",
        '{accessLogging: [{providers: [{name: envoy}], filter: {expression: "response.code >= 500"}}], tracing: [{providers: [{name: zipkin}]}]}',
      ),
    );
    const [listener] = generateSidecarListeners(
      { push, proxy: sidecar({ app: "reviews" }), cache: new XdsCache() },
      new Set(["0.0.0.0_9411"]),
    );
    assert.ok(listener);
    const dump = JSON.stringify(configDumpDecoder(XDS_TYPES)(listener.resource));
    assert.match(
      dump,
      /"@type":"type.googleapis.com\/envoy.extensions.access_loggers.file.v3.FileAccessLog","path":"\/dev\/stdout"/,
    );
    assert.match(dump, /"expression":"response.code >= 500"/);
    assert.match(dump, /"collectorCluster":"outbound\|9411\|\|zipkin.istio-system.svc.cluster.local"/);
    assert.doesNotMatch(dump, /"value":"[A-Za-z0-9+/=]{8,}"/);
  });

  it("logs on virtualOutbound itself only connections no chain matched (NR), unless disableEnvoyListenerLog", () => {
    const listenerLogs = (mesh: string) => {
      const [listener] = generateSidecarListeners(
        { push: context("", mesh), proxy: sidecar({}), cache: new XdsCache() },
        new Set(["virtualOutbound"]),
      );
      assert.ok(listener);
      return (configDumpDecoder(XDS_TYPES)(listener.resource) as { accessLog?: { filter: unknown }[] })
        .accessLog;
    };
    assert.deepEqual(
      listenerLogs("accessLogFile: /dev/stdout")?.map((log) => log.filter),
      [{ responseFlagFilter: { flags: ["NR"] } }],
    );
    assert.equal(listenerLogs("accessLogFile: /dev/stdout\ndisableEnvoyListenerLog: true"), undefined);
  });
});
