// EnvoyFilter patches applied to what the generators built for one proxy
// (istiod applies them while building; here they run after, on the same
// objects). A patched resource that push can tell Envoy would reject is not
// sent: the unpatched one is, and the failure is reported.

import type { ConfigRef } from "@sextant/proto";
import { messageFromJson, messageToJson } from "@sextant/proto/descriptors";
import { TypeUrl } from "@sextant/proto/envoy";
import {
  ApplyTo,
  type ConfigPatch,
  type JsonObject,
  PatchContext,
  type ProxyPatches,
  proxyPatches,
} from "../../model/envoy-filter.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource } from "../../model/types.js";
import { clusterProblems, listenerProblems, routeConfigurationProblems } from "./checks.js";
import { patchCluster } from "./clusters.js";
import { Applied, addsFor } from "./common.js";
import { patchListener } from "./listeners.js";
import { copy } from "./merge.js";
import { patchRouteConfiguration } from "./routes.js";

/** A patched resource that was not sent, and why. */
export interface PatchFailure {
  /** The EnvoyFilters whose patches made it. */
  readonly filters: readonly ConfigRef[];
  readonly proxyId: string;
  readonly typeUrl: string;
  /** The resource's name (for an ADD, the added resource's). */
  readonly resource: string;
  readonly reason: string;
}

/** The resources to send, and the patches that were refused. */
export interface PatchOutcome {
  readonly resources: GeneratedResource[];
  readonly failures: PatchFailure[];
}

/** How one xDS type is patched. */
interface TypePatcher {
  readonly typeName: string;
  readonly applyTo: ApplyTo;
  /** The patch context of one of the proxy's resources. */
  contextOf(proxy: MeshProxy, name: string): PatchContext;
  /** Patches `json` in place (or returns a new one); undefined when a patch removes it. */
  patch(
    json: JsonObject,
    patches: ProxyPatches,
    context: PatchContext,
    applied: Applied,
    inbound: () => string[],
  ): JsonObject | undefined;
  problems(json: JsonObject): string[];
}

const sidecarOr = (proxy: MeshProxy, inbound: boolean) =>
  proxy.kind === "router"
    ? PatchContext.GATEWAY
    : inbound
      ? PatchContext.SIDECAR_INBOUND
      : PatchContext.SIDECAR_OUTBOUND;

const PATCHERS: Readonly<Record<string, TypePatcher>> = {
  [TypeUrl.Listener]: {
    typeName: "envoy.config.listener.v3.Listener",
    applyTo: ApplyTo.LISTENER,
    contextOf: (proxy, name) => sidecarOr(proxy, name === "virtualInbound"),
    patch: (json, patches, context, applied) =>
      patchListener(json, patches, context, applied) ? json : undefined,
    problems: listenerProblems,
  },
  [TypeUrl.RouteConfiguration]: {
    typeName: "envoy.config.route.v3.RouteConfiguration",
    applyTo: ApplyTo.ROUTE_CONFIGURATION,
    contextOf: (proxy, name) => sidecarOr(proxy, name.startsWith("inbound|")),
    patch: (json, patches, context, applied) => {
      patchRouteConfiguration(json, patches, context, applied);
      return json;
    },
    problems: routeConfigurationProblems,
  },
  [TypeUrl.Cluster]: {
    typeName: "envoy.config.cluster.v3.Cluster",
    applyTo: ApplyTo.CLUSTER,
    contextOf: (proxy, name) =>
      sidecarOr(proxy, name.startsWith("inbound|") || name.startsWith("InboundPassthroughCluster")),
    patch: (json, patches, context, applied, inbound) =>
      patchCluster(json, patches, context, inbound(), applied),
    problems: clusterProblems,
  },
};

/** True for the xDS types EnvoyFilters patch (LDS, RDS, CDS). */
export function patchesType(typeUrl: string): boolean {
  return typeUrl in PATCHERS;
}

/**
 * The proxy's resources of one type with its EnvoyFilters applied. `wildcard`
 * says the list is the proxy's whole set of the type, to which whole
 * resources may be ADDed (listeners, clusters).
 */
export function applyEnvoyFilters(
  push: PushContext,
  proxy: MeshProxy,
  typeUrl: string,
  resources: readonly GeneratedResource[],
  wildcard: boolean,
): PatchOutcome {
  const patcher = PATCHERS[typeUrl];
  const patches = patcher && proxyPatches(push.envoyFilters, push.rootNamespace, proxy);
  if (!patcher || !patches) return { resources: [...resources], failures: [] };
  const failures: PatchFailure[] = [];
  let inboundHosts: string[] | undefined;
  const inbound = () => {
    inboundHosts ??= hostsServedBy(push, proxy);
    return inboundHosts;
  };
  const out: GeneratedResource[] = [];
  for (const resource of resources) {
    const context = patcher.contextOf(proxy, resource.name);
    // Inbound clusters match by the services the proxy serves: their result is the proxy's own.
    const memoKey = `${patches.key}|${context}|${context === PatchContext.SIDECAR_INBOUND ? proxy.instanceIps.join(",") : ""}`;
    let memo = patchedByKey.get(resource);
    if (!memo) {
      memo = new Map();
      patchedByKey.set(resource, memo);
    }
    let result = memo.get(memoKey);
    if (!result) {
      result = patchOne(patcher, typeUrl, resource, patches, context, inbound);
      memo.set(memoKey, result);
    }
    if (result.failure) failures.push({ ...result.failure, proxyId: proxy.id, typeUrl });
    if (result.resource) out.push(result.resource);
  }
  if (wildcard) {
    const contexts =
      proxy.kind === "router"
        ? [PatchContext.GATEWAY]
        : [PatchContext.SIDECAR_INBOUND, PatchContext.SIDECAR_OUTBOUND];
    for (const patch of addsFor(patches, patcher.applyTo, contexts)) {
      if (patcher.applyTo === ApplyTo.ROUTE_CONFIGURATION) break;
      const added = addedResource(patcher, typeUrl, patch, out);
      if ("reason" in added)
        failures.push({
          filters: [patch.ref],
          proxyId: proxy.id,
          typeUrl,
          resource: added.name,
          reason: added.reason,
        });
      else out.push(added);
    }
  }
  return { resources: out, failures };
}

/** One resource's patching, shared by the proxies with the same patches (they are the same for each). */
interface Patched {
  /** What to send; undefined if a patch removed the resource. */
  readonly resource: GeneratedResource | undefined;
  readonly failure?: { filters: ConfigRef[]; resource: string; reason: string };
}

const patchedByKey = new WeakMap<GeneratedResource, Map<string, Patched>>();

function patchOne(
  patcher: TypePatcher,
  typeUrl: string,
  resource: GeneratedResource,
  patches: ProxyPatches,
  context: PatchContext,
  inbound: () => string[],
): Patched {
  const json = messageToJson(patcher.typeName, resource.resource.value);
  const applied = new Applied();
  let patched: JsonObject | undefined;
  try {
    patched = patcher.patch(json, patches, context, applied, inbound);
  } catch (error) {
    // As istiod recovers from a patch that panics: the resource goes out unpatched.
    const reason = `patching failed: ${error instanceof Error ? error.message : String(error)}`;
    return { resource, failure: { filters: allRefs(patches), resource: resource.name, reason } };
  }
  if (!applied.any) return { resource };
  if (!patched) return { resource: undefined };
  const result = encode(patcher, typeUrl, patched, [...resource.sources, ...applied.refs]);
  if (!("reason" in result)) return { resource: result };
  return { resource, failure: { filters: applied.refs, resource: resource.name, reason: result.reason } };
}

function addedResource(
  patcher: TypePatcher,
  typeUrl: string,
  patch: ConfigPatch,
  existing: readonly GeneratedResource[],
): GeneratedResource | { name: string; reason: string } {
  const value = copy(patch.value ?? {});
  const name = String(value.name ?? "");
  // Envoy refuses a whole LDS/CDS update that names a resource twice.
  if (existing.some((resource) => resource.name === name))
    return { name, reason: `the added resource's name ${name} is already generated` };
  const result = encode(patcher, typeUrl, value, [patch.ref]);
  return "reason" in result ? { name, reason: result.reason } : result;
}

function encode(
  patcher: TypePatcher,
  typeUrl: string,
  json: JsonObject,
  sources: readonly ConfigRef[],
): GeneratedResource | { reason: string } {
  const problems = patcher.problems(json);
  if (problems.length > 0) return { reason: problems.join("; ") };
  try {
    const value = Buffer.from(messageFromJson(patcher.typeName, json));
    return { name: String(json.name ?? ""), resource: { typeUrl, value }, sources: dedupe(sources) };
  } catch (error) {
    return { reason: error instanceof Error ? error.message : String(error) };
  }
}

/** Every EnvoyFilter with a patch for the proxy: whom a failure that names no patch concerns. */
function allRefs(patches: ProxyPatches): ConfigRef[] {
  return dedupe([...patches.byApplyTo.values()].flat().map((patch) => patch.ref));
}

function dedupe(refs: readonly ConfigRef[]): ConfigRef[] {
  const seen = new Map<string, ConfigRef>();
  for (const ref of refs) seen.set(`${ref.kind}/${ref.namespace}/${ref.name}`, ref);
  return [...seen.values()];
}

/** The services the proxy's workload is an endpoint of: what its inbound clusters serve. */
function hostsServedBy(push: PushContext, proxy: MeshProxy): string[] {
  const ips = new Set(proxy.instanceIps);
  const hosts: string[] = [];
  for (const [host, endpoints] of push.endpointsByHost) {
    if (endpoints.some((endpoint) => ips.has(endpoint.address))) hosts.push(host);
  }
  return hosts.sort();
}
