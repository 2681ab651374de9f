import type { ConfigRef } from "@sextant/proto";
import { messageFromJson, messageToJson } from "@sextant/proto/descriptors";
import {
  EnvoyFilter_ApplyTo as ApplyTo,
  type EnvoyFilter,
  type EnvoyFilter_EnvoyConfigObjectMatch,
  EnvoyFilter_Patch_Operation as Operation,
  EnvoyFilter_PatchContext as PatchContext,
} from "@sextant/proto/gen/istio/networking/v1alpha3/envoy_filter";
import { ENVOY_FILTER_VALUE_TYPES } from "@sextant/validation";
import type { MeshProxy } from "./proxy.js";
import { selectorMatches } from "./security.js";
import type { TypedConfig } from "./types.js";

export { ApplyTo, Operation, PatchContext };

/** A JSON object: an Envoy message in proto3 JSON (JSON names, Anys with `@type`). */
export type JsonObject = Record<string, unknown>;

/** One config patch of an EnvoyFilter, ready to apply (Istio's EnvoyFilterConfigPatchWrapper). */
export interface ConfigPatch {
  /** The EnvoyFilter it comes from. */
  readonly ref: ConfigRef;
  readonly applyTo: ApplyTo;
  readonly operation: Operation;
  /** The match; a patch without one matches everything in every context. */
  readonly match: EnvoyFilter_EnvoyConfigObjectMatch;
  /** The value in canonical proto3 JSON of its applyTo's Envoy type; undefined for REMOVE. */
  readonly value: JsonObject | undefined;
}

/** The patches that apply to one proxy, by applyTo, in the order they apply. */
export interface ProxyPatches {
  readonly byApplyTo: ReadonlyMap<ApplyTo, readonly ConfigPatch[]>;
  /** Identifies the set (which filters, in which order), for caching patched resources. */
  readonly key: string;
}

/** The patches of one EnvoyFilter and the patches that could not be prepared, with why. */
interface PreparedFilter {
  readonly patches: readonly ConfigPatch[];
  readonly unusable: readonly { ref: ConfigRef; index: number; reason: string }[];
}

// Istio applies INSERT_* as positions only where a list of siblings exists; elsewhere it is an ADD.
const POSITIONAL = new Set([
  ApplyTo.HTTP_FILTER,
  ApplyTo.NETWORK_FILTER,
  ApplyTo.HTTP_ROUTE,
  ApplyTo.LISTENER_FILTER,
]);
const INSERTS = new Set([Operation.INSERT_BEFORE, Operation.INSERT_AFTER, Operation.INSERT_FIRST]);

const prepared = new WeakMap<TypedConfig<EnvoyFilter>, PreparedFilter>();

/**
 * An EnvoyFilter's patches with their values decoded once (non-strictly, as
 * Istio builds them: unknown fields are dropped) and put in canonical JSON,
 * so that every later comparison and merge sees one spelling of each field.
 */
export function preparedPatches(config: TypedConfig<EnvoyFilter>): PreparedFilter {
  const cached = prepared.get(config);
  if (cached) return cached;
  const patches: ConfigPatch[] = [];
  const unusable: { ref: ConfigRef; index: number; reason: string }[] = [];
  config.spec.configPatches.forEach((cp, index) => {
    if (!cp.patch || cp.applyTo === ApplyTo.INVALID) return;
    let value: JsonObject | undefined;
    const typeName = ENVOY_FILTER_VALUE_TYPES[cp.applyTo];
    if (cp.patch.value !== undefined && typeName) {
      try {
        value = messageToJson(
          typeName,
          messageFromJson(typeName, cp.patch.value, { ignoreUnknownFields: true }),
        );
      } catch (error) {
        unusable.push({
          ref: config.ref,
          index,
          reason: error instanceof Error ? error.message : String(error),
        });
        return;
      }
    }
    const operation =
      INSERTS.has(cp.patch.operation) && !POSITIONAL.has(cp.applyTo) ? Operation.ADD : cp.patch.operation;
    patches.push({
      ref: config.ref,
      applyTo: cp.applyTo,
      operation,
      match: cp.match ?? { context: PatchContext.ANY, proxy: undefined },
      value,
    });
  });
  const result = { patches, unusable };
  prepared.set(config, result);
  return result;
}

/** The label Kubernetes Gateway API deployments carry: the name of their Gateway. */
const GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name";

/**
 * Istio's policy attachment for EnvoyFilter: a proxy that is not a Gateway
 * API gateway takes filters by workloadSelector (none: the whole namespace)
 * and never one with targetRefs; a Gateway API gateway takes those whose
 * targetRefs name its Gateway in the filter's namespace, or selector-based
 * ones without targetRefs.
 */
function attaches(config: TypedConfig<EnvoyFilter>, proxy: MeshProxy): boolean {
  const { workloadSelector, targetRefs } = config.spec;
  const gatewayName = proxy.labels[GATEWAY_NAME_LABEL];
  const selected = () => selectorMatches(workloadSelector?.labels, proxy.labels);
  if (gatewayName === undefined) return targetRefs.length === 0 && selected();
  if (targetRefs.length === 0) return selected();
  return (
    proxy.namespace === config.ref.namespace &&
    targetRefs.some(
      (ref) =>
        ref.kind === "Gateway" &&
        ref.group === "gateway.networking.k8s.io" &&
        ref.name === gatewayName &&
        (ref.namespace === "" || ref.namespace === proxy.namespace),
    )
  );
}

/** Istio's proxyMatch: ISTIO_VERSION against the regex, and every metadata entry named. */
function proxyMatches(patch: ConfigPatch, proxy: MeshProxy): boolean {
  const match = patch.match.proxy;
  if (!match) return true;
  if (match.proxyVersion) {
    const version = typeof proxy.metadata.ISTIO_VERSION === "string" ? proxy.metadata.ISTIO_VERSION : "";
    if (!version) return false;
    let regex: RegExp;
    try {
      regex = new RegExp(match.proxyVersion);
    } catch {
      return false;
    }
    if (!regex.test(version)) return false;
  }
  return Object.entries(match.metadata).every(([key, value]) => proxy.metadata[key] === value);
}

/**
 * The EnvoyFilters of a proxy in Istio's order (PushContext.EnvoyFilters):
 * those of the root namespace and of the proxy's namespace that attach to
 * it, by priority, then root namespace first, then name.namespace (Istio
 * breaks ties by creation time before the name, which ingest does not keep).
 */
export function envoyFiltersOf(
  filters: readonly TypedConfig<EnvoyFilter>[],
  rootNamespace: string,
  proxy: MeshProxy,
): TypedConfig<EnvoyFilter>[] {
  const matched = filters.filter(
    (config) =>
      (config.ref.namespace === rootNamespace || config.ref.namespace === proxy.namespace) &&
      attaches(config, proxy),
  );
  const nameKey = (config: TypedConfig<EnvoyFilter>) => `${config.ref.name}.${config.ref.namespace}`;
  return matched.sort((a, b) => {
    if (a.spec.priority !== b.spec.priority) return a.spec.priority - b.spec.priority;
    const aRoot = a.ref.namespace === rootNamespace;
    const bRoot = b.ref.namespace === rootNamespace;
    if (aRoot !== bRoot) return aRoot ? -1 : 1;
    return nameKey(a) < nameKey(b) ? -1 : nameKey(a) > nameKey(b) ? 1 : 0;
  });
}

/**
 * The patches that apply to a proxy, merged over its EnvoyFilters in order;
 * undefined when none does. Proxyless gRPC clients take none: Istio's gRPC
 * generators never apply EnvoyFilters.
 */
export function proxyPatches(
  filters: readonly TypedConfig<EnvoyFilter>[],
  rootNamespace: string,
  proxy: MeshProxy,
): ProxyPatches | undefined {
  if (proxy.kind === "grpc" || filters.length === 0) return undefined;
  const byApplyTo = new Map<ApplyTo, ConfigPatch[]>();
  const keys: string[] = [];
  for (const config of envoyFiltersOf(filters, rootNamespace, proxy)) {
    keys.push(`${config.ref.namespace}/${config.ref.name}@${config.generation}`);
    preparedPatches(config).patches.forEach((patch, index) => {
      if (!proxyMatches(patch, proxy)) return;
      keys.push(String(index));
      const list = byApplyTo.get(patch.applyTo);
      if (list) list.push(patch);
      else byApplyTo.set(patch.applyTo, [patch]);
    });
  }
  if (byApplyTo.size === 0) return undefined;
  return { byApplyTo, key: keys.join(",") };
}
