import type { ConfigResource } from "@sextant/proto";
import type { Telemetry } from "@sextant/proto/gen/istio/telemetry/v1alpha1/telemetry";
import type { AnalysisWorkload } from "./gateway-analyzers.js";

/** What a Telemetry analysis reports: where, and what it says. */
export interface TelemetryFinding {
  readonly resource: ConfigResource;
  readonly kind: "multipleNamespaceWide" | "conflictingSelectors" | "ignored";
  readonly field: string;
  readonly message: string;
}

/** Why metrics settings do nothing in Sextant. */
const METRICS_IGNORED =
  "metrics are accepted but ignored: Sextant does not generate Istio's stats filter, so there are no " +
  "Istio standard metrics to select, override or report";

/**
 * Istio's Telemetry analyzers (pkg/config/analysis/analyzers/telemetry):
 * several namespace-wide Telemetries in one namespace, or several selecting
 * one workload, make which applies undefined. And what Sextant accepts but
 * does not build: metrics, tracing's disableContextPropagation and
 * formatter tags, targetRefs to anything but a Gateway API Gateway.
 */
export function analyzeTelemetries(
  telemetries: readonly { resource: ConfigResource; spec: Telemetry }[],
  workloads: readonly AnalysisWorkload[],
): TelemetryFinding[] {
  const findings: TelemetryFinding[] = [];
  const byNamespace = new Map<string, { resource: ConfigResource; spec: Telemetry }[]>();
  for (const telemetry of telemetries)
    byNamespace.set(telemetry.resource.namespace, [
      ...(byNamespace.get(telemetry.resource.namespace) ?? []),
      telemetry,
    ]);

  for (const [namespace, list] of byNamespace) {
    const wide = list.filter(({ spec }) => isNamespaceWide(spec));
    if (wide.length > 1) {
      const names = wide.map(({ resource }) => resource.name).sort();
      for (const { resource } of wide)
        findings.push({
          resource,
          kind: "multipleNamespaceWide",
          field: "spec",
          message: `The Telemetries ${names.join(", ")} in namespace "${namespace}" have no workload selector; which one applies is undefined`,
        });
    }
    const selecting = list.filter(({ spec }) => Object.keys(spec.selector?.matchLabels ?? {}).length > 0);
    for (const workload of workloads) {
      if (workload.namespace !== namespace) continue;
      const matching = selecting.filter(({ spec }) =>
        Object.entries(spec.selector?.matchLabels ?? {}).every(
          ([key, value]) => workload.labels[key] === value,
        ),
      );
      if (matching.length < 2) continue;
      const names = matching.map(({ resource }) => resource.name).sort();
      const labels = Object.entries(workload.labels)
        .map(([key, value]) => `${key}=${value}`)
        .sort()
        .join(",");
      for (const { resource } of matching)
        findings.push({
          resource,
          kind: "conflictingSelectors",
          field: "spec.selector",
          message: `The Telemetries ${names.join(", ")} in namespace "${namespace}" select the same workload (${labels}), which can lead to undefined behavior`,
        });
    }
  }

  for (const { resource, spec } of telemetries) {
    const ignored = (field: string, message: string) =>
      findings.push({ resource, kind: "ignored", field, message });
    spec.metrics.forEach((_, i) => {
      ignored(`spec.metrics[${i}]`, METRICS_IGNORED);
    });
    spec.tracing.forEach((tracing, i) => {
      if (tracing.disableContextPropagation !== undefined)
        ignored(
          `spec.tracing[${i}].disableContextPropagation`,
          "disableContextPropagation is accepted but ignored: the Envoy API Sextant builds has no no_context_propagation",
        );
      for (const [tag, value] of Object.entries(tracing.customTags))
        if (value.formatter)
          ignored(
            `spec.tracing[${i}].customTags[${tag}].formatter`,
            "formatter custom tags are accepted but ignored (as Istio does for proxies before 1.29)",
          );
    });
    const refs = spec.targetRef ? [spec.targetRef] : spec.targetRefs;
    refs.forEach((ref, i) => {
      if (ref.kind === "Gateway" && ref.group === "gateway.networking.k8s.io") return;
      ignored(
        spec.targetRef ? "spec.targetRef" : `spec.targetRefs[${i}]`,
        `a targetRef to ${ref.kind} "${ref.name}" is accepted but ignored: Sextant has no waypoints; only Gateway API Gateways are targeted`,
      );
    });
  }
  return findings;
}

function isNamespaceWide(spec: Telemetry): boolean {
  return (
    Object.keys(spec.selector?.matchLabels ?? {}).length === 0 &&
    !spec.targetRef &&
    spec.targetRefs.length === 0
  );
}
