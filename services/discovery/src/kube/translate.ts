// Kubernetes objects to registry entries: pure functions, no I/O, so that
// the translation is tested with tables and goldens alone.
import type { V1EndpointSlice, V1Namespace, V1Node, V1Pod, V1Service } from "@kubernetes/client-node";
import {
  type Endpoint,
  HealthStatus,
  type Locality,
  Resolution,
  type Service,
  type ServicePort,
} from "@sextant/proto";
import { inferKubeProtocol } from "../registry/protocol.js";

/** The annotation that limits which namespaces see a service, as in Istio. */
export const EXPORT_TO_ANNOTATION = "networking.istio.io/exportTo";
/** The label an EndpointSlice names its Service with. */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";
/** Istio's label placing a pod, WorkloadEntry or the system namespace on a network. */
export const NETWORK_LABEL = "topology.istio.io/network";
/** Istio's pod label overriding the node's locality: `region.zone.subzone` (dots, since labels cannot hold slashes). */
export const LOCALITY_LABEL = "istio-locality";
/** The node topology labels a locality is read from; subzone is Istio's own. */
export const REGION_LABELS = ["topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region"];
/** See {@link REGION_LABELS}. */
export const ZONE_LABELS = ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"];
/** See {@link REGION_LABELS}. */
export const SUBZONE_LABEL = "topology.istio.io/subzone";

/** Istio's Service labels that turn on persistent sessions (by cookie, by header): its endpoints may drain. */
export const PERSISTENT_SESSION_LABELS = [
  "istio.io/persistent-session",
  "istio.io/persistent-session-header",
];

/** Options of the Kubernetes translation. */
export interface KubeTranslateOptions {
  readonly domainSuffix: string;
  /** The network of endpoints no label places elsewhere (stands in for istiod's meshNetworks). */
  readonly network: string;
  /** The control plane's namespace, whose network label is the cluster's network (istiod: its own namespace, istio-system). */
  readonly systemNamespace?: string;
}

/** What endpoint translation looks up besides the slices: the informers' caches. */
export interface KubeLookup {
  pod(namespace: string, name: string): V1Pod | undefined;
  node(name: string): V1Node | undefined;
  namespace(name: string): V1Namespace | undefined;
}

/** The hostname of a Kubernetes Service: `<name>.<ns>.svc.<domainSuffix>`. */
export function kubeHostname(name: string, namespace: string, domainSuffix: string): string {
  return `${name}.${namespace}.svc.${domainSuffix}`;
}

/** The namespaces a service is exported to, from its annotation; empty means the mesh default. */
export function exportToOf(annotations: Record<string, string> | undefined): string[] {
  const value = annotations?.[EXPORT_TO_ANNOTATION];
  if (!value) return [];
  return [
    ...new Set(
      value
        .split(",")
        .map((part) => part.trim())
        .filter(Boolean),
    ),
  ].sort();
}

/**
 * A Kubernetes Service as a registry Service, as istiod's ConvertService
 * (pilot/pkg/serviceregistry/kube/conversion.go) converts it:
 * ClusterIP services are resolved from their endpoints (STATIC), headless
 * ones (clusterIP None) pass traffic to the address asked for (PASSTHROUGH),
 * and ExternalName services are an ALIAS of their external name (Istio's
 * model.Alias since 1.21: no endpoints, no cluster of their own) and count as
 * external to the mesh. `internalTrafficPolicy: Local` makes the service
 * node-local; `publishNotReadyAddresses` is kept for DNS.
 */
export function serviceFromKube(service: V1Service, options: KubeTranslateOptions): Service {
  const name = service.metadata?.name ?? "";
  const namespace = service.metadata?.namespace ?? "default";
  const spec = service.spec ?? {};
  const externalName = spec.type === "ExternalName" ? (spec.externalName ?? "") : "";
  const headless = spec.clusterIP === "None";
  const addresses =
    externalName || headless
      ? []
      : [...new Set((spec.clusterIPs?.length ? spec.clusterIPs : [spec.clusterIP]).filter(isAddress))];
  const ports: ServicePort[] = (spec.ports ?? []).map((port) => ({
    name: port.name ?? "",
    number: port.port,
    targetPort: numericTargetPort(port.targetPort),
    protocol: inferKubeProtocol(port),
  }));
  return {
    hostname: kubeHostname(name, namespace, options.domainSuffix),
    namespace,
    name,
    addresses,
    ports,
    labels: { ...(service.metadata?.labels ?? {}) },
    selector: { ...(spec.selector ?? {}) },
    exportTo: exportToOf(service.metadata?.annotations),
    // As ConvertService: clusterIP None wins over ExternalName (Kubernetes
    // gives an ExternalName Service no clusterIP, so only "None" is headless).
    resolution: headless
      ? Resolution.RESOLUTION_PASSTHROUGH
      : externalName
        ? Resolution.RESOLUTION_ALIAS
        : Resolution.RESOLUTION_STATIC,
    meshExternal: Boolean(externalName),
    externalName,
    registry: "kubernetes",
    // Set only when true, so a value written before these fields existed stays equal.
    ...(spec.internalTrafficPolicy === "Local" ? { nodeLocal: true } : {}),
    ...(spec.publishNotReadyAddresses ? { publishNotReadyAddresses: true } : {}),
  };
}

function isAddress(value: string | undefined): value is string {
  return Boolean(value) && value !== "None";
}

/** A numeric targetPort; a named one (resolved per pod) is 0, since only the endpoints know it. */
function numericTargetPort(targetPort: unknown): number {
  if (typeof targetPort === "number") return targetPort;
  if (typeof targetPort === "string" && /^\d+$/.test(targetPort)) return Number(targetPort);
  return 0;
}

/** True if the service keeps persistent sessions, so its shutting-down endpoints drain (Istio's Service.SupportsDrainingEndpoints). */
export function supportsDraining(labels: Record<string, string> | undefined): boolean {
  return PERSISTENT_SESSION_LABELS.some((label) => Boolean(labels?.[label]));
}

/**
 * Health of an EndpointSlice endpoint, as istiod's endpointHealthStatus
 * (kube/controller/endpointslice.go) reads its conditions, where an absent
 * condition counts as true: ready is HEALTHY; otherwise, in a service with
 * persistent sessions, serving and terminating is DRAINING; otherwise
 * terminating (serving or not) is TERMINATING; anything else UNHEALTHY.
 */
export function healthOf(
  conditions: { ready?: boolean; serving?: boolean; terminating?: boolean } | undefined,
  draining = false,
): HealthStatus {
  if (conditions?.ready !== false) return HealthStatus.HEALTH_STATUS_HEALTHY;
  const terminating = conditions.terminating !== false;
  if (draining && terminating && conditions.serving !== false) return HealthStatus.HEALTH_STATUS_DRAINING;
  if (terminating) return HealthStatus.HEALTH_STATUS_TERMINATING;
  return HealthStatus.HEALTH_STATUS_UNHEALTHY;
}

/**
 * The locality of a pod: its `istio-locality` label if set, otherwise its
 * node's topology labels (region, zone, and Istio's subzone), otherwise the
 * zone the EndpointSlice recorded.
 */
export function localityOf(pod: V1Pod | undefined, node: V1Node | undefined, sliceZone?: string): Locality {
  const override = pod?.metadata?.labels?.[LOCALITY_LABEL];
  if (override) {
    const [region = "", zone = "", subzone = ""] = override.split(/[./]/);
    return { region, zone, subzone };
  }
  const labels = node?.metadata?.labels ?? {};
  const first = (keys: string[]) => keys.map((key) => labels[key]).find(Boolean) ?? "";
  return {
    region: first(REGION_LABELS),
    zone: first(ZONE_LABELS) || (sliceZone ?? ""),
    subzone: labels[SUBZONE_LABEL] ?? "",
  };
}

/**
 * The workload a pod belongs to, as Istio names it: the Deployment for a pod
 * of a ReplicaSet (its name without the pod-template-hash suffix), the
 * controlling owner otherwise (istiod also climbs from a Job to its CronJob,
 * which needs the Job object; discovery does not watch Jobs), otherwise the
 * pod itself.
 */
export function workloadNameOf(pod: V1Pod): string {
  const meta = pod.metadata ?? {};
  const owner = meta.ownerReferences?.find((ref) => ref.controller) ?? meta.ownerReferences?.[0];
  if (!owner) return meta.name ?? "";
  const hash = meta.labels?.["pod-template-hash"];
  if (owner.kind === "ReplicaSet" && hash && owner.name.endsWith(`-${hash}`))
    return owner.name.slice(0, -hash.length - 1);
  return owner.name;
}

/**
 * The network of a workload, in istiod's order (kube/controller
 * controller.go, Controller.Network): the workload's own
 * `topology.istio.io/network` label (a pod's, or a WorkloadEntry's), then
 * the same label on the SYSTEM namespace (istio-system: the cluster's
 * network), then the configured default (istiod's meshNetworks). The
 * workload's own namespace's label plays no part.
 */
export function networkOf(
  labels: Record<string, string> | undefined,
  systemNamespace: V1Namespace | undefined,
  fallback: string,
): string {
  return labels?.[NETWORK_LABEL] || systemNamespace?.metadata?.labels?.[NETWORK_LABEL] || fallback;
}

/** The name of a pod in its headless service's DNS, as istiod's NewEndpointBuilder keeps it: only with a subdomain, and then spec.hostname or else the pod's name. */
export function podDnsIdentity(pod: V1Pod | undefined): { hostname?: string; subdomain?: string } {
  const subdomain = pod?.spec?.subdomain;
  if (!pod || !subdomain) return {};
  return { hostname: pod.spec?.hostname || pod.metadata?.name || "", subdomain };
}

/**
 * The endpoints of a Service from its EndpointSlices, one per address with
 * its port per service port name, health (see {@link healthOf}; `draining`
 * when the service keeps persistent sessions), node name, and the pod's DNS
 * hostname and subdomain. An endpoint listed by two slices (it is moving
 * between them) appears once, each service port taken from the first slice
 * naming it, as istiod's endpointSliceCache.get keeps one endpoint per
 * address and service port name. An address whose target pod the cache does
 * not hold yet is left out until the pod arrives, as istiod does, so that it
 * never appears without its labels and service account. FQDN slices are
 * skipped (istiod does not support them). Endpoints are sorted by address,
 * so equal state gives an equal value.
 */
export function endpointsFromSlices(
  slices: readonly V1EndpointSlice[],
  lookup: KubeLookup,
  options: KubeTranslateOptions,
  draining = false,
): Endpoint[] {
  const systemNamespace = options.systemNamespace ? lookup.namespace(options.systemNamespace) : undefined;
  const byAddress = new Map<string, Endpoint>();
  const ordered = [...slices].sort((a, b) => (a.metadata?.name ?? "").localeCompare(b.metadata?.name ?? ""));
  for (const slice of ordered) {
    if (slice.addressType === "FQDN") continue;
    const namespace = slice.metadata?.namespace ?? "default";
    const ports: Record<string, number> = {};
    for (const port of slice.ports ?? []) if (port.port !== undefined) ports[port.name ?? ""] = port.port;
    for (const endpoint of slice.endpoints ?? []) {
      const ref = endpoint.targetRef;
      const pod =
        ref?.kind === "Pod" && ref.name ? lookup.pod(ref.namespace ?? namespace, ref.name) : undefined;
      if (ref?.kind === "Pod" && !pod) continue;
      // istiod takes the pod's spec.nodeName; a slice without pods has only its own.
      const nodeName = pod?.spec?.nodeName || endpoint.nodeName || "";
      const node = nodeName ? lookup.node(nodeName) : undefined;
      for (const address of endpoint.addresses) {
        const existing = byAddress.get(address);
        if (existing) {
          for (const [name, number] of Object.entries(ports)) existing.ports[name] ??= number;
          continue;
        }
        byAddress.set(address, {
          address,
          ports: { ...ports },
          labels: { ...(pod?.metadata?.labels ?? {}) },
          serviceAccount: pod ? pod.spec?.serviceAccountName || pod.spec?.serviceAccount || "default" : "",
          workloadName: pod ? workloadNameOf(pod) : "",
          namespace,
          locality: localityOf(pod, node, endpoint.zone),
          health: healthOf(endpoint.conditions, draining),
          network: networkOf(pod?.metadata?.labels, systemNamespace, options.network),
          weight: 0,
          ...(nodeName ? { nodeName } : {}),
          ...podDnsIdentity(pod),
        });
      }
    }
  }
  return [...byAddress.values()].sort((a, b) => a.address.localeCompare(b.address));
}
