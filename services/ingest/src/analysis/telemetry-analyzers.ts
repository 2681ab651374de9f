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
 * formatter tags, targetRefs to anything but a Gateway API Gateway, and
 * access logs and tracing where they reach proxyless gRPC workloads (gRPC
 * has neither in xDS; push applies no Telemetry to them).
 */
export function analyzeTelemetries(
  telemetries: readonly { resource: ConfigResource; spec: Telemetry }[],
  workloads: readonly AnalysisWorkload[],
  rootNamespace = DEFAULT_ROOT_NAMESPACE,
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
      const labels = labelText(workload.labels);
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
    if (spec.accessLogging.length > 0 || spec.tracing.length > 0) {
      const reached = workloads.filter((w) => w.proxyless && applies(resource, spec, w, rootNamespace));
      if (reached.length > 0) {
        const shown = reached
          .slice(0, 3)
          .map((w) => `${w.namespace}/${labelText(w.labels)}`)
          .join("; ");
        ignored(
          "spec",
          `access logging and tracing are accepted but ignored for proxyless gRPC workloads: ${reached.length} ` +
            `selected (${shown}${reached.length > 3 ? "; …" : ""})`,
        );
      }
    }
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

/** Istio's default root namespace: its namespace-wide Telemetry is the mesh default (ingest has no setting for it). */
const DEFAULT_ROOT_NAMESPACE = "istio-system";

// Which workloads a Telemetry reaches (as push picks them; a targetRef only reaches gateways).
function applies(
  resource: ConfigResource,
  spec: Telemetry,
  workload: AnalysisWorkload,
  rootNamespace: string,
): boolean {
  if (isNamespaceWide(spec))
    return resource.namespace === rootNamespace || resource.namespace === workload.namespace;
  if (resource.namespace !== workload.namespace || spec.targetRef || spec.targetRefs.length > 0) return false;
  return Object.entries(spec.selector?.matchLabels ?? {}).every(
    ([key, value]) => workload.labels[key] === value,
  );
}

const labelText = (labels: Readonly<Record<string, string>>) =>
  Object.entries(labels)
    .map(([key, value]) => `${key}=${value}`)
    .sort()
    .join(",");

function isNamespaceWide(spec: Telemetry): boolean {
  return (
    Object.keys(spec.selector?.matchLabels ?? {}).length === 0 &&
    !spec.targetRef &&
    spec.targetRefs.length === 0
  );
}
