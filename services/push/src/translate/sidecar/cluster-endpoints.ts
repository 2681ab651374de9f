import { isIP } from "node:net";
import { type Endpoint, HealthStatus, type Service, type ServicePort } from "@sextant/proto";
import { HealthStatus as EnvoyHealthStatus } from "@sextant/proto/gen/envoy/config/core/v3/health_check";
import {
  ClientTLSSettings_TLSmode,
  type DestinationRule,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { selectorMatches, TLS_MODE_LABEL } from "../../model/security.js";
import { clusterPolicy, destinationRuleTlsMode } from "../common/traffic-policy.js";
import {
  applyLocalityLoadBalancer,
  type EnvoyLocality,
  type LbEndpointDraft,
  type LocalityGroup,
  localityLbSetting,
} from "./cluster-locality.js";
import { targetPortOf } from "./cluster-rules.js";
import { TRANSPORT_SOCKET_MATCH_KEY } from "./cluster-tls.js";

/** Istio's label that keeps draining endpoints in a service's clusters (persistent sessions by cookie). */
export const PERSISTENT_SESSION_LABEL = "istio.io/persistent-session";
/** Istio's label for persistent sessions by header. */
export const PERSISTENT_SESSION_HEADER_LABEL = "istio.io/persistent-session-header";

/** What endpoints are built for: the proxy's EDS (IP endpoints only) or a DNS/static cluster's inline assignment. */
export type EndpointUse = "eds" | "cds";

/** The inputs of one cluster's endpoints. */
export interface EndpointRequest {
  readonly service: Service;
  readonly port: ServicePort;
  /** The subset name; empty for the service's default cluster. */
  readonly subset: string;
  readonly rule: DestinationRule | undefined;
  readonly use: EndpointUse;
}

/**
 * The endpoints of one cluster as istiod's EndpointBuilder builds them for
 * a proxy, grouped by locality (sorted by `region/zone/subzone`), each
 * endpoint sorted by address and port:
 *
 * - endpoints of the port (an endpoint naming its ports must name this one)
 *   with the subset's labels (an unknown subset has none: all endpoints, as
 *   in istiod);
 * - for a node-local service (`internalTrafficPolicy: Local`), only the
 *   endpoints on the proxy's node (its NODE_NAME; as istiod's
 *   filterIstioEndpoint, an empty node name matches an empty one);
 * - UNHEALTHY and TERMINATING endpoints dropped (istiod never sends a
 *   terminating one); DRAINING ones kept only for services with persistent
 *   sessions (`istio.io/persistent-session`), with status DRAINING;
 *   for EDS, addresses that are not IPs dropped (a DNS ServiceEntry's hosts);
 * - each with its weight (default 1), the metadata `istio.workload`
 *   (`<workload>;<namespace>;<canonical name>;<canonical revision>;<cluster>`)
 *   and, when mTLS to it is possible, `envoy.transport_socket_match`
 *   `{tlsMode: istio}` (a DestinationRule TLS mode for the cluster decides;
 *   else the endpoint's `security.istio.io/tlsMode=istio` label and a
 *   PeerAuthentication that does not DISABLE its port);
 * - each locality weighted by the sum of its endpoints' weights; then the
 *   locality load balancing (distribute, or failover with outlier detection).
 */
export function localityGroups(
  push: PushContext,
  proxy: Pick<MeshProxy, "locality" | "labels"> & { readonly nodeName?: string },
  request: EndpointRequest,
): LocalityGroup[] {
  const { service, port, subset, rule, use } = request;
  const subsetLabels = subset
    ? (rule?.subsets.find((candidate) => candidate.name === subset)?.labels ?? {})
    : {};
  const drTlsMode = destinationRuleTlsMode(rule, subset, port.number);
  const keepDraining = Boolean(service.labels[PERSISTENT_SESSION_LABEL]);
  const byLocality = new Map<
    string,
    { locality: EnvoyLocality; entries: Array<[Endpoint, LbEndpointDraft]> }
  >();
  for (const endpoint of push.endpointsByHost.get(service.hostname) ?? []) {
    if (Object.keys(endpoint.ports).length > 0 && endpoint.ports[port.name] === undefined) continue;
    if (!selectorMatches(subsetLabels, endpoint.labels)) continue;
    if (!endpoint.address) continue;
    if (use === "eds" && isIP(endpoint.address) === 0) continue;
    if (!onProxyNode(service, endpoint, proxy)) continue;
    if (endpoint.health === HealthStatus.HEALTH_STATUS_UNHEALTHY) continue;
    if (endpoint.health === HealthStatus.HEALTH_STATUS_TERMINATING) continue;
    if (endpoint.health === HealthStatus.HEALTH_STATUS_DRAINING && !keepDraining) continue;
    const targetPort = targetPortOf(port, endpoint);
    const mtls = mtlsEnabled(push, service, endpoint, targetPort, drTlsMode);
    const lbEndpoint: LbEndpointDraft = {
      endpoint: { address: { socketAddress: { address: endpoint.address, portValue: targetPort } } },
      healthStatus:
        endpoint.health === HealthStatus.HEALTH_STATUS_DRAINING
          ? EnvoyHealthStatus.DRAINING
          : EnvoyHealthStatus.HEALTHY,
      metadata: { filterMetadata: endpointMetadata(service, endpoint, mtls) },
      loadBalancingWeight: endpoint.weight || 1,
    };
    const locality = {
      region: endpoint.locality?.region ?? "",
      zone: endpoint.locality?.zone ?? "",
      subZone: endpoint.locality?.subzone ?? "",
    };
    const key = `${locality.region}/${locality.zone}/${locality.subZone}`;
    const group = byLocality.get(key) ?? { locality, entries: [] };
    group.entries.push([endpoint, lbEndpoint]);
    byLocality.set(key, group);
  }
  const groups = [...byLocality]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, { locality, entries }]): LocalityGroup => {
      const sorted = entries.sort(([a, x], [b, y]) =>
        `${a.address}:${x.endpoint?.address?.socketAddress?.portValue}` <
        `${b.address}:${y.endpoint?.address?.socketAddress?.portValue}`
          ? -1
          : 1,
      );
      const lbEndpoints = sorted.map(([, lbEndpoint]) => lbEndpoint);
      return {
        locality,
        lbEndpoints,
        endpoints: sorted.map(([endpoint]) => endpoint),
        loadBalancingWeight: Math.min(
          lbEndpoints.reduce((sum, endpoint) => sum + (endpoint.loadBalancingWeight ?? 0), 0),
          0xffffffff,
        ),
        priority: 0,
      };
    });
  const policy = clusterPolicy(rule, subset, port.number);
  return applyLocalityLoadBalancer(
    groups,
    { region: proxy.locality.region, zone: proxy.locality.zone, subZone: proxy.locality.subzone },
    proxy.labels,
    localityLbSetting(policy?.loadBalancer),
    policy?.outlierDetection !== undefined,
  );
}

/**
 * False for an endpoint of a node-local service (internalTrafficPolicy
 * Local) on another node than the proxy's, as istiod's filterIstioEndpoint
 * compares the endpoint's NodeName with the proxy's GetNodeName().
 */
export function onProxyNode(
  service: Pick<Service, "nodeLocal">,
  endpoint: Pick<Endpoint, "nodeName">,
  proxy: { readonly nodeName?: string },
): boolean {
  return !service.nodeLocal || (endpoint.nodeName ?? "") === (proxy.nodeName ?? "");
}

/** The Envoy LocalityLbEndpoints of groups (the ClusterLoadAssignment's `endpoints`). */
export function localityLbEndpoints(groups: readonly LocalityGroup[]) {
  return groups.map((group) => ({
    locality: group.locality,
    lbEndpoints: group.lbEndpoints,
    loadBalancingWeight: group.loadBalancingWeight,
    priority: group.priority,
  }));
}

/** True if the proxy's locality load balancing depends on its labels (failoverPriority with outlier detection). */
export function dependsOnProxyLabels(
  rule: DestinationRule | undefined,
  subset: string,
  port: number,
): boolean {
  const policy = clusterPolicy(rule, subset, port);
  const setting = localityLbSetting(policy?.loadBalancer);
  return (
    policy?.outlierDetection !== undefined &&
    setting !== undefined &&
    setting.distribute.length === 0 &&
    setting.failoverPriority.length > 0
  );
}

/**
 * istiod's mtlsChecker.checkMtlsEnabled: the cluster's DestinationRule TLS
 * mode when it sets one (mTLS iff ISTIO_MUTUAL); else an endpoint labelled
 * `security.istio.io/tlsMode: istio` whose PeerAuthentication does not
 * DISABLE its port. The metadata still needs the label (an unlabelled
 * endpoint's mode is "disabled").
 */
function mtlsEnabled(
  push: PushContext,
  service: Service,
  endpoint: Endpoint,
  targetPort: number,
  drTlsMode: ClientTLSSettings_TLSmode | undefined,
): boolean {
  if (endpoint.labels[TLS_MODE_LABEL] !== "istio") return false;
  if (drTlsMode !== undefined) return drTlsMode === ClientTLSSettings_TLSmode.ISTIO_MUTUAL;
  const peer = push.peerAuthenticationFor(endpoint.namespace || service.namespace, endpoint.labels);
  return (peer.perPort.get(targetPort) ?? peer.mode) !== "DISABLE";
}

/** istiod's AppendLbEndpointMetadata: the transport socket match and the compressed telemetry labels. */
function endpointMetadata(service: Service, endpoint: Endpoint, mtls: boolean) {
  const labels = endpoint.labels;
  const canonicalName =
    labels["service.istio.io/canonical-name"] ||
    labels["app.kubernetes.io/name"] ||
    labels.app ||
    endpoint.workloadName;
  const revision =
    labels["service.istio.io/canonical-revision"] ||
    labels["app.kubernetes.io/version"] ||
    labels.version ||
    "";
  const namespace = endpoint.namespace || service.namespace;
  return {
    ...(mtls ? { [TRANSPORT_SOCKET_MATCH_KEY]: { tlsMode: "istio" } } : {}),
    istio: {
      // The cluster ID is not part of the registry's endpoints: left empty.
      workload: `${endpoint.workloadName};${namespace};${canonicalName};${revision === "latest" ? "" : revision};`,
    },
  };
}
