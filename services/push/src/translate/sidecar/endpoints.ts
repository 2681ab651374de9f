import { packAny, Resolution } from "@sextant/proto";
import { ClusterLoadAssignment, TypeUrl } from "@sextant/proto/envoy";
import { type CacheDependencies, classAffected } from "../../cache/dependencies.js";
import { cacheKey } from "../../cache/xds-cache.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { type SidecarScope, sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";
import { endpointsChanged } from "../grpc/endpoints.js";
import { parseOutboundClusterName } from "../names.js";
import { dependsOnProxyLabels, localityGroups, localityLbEndpoints } from "./cluster-endpoints.js";
import { ruleLabelsKey, sidecarDestinationRule } from "./cluster-rules.js";

const LOAD_ASSIGNMENT: CacheDependencies = { class: "sidecar-eds" };

/**
 * EDS for Envoy sidecars (istiod's EDS generator with its EndpointBuilder):
 * one ClusterLoadAssignment per requested cluster name, sorted by name.
 * For `outbound|<port>|<subset>|<fqdn>` of a service in the proxy's
 * SidecarScope: the endpoints of that port with the subset's labels, by
 * locality, with health, weights, metadata and priorities as
 * {@link localityGroups} builds them. Any other name (an unknown service,
 * port, or a DNS cluster, whose endpoints are inline in CDS) gets an empty
 * assignment, as istiod sends it, so that Envoy never waits for it.
 *
 * Cached by the cluster name (until a config it reads changes), the host's endpoint
 * version, the DestinationRule chosen, the proxy's locality (priorities), its
 * node only for a node-local service, and its labels only when
 * failoverPriority reads them: an endpoint change rebuilds only its host's
 * assignments. Within a snapshot, the sidecars that read the same of it
 * share the list's lookups too ({@link sharedAssignments}).
 */
export function generateSidecarEndpoints(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  if (watched === "*") return [];
  const { push, proxy, cache } = context;
  const scope = sidecarScope(push, proxy);
  const shared = sharedAssignments(push, proxy, scope);
  const out: GeneratedResource[] = [];
  for (const name of [...watched].filter((candidate) => candidate !== "*").sort()) {
    const known = shared.get(name);
    if (known) {
      out.push(known);
      continue;
    }
    const parsed = parseOutboundClusterName(name);
    const service = parsed ? scope.servicesByHost.get(parsed.host) : undefined;
    const port = service?.ports.find((candidate) => candidate.number === parsed?.port);
    const dns =
      service?.resolution === Resolution.RESOLUTION_DNS ||
      service?.resolution === Resolution.RESOLUTION_DNS_ROUND_ROBIN;
    if (!parsed || !service || !port || dns) {
      const empty = cache.get(cacheKey("eds-sidecar-empty", name), () => emptyAssignment(name))!;
      shared.set(name, empty);
      out.push(empty);
      continue;
    }
    const rule = sidecarDestinationRule(push, proxy, service);
    const byLabels = dependsOnProxyLabels(rule?.spec, parsed.subset, port.number);
    const key = cacheKey(
      "eds-sidecar",
      name,
      push.endpointVersions.get(service.hostname) ?? "none",
      service.namespace,
      rule ? `${rule.ref.namespace}/${rule.ref.name}` : "-",
      `${proxy.locality.region}/${proxy.locality.zone}/${proxy.locality.subzone}`,
      service.nodeLocal ? `node=${proxy.nodeName}` : "",
      byLabels ? JSON.stringify(proxy.labels) : "",
    );
    const built = cache.get(
      key,
      () => {
        const groups = localityGroups(push, proxy, {
          service,
          port,
          subset: parsed.subset,
          rule: rule?.spec,
          use: "eds",
        });
        const endpoints = localityLbEndpoints(groups);
        const assignment = ClusterLoadAssignment.fromPartial(
          endpoints.length > 0 ? { clusterName: name, endpoints } : { clusterName: name },
        );
        return {
          name,
          resource: packAny(TypeUrl.ClusterLoadAssignment, ClusterLoadAssignment, assignment),
          sources: rule && parsed.subset ? [rule.ref] : [],
        };
      },
      LOAD_ASSIGNMENT,
    );
    if (!built) continue;
    if (!byLabels) shared.set(name, built);
    out.push(built);
  }
  return out;
}

/**
 * When sidecar EDS must be re-run (istiod's edsNeedsPush): on a full push
 * whose changed kinds can reach a load assignment (not a VirtualService's,
 * Sidecar's or policy's alone: cache/dependencies.ts), or when the
 * endpoints of a host the proxy watches a cluster of changed; an endpoint
 * change elsewhere leaves it alone.
 */
export function sidecarEndpointsNeedPush(change: PushChange, watched: WatchedNames): boolean {
  if (change.full && change.configs && !classAffected("sidecar-eds", change.configs))
    return endpointsChanged({ ...change, full: false }, watched);
  return endpointsChanged(change, watched);
}

/** Per snapshot, per scope: the assignments by cluster name, by what else of a proxy they read. */
const assignmentMemo = new WeakMap<
  PushContext,
  WeakMap<SidecarScope, Map<string, Map<string, GeneratedResource>>>
>();

/**
 * The assignments already built in this snapshot for proxies that read the
 * same of it, by cluster name: two sidecars of one scope, DestinationRule
 * choice, locality and (while a service is node-local) node get the same,
 * so all but the first skip the per-cluster key and lookup. An assignment
 * that reads the proxy's labels (failoverPriority) is never put here.
 */
function sharedAssignments(
  push: PushContext,
  proxy: MeshProxy,
  scope: SidecarScope,
): Map<string, GeneratedResource> {
  let byScope = assignmentMemo.get(push);
  if (!byScope) {
    byScope = new WeakMap();
    assignmentMemo.set(push, byScope);
  }
  let byVariant = byScope.get(scope);
  if (!byVariant) {
    byVariant = new Map();
    byScope.set(scope, byVariant);
  }
  const variant = cacheKey(
    ruleLabelsKey(push, proxy),
    `${proxy.locality.region}/${proxy.locality.zone}/${proxy.locality.subzone}`,
    hasNodeLocalServices(push) ? `node=${proxy.nodeName}` : "",
  );
  let shared = byVariant.get(variant);
  if (!shared) {
    shared = new Map();
    byVariant.set(variant, shared);
  }
  return shared;
}

const nodeLocal = new WeakMap<PushContext, boolean>();

function hasNodeLocalServices(push: PushContext): boolean {
  let found = nodeLocal.get(push);
  if (found === undefined) {
    found = push.services.some((service) => service.nodeLocal);
    nodeLocal.set(push, found);
  }
  return found;
}

function emptyAssignment(name: string): GeneratedResource {
  return {
    name,
    resource: packAny(
      TypeUrl.ClusterLoadAssignment,
      ClusterLoadAssignment,
      ClusterLoadAssignment.fromPartial({ clusterName: name }),
    ),
    sources: [],
  };
}
