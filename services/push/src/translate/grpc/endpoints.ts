import { type Endpoint, HealthStatus, packAny } from "@sextant/proto";
import { ClusterLoadAssignment, TypeUrl } from "@sextant/proto/envoy";
import { HealthStatus as EnvoyHealthStatus } from "@sextant/proto/gen/envoy/config/core/v3/health_check";
import { cacheKey } from "../../cache/xds-cache.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../../model/types.js";
import { type GenerationContext, generateByName } from "../generator.js";
import { parseOutboundClusterName } from "../names.js";
import { onProxyNode } from "../sidecar/cluster-endpoints.js";

/**
 * Load assignments for proxyless gRPC clients, one per requested cluster:
 * the healthy endpoints of its host (those with the subset's labels; for a
 * node-local service, those on the client's node), by locality, each
 * locality weighted by its endpoints (gRPC ignores a locality of weight
 * zero), IP literals only.
 */
export function generateGrpcEndpoints(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy } = context;
  return generateByName(
    context,
    watched,
    (name) => {
      const host = parseOutboundClusterName(name)?.host ?? "";
      return cacheKey(
        "eds-grpc",
        proxy.namespace,
        name,
        push.configVersion,
        push.endpointVersions.get(host) ?? "none",
        // Only a node-local service's endpoints depend on the client's node.
        push.serviceFor(host, proxy.namespace)?.nodeLocal ? `node=${proxy.nodeName}` : "",
      );
    },
    (name) => buildLoadAssignment(push, proxy, name),
  );
}

/** True if an endpoint change touches one of the watched clusters. */
export function endpointsChanged(change: PushChange, watched: WatchedNames): boolean {
  if (change.full) return true;
  if (watched === "*") return change.endpointHosts.size > 0;
  for (const name of watched) {
    const host = parseOutboundClusterName(name)?.host;
    if (host && change.endpointHosts.has(host)) return true;
  }
  return false;
}

/** The load assignment of cluster `name`; an existing cluster with no endpoints gets an empty one. */
export function buildLoadAssignment(
  push: PushContext,
  proxy: Pick<MeshProxy, "namespace" | "nodeName">,
  name: string,
): GeneratedResource | null {
  const { namespace } = proxy;
  const parsed = parseOutboundClusterName(name);
  if (!parsed) return null;
  const service = push.serviceFor(parsed.host, namespace);
  const servicePort = service?.ports.find((port) => port.number === parsed.port);
  if (!service || !servicePort) return null;
  const rule = push.destinationRuleFor(parsed.host, namespace);
  const subsetLabels = parsed.subset ? rule?.spec.subsets.find((s) => s.name === parsed.subset)?.labels : {};
  if (!subsetLabels) return null;

  const port = (endpoint: Endpoint) =>
    endpoint.ports[servicePort.name] || servicePort.targetPort || servicePort.number;
  const byLocality = new Map<string, { locality: Endpoint["locality"]; endpoints: Endpoint[] }>();
  // gRPC C-core (1.51 among them) NACKs a load assignment that names one address:port twice,
  // in one locality or two ("duplicate endpoint address"): the registry may hold it twice
  // (a pod in two EndpointSlices of its service, a WorkloadEntry and a pod with one IP), so the
  // first, in registry order, wins.
  const seen = new Set<string>();
  for (const endpoint of push.endpointsByHost.get(parsed.host) ?? []) {
    if (
      endpoint.health !== HealthStatus.HEALTH_STATUS_HEALTHY &&
      endpoint.health !== HealthStatus.HEALTH_STATUS_UNSPECIFIED
    )
      continue;
    if (!isIpLiteral(endpoint.address)) continue;
    if (!onProxyNode(service, endpoint, proxy)) continue;
    if (!Object.entries(subsetLabels).every(([label, value]) => endpoint.labels[label] === value)) continue;
    const address = `${endpoint.address}:${port(endpoint)}`;
    if (seen.has(address)) continue;
    seen.add(address);
    const locality = endpoint.locality ?? { region: "", zone: "", subzone: "" };
    const key = `${locality.region}/${locality.zone}/${locality.subzone}`;
    const group = byLocality.get(key) ?? { locality, endpoints: [] };
    group.endpoints.push(endpoint);
    byLocality.set(key, group);
  }
  const localities = [...byLocality]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, { locality, endpoints }]) => {
      const sorted = [...endpoints].sort((a, b) =>
        `${a.address}:${port(a)}`.localeCompare(`${b.address}:${port(b)}`),
      );
      return {
        locality: {
          region: locality?.region ?? "",
          zone: locality?.zone ?? "",
          subZone: locality?.subzone ?? "",
        },
        lbEndpoints: sorted.map((endpoint) => ({
          endpoint: { address: { socketAddress: { address: endpoint.address, portValue: port(endpoint) } } },
          healthStatus: EnvoyHealthStatus.HEALTHY,
          loadBalancingWeight: endpoint.weight || 1,
        })),
        loadBalancingWeight: sorted.reduce((sum, endpoint) => sum + (endpoint.weight || 1), 0),
        priority: 0,
      };
    });
  const assignment = ClusterLoadAssignment.fromPartial({
    clusterName: name,
    endpoints: withinUint32(localities),
  });
  return {
    name,
    resource: packAny(TypeUrl.ClusterLoadAssignment, ClusterLoadAssignment, assignment),
    sources: rule && parsed.subset ? [rule.ref] : [],
  };
}

const UINT32_MAX = 0xffff_ffff;

/**
 * Locality weights whose sum fits a uint32: gRPC C-core NACKs a priority
 * whose locality weights add up to more ("sum of locality weights for
 * priority 0 exceeds uint32 max"), and a single weight over it does not fit
 * the field. Endpoint weights are uint32 each (WorkloadEntry `weight`), so a
 * few large ones overflow; then every locality keeps its share, scaled down,
 * and at least 1.
 */
function withinUint32<T extends { loadBalancingWeight: number }>(localities: T[]): T[] {
  const total = localities.reduce((sum, locality) => sum + locality.loadBalancingWeight, 0);
  if (total <= UINT32_MAX) return localities;
  const room = UINT32_MAX - localities.length;
  return localities.map((locality) => ({
    ...locality,
    loadBalancingWeight: 1 + Math.floor((locality.loadBalancingWeight / total) * room),
  }));
}

function isIpLiteral(address: string): boolean {
  return (
    /^\d{1,3}(\.\d{1,3}){3}$/.test(address) || (address.includes(":") && /^[0-9a-fA-F:.]+$/.test(address))
  );
}
