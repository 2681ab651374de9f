import { hostMatches } from "@sextant/model";
import { packAny } from "@sextant/proto";
import { Cluster, ClusterLoadAssignment, TypeUrl } from "@sextant/proto/envoy";
import { ServerTLSSettings_TLSmode as TlsMode } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import { Protocol } from "@sextant/proto/gen/sextant/mesh/v1/service";
import { isAlias } from "../../model/aliases.js";
import { mergedGatewayFor } from "../../model/gateway.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";
import { endpointsChanged } from "../grpc/endpoints.js";
import { outboundClusterName, parseOutboundClusterName } from "../names.js";
import { sidecarDestinationRule } from "../sidecar/cluster-rules.js";
import { istioMtlsSni } from "../sidecar/cluster-tls.js";
import { generateSidecarEndpoints } from "../sidecar/endpoints.js";

// AUTO_PASSTHROUGH (Istio's multi-network east-west gateway): a sidecar of
// another network opens mTLS to the gateway with the SNI of the cluster it
// wants, `outbound_.<port>_.<subset>_.<fqdn>`; the gateway reads the SNI and
// forwards the still-encrypted connection to that cluster's endpoints
// ("SNI-DNAT"). It needs a cluster per SNI, the outbound cluster under that
// name without TLS of its own (istiod's buildOutboundSniDnatClusters).

/** The parts of an SNI-DNAT cluster name `outbound_.<port>_.<subset>_.<fqdn>`, or undefined. */
export function parseSniDnatName(name: string): { port: number; subset: string; host: string } | undefined {
  const match = /^outbound_\.(\d+)_\.([^_]*)_\.(.+)$/.exec(name);
  if (!match) return undefined;
  const port = Number(match[1]);
  if (port <= 0 || port > 65535) return undefined;
  return { port, subset: match[2] ?? "", host: match[3] ?? "" };
}

/** Whether any server of the router's Gateways is AUTO_PASSTHROUGH (Istio's ContainsAutoPassthroughGateways). */
export function hasAutoPassthrough(push: PushContext, proxy: MeshProxy): boolean {
  return (
    mergedGatewayFor(push, proxy)?.ports.some((port) =>
      port.servers.some((entry) => entry.server.tls?.mode === TlsMode.AUTO_PASSTHROUGH),
    ) ?? false
  );
}

/**
 * Istio's builtAutoPassthroughFilterChains: for every service of the
 * router's scope inside the mesh whose hostname one of the server's hosts
 * covers (not a wildcard hostname, see below), each port (not UDP), the SNI of its cluster and then those of its
 * DestinationRule's subsets, each to the SNI-DNAT cluster of that name.
 */
export function autoPassthroughTargets(
  push: PushContext,
  proxy: MeshProxy,
  hosts: readonly string[],
): Array<{ sni: string }> {
  const out: Array<{ sni: string }> = [];
  for (const service of sidecarScope(push, proxy).services) {
    // A wildcard host's SNI (`outbound_.<port>_._.*.example.com`) is a partial wildcard, which Envoy
    // rejects in server_names with the whole listener; Istio sends it, Sextant leaves the host out.
    if (service.meshExternal || isAlias(service) || service.hostname.startsWith("*")) continue;
    if (!hosts.some((host) => hostMatches(host, service.hostname))) continue;
    const rule = sidecarDestinationRule(push, proxy, service);
    for (const port of service.ports) {
      if (port.protocol === Protocol.PROTOCOL_UDP) continue;
      out.push({ sni: istioMtlsSni(port.number, "", service.hostname) });
      for (const subset of rule?.spec.subsets ?? [])
        out.push({ sni: istioMtlsSni(port.number, subset.name, service.hostname) });
    }
  }
  return out;
}

/**
 * The SNI-DNAT clusters of a router with an AUTO_PASSTHROUGH server, from
 * its outbound clusters: each of a service inside the mesh renamed to its
 * SNI (its EDS service name and load assignment too), without transport
 * socket or transport socket matches (the client's mTLS passes through).
 */
export function sniDnatClusters(
  push: PushContext,
  outbound: readonly GeneratedResource[],
): GeneratedResource[] {
  const out: GeneratedResource[] = [];
  for (const resource of outbound) {
    const parsed = parseOutboundClusterName(resource.name);
    if (!parsed) continue;
    const service = push.servicesByHost.get(parsed.host);
    if (!service || service.meshExternal) continue;
    const name = istioMtlsSni(parsed.port, parsed.subset, parsed.host);
    const cluster = Cluster.decode(resource.resource.value);
    cluster.name = name;
    cluster.altStatName = `${name};`;
    if (cluster.edsClusterConfig) cluster.edsClusterConfig.serviceName = name;
    if (cluster.loadAssignment) cluster.loadAssignment.clusterName = name;
    cluster.transportSocket = undefined;
    cluster.transportSocketMatches = [];
    out.push({ name, resource: packAny(TypeUrl.Cluster, Cluster, cluster), sources: resource.sources });
  }
  return out;
}

/**
 * EDS for routers: a sidecar's load assignments, and for an SNI-DNAT
 * cluster those of the outbound cluster it renames, under its name.
 */
export function generateGatewayEndpoints(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  if (watched === "*") return [];
  const sni = new Map<string, string>();
  const names = new Set<string>();
  for (const name of watched) {
    const parsed = parseSniDnatName(name);
    if (!parsed) {
      names.add(name);
      continue;
    }
    const outbound = outboundClusterName(parsed.port, parsed.subset, parsed.host);
    sni.set(outbound, name);
    names.add(outbound);
  }
  const out: GeneratedResource[] = [];
  for (const resource of generateSidecarEndpoints(context, names)) {
    const renamed = sni.get(resource.name);
    if (watched.has(resource.name)) out.push(resource);
    if (!renamed) continue;
    const assignment = ClusterLoadAssignment.decode(resource.resource.value);
    assignment.clusterName = renamed;
    out.push({
      name: renamed,
      resource: packAny(TypeUrl.ClusterLoadAssignment, ClusterLoadAssignment, assignment),
      sources: resource.sources,
    });
  }
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** When router EDS must be re-run: as a sidecar's, an SNI-DNAT name counting as the host it names. */
export function gatewayEndpointsNeedPush(change: PushChange, watched: WatchedNames): boolean {
  if (watched === "*" || change.full) return endpointsChanged(change, watched);
  const names = new Set<string>();
  for (const name of watched) {
    const parsed = parseSniDnatName(name);
    names.add(parsed ? outboundClusterName(parsed.port, parsed.subset, parsed.host) : name);
  }
  return endpointsChanged(change, names);
}
