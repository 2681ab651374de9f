import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type ConfigResource, Severity } from "@sextant/proto";
import { AnalysisCodes } from "../src/analysis/analyzers.js";
import { analyzeResources, messagesOf, storedResource } from "./harness.js";

const telemetry = (name: string, spec: Record<string, unknown>, namespace = "default") =>
  storedResource({ kind: "Telemetry", apiVersion: "telemetry.istio.io/v1", namespace, name }, spec);
const workloads = [
  { namespace: "default", labels: { app: "reviews", version: "v1" } },
  { namespace: "default", labels: { app: "ratings", version: "v1" } },
];
const run = (resources: ConfigResource[]) => analyzeResources(resources, { workloads });
const messages = (result: ReturnType<typeof run>, r: ConfigResource) =>
  messagesOf(result, r).map((m) => ({ code: m.code, field: m.field, severity: m.severity }));

describe("Telemetry analyzers", () => {
  it("says nothing of one mesh-wide, one namespace-wide and one workload Telemetry with access logs and tracing", () => {
    const resources = [
      telemetry("mesh", { accessLogging: [{ providers: [{ name: "envoy" }] }] }, "istio-system"),
      telemetry("ns", { tracing: [{ randomSamplingPercentage: 10 }] }),
      telemetry("reviews", {
        selector: { matchLabels: { app: "reviews" } },
        accessLogging: [{ disabled: true }],
      }),
    ];
    const result = run(resources);
    for (const r of resources) assert.deepEqual(messages(result, r), [], r.name);
  });

  it("reports two namespace-wide Telemetries of one namespace (IST0160), each", () => {
    const a = telemetry("a", {});
    const b = telemetry("b", { accessLogging: [{}] });
    const result = run([a, b, telemetry("c", {}, "prod")]);
    for (const r of [a, b])
      assert.deepEqual(messages(result, r), [
        {
          code: AnalysisCodes.MultipleTelemetriesWithoutWorkloadSelectors,
          field: "spec",
          severity: Severity.SEVERITY_ERROR,
        },
      ]);
  });

  it("reports Telemetries whose selectors pick one workload (IST0159), not those picking different ones", () => {
    const byApp = telemetry("by-app", { selector: { matchLabels: { app: "reviews" } } });
    const byVersion = telemetry("by-version", {
      selector: { matchLabels: { version: "v1", app: "reviews" } },
    });
    const ratings = telemetry("ratings", { selector: { matchLabels: { app: "ratings" } } });
    const result = run([byApp, byVersion, ratings]);
    assert.deepEqual(
      messages(result, byApp).map((m) => m.code),
      [AnalysisCodes.ConflictingTelemetryWorkloadSelectors],
    );
    assert.match(
      messagesOf(result, byApp)[0]?.message ?? "",
      /by-app, by-version .*\(app=reviews,version=v1\)/,
    );
    assert.deepEqual(messages(result, ratings), []);
  });

  it("says metrics, context propagation, formatter tags and non-Gateway targets are accepted but ignored", () => {
    const t = telemetry("t", {
      targetRefs: [
        { group: "gateway.networking.k8s.io", kind: "Gateway", name: "web" },
        { group: "", kind: "Service", name: "reviews" },
      ],
      metrics: [{ providers: [{ name: "prometheus" }] }],
      tracing: [
        { disableContextPropagation: true, customTags: { route: { formatter: { value: "%ROUTE_NAME%" } } } },
      ],
    });
    assert.deepEqual(
      messages(run([t]), t).map((m) => [m.code, m.field, m.severity]),
      [
        [AnalysisCodes.TelemetryIgnored, "spec.metrics[0]", Severity.SEVERITY_INFO],
        [AnalysisCodes.TelemetryIgnored, "spec.tracing[0].disableContextPropagation", Severity.SEVERITY_INFO],
        [
          AnalysisCodes.TelemetryIgnored,
          "spec.tracing[0].customTags[route].formatter",
          Severity.SEVERITY_INFO,
        ],
        [AnalysisCodes.TelemetryIgnored, "spec.targetRefs[1]", Severity.SEVERITY_INFO],
      ],
    );
  });

  it("says Telemetry access logs and tracing are ignored where they reach proxyless gRPC workloads, and only there", () => {
    const proxyless = [
      ...workloads,
      { namespace: "grpc", labels: { app: "echo" }, proxyless: true },
      { namespace: "grpc", labels: { app: "envoy-client" } },
    ];
    const analyse = (resources: ConfigResource[]) => analyzeResources(resources, { workloads: proxyless });
    const mesh = telemetry("mesh", { accessLogging: [{ providers: [{ name: "envoy" }] }] }, "istio-system");
    const echo = telemetry("echo", { selector: { matchLabels: { app: "echo" } }, tracing: [{}] }, "grpc");
    const envoyOnly = telemetry(
      "envoy-only",
      { selector: { matchLabels: { app: "envoy-client" } }, tracing: [{}] },
      "grpc",
    );
    const otherNamespace = telemetry("default-ns", { accessLogging: [{}] });
    const metricsOnly = telemetry("metrics-ns", { metrics: [{}] }, "grpc");
    const result = analyse([mesh, echo, envoyOnly, otherNamespace, metricsOnly]);
    for (const r of [mesh, echo]) {
      const [message] = messagesOf(result, r);
      assert.equal(message?.code, AnalysisCodes.TelemetryIgnored, r.name);
      assert.match(
        message?.message ?? "",
        /ignored for proxyless gRPC workloads: 1 selected \(grpc\/app=echo\)/,
      );
    }
    for (const r of [envoyOnly, otherNamespace]) assert.deepEqual(messages(result, r), [], r.name);
    assert.deepEqual(
      messages(result, metricsOnly).map((m) => m.field),
      ["spec.metrics[0]"],
      "metrics are reported as metrics, not again as proxyless",
    );
  });
});
