// ServiceEntry (with the WorkloadEntries and Pods it selects) to registry
// entries: pure functions, no I/O.
import type { V1Pod } from "@kubernetes/client-node";
import {
  type Endpoint,
  type EndpointShard,
  HealthStatus,
  type Locality,
  Resolution,
  type Service,
} from "@sextant/proto";
import {
  type ServiceEntry,
  ServiceEntry_Location,
  ServiceEntry_Resolution,
  type ServicePort as ServiceEntryPort,
} from "@sextant/proto/gen/istio/networking/v1alpha3/service_entry";
import type { WorkloadEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_entry";
import { networkOf, workloadNameOf } from "../kube/translate.js";
import { serviceEntryShard } from "../registry/keys.js";
import { parseProtocol } from "../registry/protocol.js";

/** A config resource with its spec decoded: the ServiceEntry or WorkloadEntry and its metadata. */
export interface Named<T> {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly spec: T;
}

/** What a ServiceEntry may select: the WorkloadEntries and Pods of its namespace. */
export interface ServiceEntryWorkloads {
  readonly workloadEntries: ReadonlyArray<Named<WorkloadEntry>>;
  readonly pods: readonly V1Pod[];
  /** A selected pod's locality and network, which need its node and namespace; unknown without. */
  readonly podPlacement?: (pod: V1Pod) => { locality: Locality; network: string };
}

/** What one ServiceEntry contributes: a service per host, and that host's endpoint shard. */
export interface ServiceEntryOutput {
  readonly services: Service[];
  readonly endpoints: EndpointShard[];
}

/** Options of the ServiceEntry translation. */
export interface ServiceEntryTranslateOptions {
  /** The network of workloads that name none: the system namespace's network label, else the configured default. */
  readonly network: string;
}

const RESOLUTIONS: Record<number, Resolution> = {
  [ServiceEntry_Resolution.NONE]: Resolution.RESOLUTION_PASSTHROUGH,
  [ServiceEntry_Resolution.STATIC]: Resolution.RESOLUTION_STATIC,
  [ServiceEntry_Resolution.DNS]: Resolution.RESOLUTION_DNS,
  [ServiceEntry_Resolution.DNS_ROUND_ROBIN]: Resolution.RESOLUTION_DNS_ROUND_ROBIN,
};

/** True if every selector label is on the workload (an empty selector selects nothing, as a workloadSelector must name labels). */
export function selects(
  selector: Record<string, string>,
  labels: Record<string, string> | undefined,
): boolean {
  const entries = Object.entries(selector);
  return entries.length > 0 && entries.every(([key, value]) => labels?.[key] === value);
}

/** An Istio locality string `region/zone/subzone` as a Locality. */
export function parseLocality(value: string): Locality {
  const [region = "", zone = "", subzone = ""] = value.split("/");
  return { region, zone, subzone };
}

/**
 * The port a workload receives a ServiceEntry port's traffic on, as Istio
 * maps it: the workload's port of the same name if it declares one, else the
 * ServiceEntry port's targetPort, else its number.
 */
export function workloadPort(port: ServiceEntryPort, named: Record<string, number> | undefined): number {
  return named?.[port.name] || port.targetPort || port.number;
}

/**
 * A ServiceEntry as registry entries, with Istio's semantics:
 *
 * - one Service per host (the host as written: ServiceEntry hosts are never
 *   completed with the namespace), carrying every address of the entry;
 * - resolution NONE becomes PASSTHROUGH, STATIC and DNS stay;
 *   MESH_EXTERNAL marks the service external to the mesh;
 * - endpoints: the inline `endpoints`, or the WorkloadEntries and Pods of the
 *   entry's namespace that `workloadSelector` selects; a DNS entry with
 *   neither resolves each host itself, so the host is its own endpoint;
 * - each workload's port per service port is mapped by port name.
 *
 * Every host gets the same endpoint shard, named after the entry, so two
 * ServiceEntries for one host never overwrite each other's endpoints.
 */
export function translateServiceEntry(
  entry: Named<ServiceEntry>,
  workloads: ServiceEntryWorkloads,
  options: ServiceEntryTranslateOptions,
): ServiceEntryOutput {
  const spec = entry.spec;
  const resolution = RESOLUTIONS[spec.resolution] ?? Resolution.RESOLUTION_PASSTHROUGH;
  const hosts = [...new Set(spec.hosts)];
  const services: Service[] = hosts.map((hostname) => ({
    hostname,
    namespace: entry.namespace,
    name: entry.name,
    addresses: [...spec.addresses],
    ports: spec.ports.map((port) => ({
      name: port.name,
      number: port.number,
      targetPort: port.targetPort,
      protocol: parseProtocol(port.protocol),
    })),
    labels: { ...entry.labels },
    selector: { ...(spec.workloadSelector?.labels ?? {}) },
    exportTo: [...spec.exportTo],
    resolution,
    meshExternal: spec.location === ServiceEntry_Location.MESH_EXTERNAL,
    externalName: "",
    registry: "serviceentry",
  }));

  const fromWorkloadEntry = (workload: WorkloadEntry, workloadName: string): Endpoint => ({
    address: workload.address,
    ports: Object.fromEntries(spec.ports.map((port) => [port.name, workloadPort(port, workload.ports)])),
    labels: { ...workload.labels },
    serviceAccount: workload.serviceAccount,
    workloadName,
    namespace: entry.namespace,
    locality: parseLocality(workload.locality),
    health: HealthStatus.HEALTH_STATUS_HEALTHY,
    // Istio's workloadEntryNetwork (serviceentry/conversion.go): the entry's
    // network, else its topology.istio.io/network label, else the system
    // namespace's network or the default (Controller.Network).
    network: workload.network || networkOf(workload.labels, undefined, options.network),
    weight: workload.weight,
  });

  const selector = spec.workloadSelector?.labels ?? {};
  const endpoints: Endpoint[] = spec.endpoints.map((workload) => fromWorkloadEntry(workload, ""));
  if (Object.keys(selector).length > 0) {
    for (const workload of workloads.workloadEntries) {
      if (workload.namespace !== entry.namespace) continue;
      // A WorkloadEntry's metadata labels and spec labels both describe it.
      if (!selects(selector, { ...workload.labels, ...workload.spec.labels })) continue;
      endpoints.push(
        fromWorkloadEntry(
          { ...workload.spec, labels: { ...workload.labels, ...workload.spec.labels } },
          workload.name,
        ),
      );
    }
    for (const pod of workloads.pods) {
      const endpoint = podEndpoint(
        pod,
        entry.namespace,
        selector,
        spec.ports,
        options,
        workloads.podPlacement,
      );
      if (endpoint) endpoints.push(endpoint);
    }
  } else if (
    spec.endpoints.length === 0 &&
    (spec.resolution === ServiceEntry_Resolution.DNS ||
      spec.resolution === ServiceEntry_Resolution.DNS_ROUND_ROBIN)
  ) {
    return {
      services,
      endpoints: hosts.map((hostname) =>
        shard(entry, hostname, [
          {
            address: hostname,
            ports: Object.fromEntries(spec.ports.map((port) => [port.name, workloadPort(port, undefined)])),
            labels: {},
            serviceAccount: "",
            workloadName: "",
            namespace: entry.namespace,
            locality: { region: "", zone: "", subzone: "" },
            health: HealthStatus.HEALTH_STATUS_HEALTHY,
            network: options.network,
            weight: 0,
          },
        ]),
      ),
    };
  }
  const sorted = dedupe(endpoints);
  return { services, endpoints: hosts.map((hostname) => shard(entry, hostname, sorted)) };
}

function shard(entry: Named<ServiceEntry>, hostname: string, endpoints: Endpoint[]): EndpointShard {
  return {
    hostname,
    namespace: entry.namespace,
    shard: serviceEntryShard(entry.namespace, entry.name),
    endpoints: endpoints.map((endpoint) => ({ ...endpoint, ports: { ...endpoint.ports } })),
  };
}

/**
 * One endpoint per identity (the first wins), sorted by it, so equal state
 * gives an equal value. The identity is what Istio's IstioEndpoint.Key
 * (pilot/pkg/model/service.go) keys on, per service port: namespace,
 * workload, address and port. Two workloads on one address (a VM running two
 * versions, two WorkloadEntries with different ports) are two endpoints;
 * only the same workload listed twice collapses.
 */
function dedupe(endpoints: Endpoint[]): Endpoint[] {
  const byIdentity = new Map<string, Endpoint>();
  for (const endpoint of endpoints) {
    const key = endpointIdentity(endpoint);
    if (!byIdentity.has(key)) byIdentity.set(key, endpoint);
  }
  return [...byIdentity].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, endpoint]) => endpoint);
}

/** An endpoint's identity: address first (so the order stays by address), then ports, workload and namespace. */
function endpointIdentity(endpoint: Endpoint): string {
  const ports = Object.entries(endpoint.ports)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, number]) => `${name}=${number}`)
    .join(",");
  return `${endpoint.address}\u0000${ports}\u0000${endpoint.workloadName}\u0000${endpoint.namespace}`;
}

/**
 * A Pod selected by a ServiceEntry, as an endpoint: only a pod istiod's pod
 * cache hands to the ServiceEntry controller (kube/controller/pod.go
 * PodCache.onEvent: shouldPodBeInEndpoints and IsPodReady), that is one with
 * an IP, not finished, not being deleted, and Ready; its port per service
 * port is its container port of the same name, else the targetPort, else
 * the number.
 */
function podEndpoint(
  pod: V1Pod,
  namespace: string,
  selector: Record<string, string>,
  ports: readonly ServiceEntryPort[],
  options: ServiceEntryTranslateOptions,
  placement: ServiceEntryWorkloads["podPlacement"],
): Endpoint | undefined {
  if (pod.metadata?.namespace !== namespace || !selects(selector, pod.metadata?.labels)) return undefined;
  const address = pod.status?.podIP;
  if (!address || pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed") return undefined;
  const named: Record<string, number> = {};
  for (const container of pod.spec?.containers ?? [])
    for (const port of container.ports ?? []) if (port.name) named[port.name] = port.containerPort;
  const ready = pod.status?.conditions?.find((condition) => condition.type === "Ready")?.status === "True";
  if (!ready || pod.metadata?.deletionTimestamp) return undefined;
  const where = placement?.(pod) ?? {
    locality: { region: "", zone: "", subzone: "" },
    network: networkOf(pod.metadata?.labels, undefined, options.network),
  };
  return {
    address,
    ports: Object.fromEntries(ports.map((port) => [port.name, workloadPort(port, named)])),
    labels: { ...(pod.metadata?.labels ?? {}) },
    serviceAccount: pod.spec?.serviceAccountName || pod.spec?.serviceAccount || "default",
    workloadName: workloadNameOf(pod),
    namespace,
    locality: where.locality,
    health: HealthStatus.HEALTH_STATUS_HEALTHY,
    network: where.network,
    weight: 0,
  };
}
