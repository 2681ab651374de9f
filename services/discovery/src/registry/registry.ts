import type { V1EndpointSlice, V1Namespace, V1Node, V1Pod, V1Service } from "@kubernetes/client-node";
import type { EndpointShard, Service } from "@sextant/proto";
import type { ServiceEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/service_entry";
import type { WorkloadEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_entry";
import type { WorkloadGroup } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_group";
import {
  endpointsFromSlices,
  type KubeLookup,
  localityOf,
  NETWORK_LABEL,
  networkOf,
  SERVICE_NAME_LABEL,
  serviceFromKube,
  supportsDraining,
} from "../kube/translate.js";
import { type Named, translateServiceEntry } from "../serviceentry/translate.js";
import { endpointsKey, kubernetesShard, serviceKey } from "./keys.js";

/** Which bucket a changed key belongs to. */
export type RegistryBucket = "services" | "endpoints";

/** Options of {@link Registry}. */
export interface RegistryOptions {
  readonly domainSuffix: string;
  readonly clusterId: string;
  readonly network: string;
  /** The control plane's namespace: its `topology.istio.io/network` label is the network of workloads that name none. */
  readonly systemNamespace?: string;
}

/** What one unit (a Kubernetes Service or a ServiceEntry) contributes, by key. */
interface UnitOutput {
  readonly services: Map<string, Service>;
  readonly endpoints: Map<string, EndpointShard>;
}

type KubeObject = { metadata?: { name?: string; namespace?: string } };

const nsName = (object: KubeObject) => `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;
const kubeUnit = (namespace: string, name: string) => `k8s/${namespace}/${name}`;
const serviceEntryUnit = (namespace: string, name: string) => `se/${namespace}/${name}`;

function addTo<K, V>(index: Map<K, Set<V>>, key: K, value: V): void {
  const set = index.get(key);
  if (set) set.add(value);
  else index.set(key, new Set([value]));
}

function removeFrom<K, V>(index: Map<K, Set<V>>, key: K, value: V): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (set.size === 0) index.delete(key);
}

/**
 * Registry is the in-memory model every replica keeps: the inputs of both
 * sources (Kubernetes objects, ServiceEntry/WorkloadEntry/WorkloadGroup
 * config) and the registry they translate to, by KV key. Changes mark
 * "units" dirty (one Kubernetes Service, or one ServiceEntry, with what it
 * depends on); recompute() translates only those again and reports the keys
 * whose desired value changed. Two units may claim one service key (a
 * ServiceEntry for a Kubernetes host): the Kubernetes Service wins, then the
 * ServiceEntry whose namespace/name sorts first, so the outcome never
 * depends on arrival order. Endpoint keys carry the shard, so they never
 * collide.
 */
export class Registry {
  readonly #services = new Map<string, V1Service>();
  readonly #slices = new Map<string, V1EndpointSlice>();
  readonly #slicesByService = new Map<string, Set<string>>();
  readonly #pods = new Map<string, V1Pod>();
  readonly #slicesByPod = new Map<string, Set<string>>();
  readonly #podsByNode = new Map<string, Set<string>>();
  readonly #podsByNamespace = new Map<string, Set<string>>();
  readonly #nodes = new Map<string, V1Node>();
  readonly #namespaces = new Map<string, V1Namespace>();
  readonly #serviceEntries = new Map<string, Named<ServiceEntry>>();
  readonly #serviceEntriesByNamespace = new Map<string, Set<string>>();
  readonly #workloadEntries = new Map<string, Named<WorkloadEntry>>();
  readonly #workloadGroups = new Map<string, Named<WorkloadGroup>>();

  readonly #outputs = new Map<string, UnitOutput>();
  readonly #serviceClaims = new Map<string, Map<string, Service>>();
  readonly #desiredServices = new Map<string, Service>();
  readonly #desiredEndpoints = new Map<string, EndpointShard>();
  readonly #dirty = new Set<string>();
  readonly #listeners: Array<(bucket: RegistryBucket, key: string) => void> = [];
  #scheduled = false;
  readonly #lookup: KubeLookup;

  constructor(private readonly options: RegistryOptions) {
    this.#lookup = {
      pod: (namespace, name) => this.#pods.get(`${namespace}/${name}`),
      node: (name) => this.#nodes.get(`/${name}`),
      namespace: (name) => this.#namespaces.get(`/${name}`),
    };
  }

  /** Calls listener with every key whose desired value changed (set or removed). */
  onChange(listener: (bucket: RegistryBucket, key: string) => void): void {
    this.#listeners.push(listener);
  }

  /** The desired value of a `sextant-services` key; undefined if it should not exist. */
  service(key: string): Service | undefined {
    return this.#desiredServices.get(key);
  }

  /** The desired value of a `sextant-endpoints` key; undefined if it should not exist. */
  endpoints(key: string): EndpointShard | undefined {
    return this.#desiredEndpoints.get(key);
  }

  /** Every desired key of a bucket. */
  keys(bucket: RegistryBucket): string[] {
    return [...(bucket === "services" ? this.#desiredServices : this.#desiredEndpoints).keys()];
  }

  /** The desired registry, for /debug/registryz. */
  snapshot(): { services: Service[]; endpoints: EndpointShard[] } {
    return { services: [...this.#desiredServices.values()], endpoints: [...this.#desiredEndpoints.values()] };
  }

  /** Input counts, for metrics and /debug/registryz. */
  inputCounts(): Record<string, number> {
    return {
      services: this.#services.size,
      endpointSlices: this.#slices.size,
      pods: this.#pods.size,
      nodes: this.#nodes.size,
      namespaces: this.#namespaces.size,
      serviceEntries: this.#serviceEntries.size,
      workloadEntries: this.#workloadEntries.size,
      workloadGroups: this.#workloadGroups.size,
    };
  }

  /** A WorkloadGroup by namespace and name (for auto-registration). */
  workloadGroup(namespace: string, name: string): Named<WorkloadGroup> | undefined {
    return this.#workloadGroups.get(`${namespace}/${name}`);
  }

  // --- Kubernetes inputs ---

  /** A Service was added or changed (upsert) or deleted. */
  setKubeService(service: V1Service, deleted = false): void {
    const key = nsName(service);
    if (deleted) this.#services.delete(key);
    else this.#services.set(key, service);
    this.#mark(kubeUnit(service.metadata?.namespace ?? "", service.metadata?.name ?? ""));
  }

  /** An EndpointSlice was added or changed, or deleted. */
  setEndpointSlice(slice: V1EndpointSlice, deleted = false): void {
    const key = nsName(slice);
    const previous = this.#slices.get(key);
    if (previous) this.#unindexSlice(key, previous);
    if (deleted) this.#slices.delete(key);
    else {
      this.#slices.set(key, slice);
      this.#indexSlice(key, slice);
    }
  }

  /** A Pod was added or changed, or deleted. */
  setPod(pod: V1Pod, deleted = false): void {
    const key = nsName(pod);
    const namespace = pod.metadata?.namespace ?? "";
    const previous = this.#pods.get(key);
    if (previous?.spec?.nodeName) removeFrom(this.#podsByNode, previous.spec.nodeName, key);
    if (deleted) {
      this.#pods.delete(key);
      removeFrom(this.#podsByNamespace, namespace, key);
    } else {
      this.#pods.set(key, pod);
      addTo(this.#podsByNamespace, namespace, key);
      if (pod.spec?.nodeName) addTo(this.#podsByNode, pod.spec.nodeName, key);
    }
    this.#markPodDependents(key, namespace);
  }

  /** A Node was added or changed, or deleted. */
  setNode(node: V1Node, deleted = false): void {
    const name = node.metadata?.name ?? "";
    if (deleted) this.#nodes.delete(`/${name}`);
    else this.#nodes.set(`/${name}`, node);
    for (const pod of this.#podsByNode.get(name) ?? []) this.#markPodDependents(pod, pod.split("/")[0] ?? "");
  }

  /**
   * A Namespace was added or changed, or deleted. Only the system namespace
   * matters to the registry: its network label is the network of every
   * workload that names none, so a change of it recomputes everything (as
   * istiod's onSystemNamespaceEvent does, on a network change).
   */
  setNamespace(namespace: V1Namespace, deleted = false): void {
    const name = namespace.metadata?.name ?? "";
    const before = this.#systemNetwork();
    if (deleted) this.#namespaces.delete(`/${name}`);
    else this.#namespaces.set(`/${name}`, namespace);
    if (name !== this.options.systemNamespace || this.#systemNetwork() === before) return;
    for (const key of this.#services.keys()) this.#mark(`k8s/${key}`);
    for (const key of this.#serviceEntries.keys()) this.#mark(`se/${key}`);
  }

  /** The network the system namespace's label names; empty without one. */
  #systemNetwork(): string {
    const system = this.options.systemNamespace;
    return (system && this.#lookup.namespace(system)?.metadata?.labels?.[NETWORK_LABEL]) || "";
  }

  // --- config inputs ---

  /** A ServiceEntry was stored, or removed (spec undefined). */
  setServiceEntry(namespace: string, name: string, entry: Named<ServiceEntry> | undefined): void {
    const key = `${namespace}/${name}`;
    const unit = serviceEntryUnit(namespace, name);
    if (entry) {
      this.#serviceEntries.set(key, entry);
      addTo(this.#serviceEntriesByNamespace, namespace, unit);
    } else {
      this.#serviceEntries.delete(key);
      removeFrom(this.#serviceEntriesByNamespace, namespace, unit);
    }
    this.#mark(unit);
  }

  /** A WorkloadEntry was stored, or removed. */
  setWorkloadEntry(namespace: string, name: string, entry: Named<WorkloadEntry> | undefined): void {
    const key = `${namespace}/${name}`;
    if (entry) this.#workloadEntries.set(key, entry);
    else this.#workloadEntries.delete(key);
    for (const unit of this.#serviceEntriesByNamespace.get(namespace) ?? []) this.#mark(unit);
  }

  /** A WorkloadGroup was stored, or removed. */
  setWorkloadGroup(namespace: string, name: string, group: Named<WorkloadGroup> | undefined): void {
    const key = `${namespace}/${name}`;
    if (group) this.#workloadGroups.set(key, group);
    else this.#workloadGroups.delete(key);
  }

  // --- computing ---

  /** Translates every dirty unit again; resolves once listeners have heard of every changed key. */
  recompute(): void {
    this.#scheduled = false;
    const units = [...this.#dirty];
    this.#dirty.clear();
    for (const unit of units) this.#apply(unit, this.#compute(unit));
  }

  #mark(unit: string): void {
    this.#dirty.add(unit);
    if (this.#scheduled) return;
    this.#scheduled = true;
    // Coalesce a burst of informer events (a list delivers thousands at once) into one pass.
    setImmediate(() => this.recompute());
  }

  #markPodDependents(podKey: string, namespace: string): void {
    for (const slice of this.#slicesByPod.get(podKey) ?? []) {
      const object = this.#slices.get(slice);
      const service = object?.metadata?.labels?.[SERVICE_NAME_LABEL];
      if (object && service) this.#mark(kubeUnit(object.metadata?.namespace ?? "", service));
    }
    for (const unit of this.#serviceEntriesByNamespace.get(namespace) ?? []) {
      const entry = this.#serviceEntries.get(unit.slice(3));
      if (Object.keys(entry?.spec.workloadSelector?.labels ?? {}).length > 0) this.#mark(unit);
    }
  }

  #indexSlice(key: string, slice: V1EndpointSlice): void {
    const namespace = slice.metadata?.namespace ?? "";
    const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    if (service) {
      addTo(this.#slicesByService, `${namespace}/${service}`, key);
      this.#mark(kubeUnit(namespace, service));
    }
    for (const endpoint of slice.endpoints ?? []) {
      const ref = endpoint.targetRef;
      if (ref?.kind === "Pod" && ref.name)
        addTo(this.#slicesByPod, `${ref.namespace ?? namespace}/${ref.name}`, key);
    }
  }

  #unindexSlice(key: string, slice: V1EndpointSlice): void {
    const namespace = slice.metadata?.namespace ?? "";
    const service = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    if (service) {
      removeFrom(this.#slicesByService, `${namespace}/${service}`, key);
      this.#mark(kubeUnit(namespace, service));
    }
    for (const endpoint of slice.endpoints ?? []) {
      const ref = endpoint.targetRef;
      if (ref?.kind === "Pod" && ref.name)
        removeFrom(this.#slicesByPod, `${ref.namespace ?? namespace}/${ref.name}`, key);
    }
  }

  #compute(unit: string): UnitOutput {
    const [kind, namespace = "", name = ""] = unit.split("/");
    const output: UnitOutput = { services: new Map(), endpoints: new Map() };
    if (kind === "k8s") {
      const service = this.#services.get(`${namespace}/${name}`);
      if (!service) return output;
      const value = serviceFromKube(service, this.options);
      output.services.set(serviceKey(namespace, value.hostname), value);
      const slices = [...(this.#slicesByService.get(`${namespace}/${name}`) ?? [])]
        .map((key) => this.#slices.get(key))
        .filter((slice): slice is V1EndpointSlice => slice !== undefined);
      const shard = kubernetesShard(this.options.clusterId);
      output.endpoints.set(endpointsKey(namespace, value.hostname, shard), {
        hostname: value.hostname,
        namespace,
        shard,
        endpoints: endpointsFromSlices(slices, this.#lookup, this.options, supportsDraining(value.labels)),
      });
      return output;
    }
    const entry = this.#serviceEntries.get(`${namespace}/${name}`);
    if (!entry) return output;
    const network = this.#systemNetwork() || this.options.network;
    const selecting = Object.keys(entry.spec.workloadSelector?.labels ?? {}).length > 0;
    const translated = translateServiceEntry(
      entry,
      {
        workloadEntries: selecting
          ? [...this.#workloadEntries.values()].filter((workload) => workload.namespace === namespace)
          : [],
        pods: selecting
          ? [...(this.#podsByNamespace.get(namespace) ?? [])]
              .map((key) => this.#pods.get(key))
              .filter((pod): pod is V1Pod => pod !== undefined)
          : [],
        podPlacement: (pod) => {
          const node = pod.spec?.nodeName ? this.#lookup.node(pod.spec.nodeName) : undefined;
          return {
            locality: localityOf(pod, node),
            network: networkOf(pod.metadata?.labels, undefined, network),
          };
        },
      },
      { network },
    );
    for (const service of translated.services)
      output.services.set(serviceKey(namespace, service.hostname), service);
    for (const shard of translated.endpoints)
      output.endpoints.set(endpointsKey(namespace, shard.hostname, shard.shard), shard);
    return output;
  }

  #apply(unit: string, next: UnitOutput): void {
    const previous = this.#outputs.get(unit);
    if (next.services.size === 0 && next.endpoints.size === 0) this.#outputs.delete(unit);
    else this.#outputs.set(unit, next);

    const serviceKeys = new Set([...(previous?.services.keys() ?? []), ...next.services.keys()]);
    for (const key of serviceKeys) {
      const value = next.services.get(key);
      let claims = this.#serviceClaims.get(key);
      if (value) {
        if (!claims) {
          claims = new Map();
          this.#serviceClaims.set(key, claims);
        }
        claims.set(unit, value);
      } else if (claims) {
        claims.delete(unit);
        if (claims.size === 0) this.#serviceClaims.delete(key);
      }
      const winner =
        claims && claims.size > 0 ? claims.get([...claims.keys()].sort(byPrecedence)[0]!) : undefined;
      if (this.#desiredServices.get(key) === winner) continue;
      if (winner) this.#desiredServices.set(key, winner);
      else this.#desiredServices.delete(key);
      this.#emit("services", key);
    }

    const endpointKeys = new Set([...(previous?.endpoints.keys() ?? []), ...next.endpoints.keys()]);
    for (const key of endpointKeys) {
      const value = next.endpoints.get(key);
      if (value) this.#desiredEndpoints.set(key, value);
      else this.#desiredEndpoints.delete(key);
      this.#emit("endpoints", key);
    }
  }

  #emit(bucket: RegistryBucket, key: string): void {
    for (const listener of this.#listeners) listener(bucket, key);
  }
}

/** Kubernetes units before ServiceEntry units, then by namespace/name. */
function byPrecedence(a: string, b: string): number {
  const rank = (unit: string) => (unit.startsWith("k8s/") ? 0 : 1);
  return rank(a) - rank(b) || a.localeCompare(b);
}
