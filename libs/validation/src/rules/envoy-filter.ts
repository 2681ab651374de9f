import { messageFromJson } from "@sextant/proto/descriptors";
import {
  EnvoyFilter_ApplyTo as ApplyTo,
  type EnvoyFilter,
  EnvoyFilter_Patch_Operation as Operation,
  EnvoyFilter_PatchContext as PatchContext,
} from "@sextant/proto/gen/istio/networking/v1alpha3/envoy_filter";
import { at } from "../issues.js";
import { checkLabels, regexProblem } from "./common.js";
import type { RuleContext } from "./context.js";

/** The Envoy message a patch's value is, by applyTo (Istio's xds.BuildXDSObjectFromStruct). */
export const ENVOY_FILTER_VALUE_TYPES: Readonly<Record<number, string>> = {
  [ApplyTo.LISTENER]: "envoy.config.listener.v3.Listener",
  [ApplyTo.FILTER_CHAIN]: "envoy.config.listener.v3.FilterChain",
  [ApplyTo.NETWORK_FILTER]: "envoy.config.listener.v3.Filter",
  [ApplyTo.HTTP_FILTER]: "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter",
  [ApplyTo.ROUTE_CONFIGURATION]: "envoy.config.route.v3.RouteConfiguration",
  [ApplyTo.VIRTUAL_HOST]: "envoy.config.route.v3.VirtualHost",
  [ApplyTo.HTTP_ROUTE]: "envoy.config.route.v3.Route",
  [ApplyTo.CLUSTER]: "envoy.config.cluster.v3.Cluster",
  [ApplyTo.EXTENSION_CONFIG]: "envoy.config.core.v3.TypedExtensionConfig",
  [ApplyTo.BOOTSTRAP]: "envoy.config.bootstrap.v3.Bootstrap",
  [ApplyTo.LISTENER_FILTER]: "envoy.config.listener.v3.ListenerFilter",
};

const HCM_NAMES = new Set(["envoy.filters.network.http_connection_manager", "envoy.http_connection_manager"]);

/**
 * Why a patch value does not decode as its applyTo's Envoy type, or
 * undefined. Unknown fields are ignored here, as Istio builds values
 * non-strictly (they are warned about separately).
 */
export function envoyPatchValueProblem(applyTo: ApplyTo, value: unknown): string | undefined {
  const typeName = ENVOY_FILTER_VALUE_TYPES[applyTo];
  if (!typeName || value === undefined) return undefined;
  try {
    messageFromJson(typeName, value, { ignoreUnknownFields: true });
    return undefined;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return message.includes("not in the type registry") ? `referenced type unknown: ${message}` : message;
  }
}

/** Istio's EnvoyFilter rules (pkg/config/validation/envoyfilter, 1.30.3). */
export function validateEnvoyFilter(ef: EnvoyFilter, ctx: RuleContext): void {
  const { issues, path } = ctx;
  issues.warn(
    path,
    "EnvoyFilter exposes internal implementation details that may change at any time. " +
      "Prefer other APIs if possible, and exercise extreme caution, especially around upgrades.",
  );
  if (ef.workloadSelector) {
    const labels = ef.workloadSelector.labels;
    if (Object.keys(labels).length === 0)
      issues.warn(
        `${path}.workloadSelector`,
        "workloadSelector has no labels: the filter applies to every workload of the namespace",
      );
    checkLabels(issues, `${path}.workloadSelector.labels`, labels);
    if (ef.targetRefs.length > 0)
      issues.error(`${path}.targetRefs`, "only one of targetRefs or workloadSelector can be set");
  }
  ef.targetRefs.forEach((ref, i) => {
    const p = at(`${path}.targetRefs`, i);
    if (!ref.kind) issues.error(`${p}.kind`, "kind is required");
    if (!ref.name) issues.error(`${p}.name`, "name is required");
  });
  ef.configPatches.forEach((cp, i) => {
    checkPatch(cp, at(`${path}.configPatches`, i), ctx);
  });
}

type ConfigPatch = EnvoyFilter["configPatches"][number];
type Match = ConfigPatch["match"];

/** One config patch; the first problem that makes the rest meaningless ends its checks, as in Istio. */
function checkPatch(cp: ConfigPatch, p: string, ctx: RuleContext): void {
  const problem = patchProblem(cp, p, ctx);
  if (problem) ctx.issues.error(problem.path, problem.message);
}

/** The first problem of a patch that makes the rest meaningless (Istio stops there too). */
function patchProblem(
  cp: ConfigPatch,
  p: string,
  ctx: RuleContext,
): { path: string; message: string } | undefined {
  const match = cp.match;
  if (match?.context === PatchContext.WAYPOINT) return undefined; // Istio does not check waypoint patches either
  if (match?.waypoint)
    return { path: `${p}.match.waypoint`, message: "waypoint match is only allowed with context WAYPOINT" };
  if (cp.applyTo === ApplyTo.INVALID) return { path: `${p}.applyTo`, message: "missing applyTo" };
  const patch = cp.patch;
  if (!patch) return { path: `${p}.patch`, message: "missing patch" };
  if (patch.operation === Operation.INVALID)
    return { path: `${p}.patch.operation`, message: "missing patch operation" };
  if (patch.operation !== Operation.REMOVE && patch.value === undefined)
    return { path: `${p}.patch.value`, message: "missing patch value for non-remove operation" };
  const version = match?.proxy?.proxyVersion;
  const regex = version ? regexProblem(version) : undefined;
  if (regex)
    return { path: `${p}.match.proxy.proxyVersion`, message: `invalid regex for proxy version: ${regex}` };
  if (!checkMatchFitsApplyTo(cp.applyTo, match, p, ctx)) return undefined;
  const valueProblem = envoyPatchValueProblem(cp.applyTo, patch.value);
  if (valueProblem) return { path: `${p}.patch.value`, message: valueProblem };
  const typeName = ENVOY_FILTER_VALUE_TYPES[cp.applyTo];
  if (typeName && patch.value !== undefined) {
    // Istio's strict second pass: unknown fields are a warning, not an error.
    try {
      messageFromJson(typeName, patch.value);
    } catch (error) {
      ctx.issues.warn(`${p}.patch.value`, error instanceof Error ? error.message : String(error));
    }
  }
  return undefined;
}

/** Istio's applyTo/match compatibility; false when the patch is not checked further. */
function checkMatchFitsApplyTo(applyTo: ApplyTo, match: Match, p: string, ctx: RuleContext): boolean {
  const { issues } = ctx;
  const hasObjectMatch = !!(
    match?.listener ||
    match?.routeConfiguration ||
    match?.cluster ||
    match?.waypoint
  );
  switch (applyTo) {
    case ApplyTo.LISTENER:
    case ApplyTo.FILTER_CHAIN:
    case ApplyTo.NETWORK_FILTER:
    case ApplyTo.HTTP_FILTER: {
      if (!hasObjectMatch) return true;
      const listener = match?.listener;
      if (!listener) {
        issues.error(`${p}.match`, "applyTo for listener class objects cannot have non listener match");
        return false;
      }
      const filter = listener.filterChain?.filter;
      if (!filter) return true;
      const fp = `${p}.match.listener.filterChain.filter`;
      if (applyTo === ApplyTo.LISTENER || applyTo === ApplyTo.FILTER_CHAIN)
        issues.warn(fp, `filter match has no effect when used with ${ApplyTo[applyTo]}`);
      if (!filter.name) {
        issues.error(`${fp}.name`, "filter match has no name to match on");
        return false;
      }
      if (filter.subFilter) {
        if (applyTo !== ApplyTo.HTTP_FILTER) {
          issues.error(`${fp}.subFilter`, "subfilter match can be used with applyTo HTTP_FILTER only");
          return false;
        }
        if (!HCM_NAMES.has(filter.name)) {
          issues.error(
            `${fp}.subFilter`,
            "subfilter match requires filter match with envoy.filters.network.http_connection_manager",
          );
          return false;
        }
        if (!filter.subFilter.name) {
          issues.error(`${fp}.subFilter.name`, "subfilter match has no name to match on");
          return false;
        }
      }
      return true;
    }
    case ApplyTo.ROUTE_CONFIGURATION:
    case ApplyTo.VIRTUAL_HOST:
    case ApplyTo.HTTP_ROUTE:
      if (hasObjectMatch && !match?.routeConfiguration)
        issues.error(
          `${p}.match`,
          "applyTo for http route class objects cannot have non route configuration match",
        );
      return true;
    case ApplyTo.CLUSTER:
      if (hasObjectMatch && !match?.cluster)
        issues.error(`${p}.match`, "applyTo for cluster class objects cannot have non cluster match");
      return true;
    default:
      return true;
  }
}
