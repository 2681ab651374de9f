import { createHash } from "node:crypto";
import { type ConvertedConfig, convertGatewayApi, ROUTE_SEMANTICS_ANNOTATION } from "@sextant/gateway-api";
import { credentialKey, hostMatches, resolveHost, type SecretRef } from "@sextant/model";
import type { ConfigResource, Credential, Endpoint, Service } from "@sextant/proto";
import type { WasmPlugin } from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";
import type { DestinationRule } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { EnvoyFilter } from "@sextant/proto/gen/istio/networking/v1alpha3/envoy_filter";
import type { Gateway } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import type { Sidecar } from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import type { WorkloadGroup } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_group";
import type { AuthorizationPolicy } from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import type { PeerAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/peer_authentication";
import type { Telemetry } from "@sextant/proto/gen/istio/telemetry/v1alpha1/telemetry";
import { type ConfigKind, type ConfigSpecs, decodeStoredOfKind } from "@sextant/validation";
import { type AutoAllocatedAddresses, allocateAddresses, allocationKey } from "./auto-allocation.js";
import { mergeDelegates, type RoutedVirtualService } from "./delegation.js";
import { DEFAULT_TRUST_DOMAIN, spiffeUri } from "./identity.js";
import { EMPTY_MESH_CONFIG, type MeshConfig } from "./mesh-config.js";
import {
  authorizationPoliciesFor,
  composePeerAuthentication,
  DEFAULT_ROOT_NAMESPACE,
  type MergedPeerAuthentication,
  selectorMatches,
  type WorkloadAuthorizationPolicies,
} from "./security.js";
import type { TypedConfig } from "./types.js";

/** Everything a PushContext is built from. */
export interface PushInputs {
  readonly config: ReadonlyMap<string, ConfigResource>;
  readonly services: ReadonlyMap<string, Service>;
  /** Endpoint shards by KV key; every shard of a host is merged. */
  readonly endpointShards: ReadonlyMap<string, { hostname: string; endpoints: readonly Endpoint[] }>;
  readonly domainSuffix: string;
  /** The SPIFFE trust domain of the mesh's identities (TRUST_DOMAIN); "cluster.local" if not given. */
  readonly trustDomain?: string;
  /** Istio's root namespace, whose policies apply mesh-wide; "istio-system" if not given. */
  readonly rootNamespace?: string;
  /** Istio's MeshConfig (MESH_CONFIG_FILE): the extension providers of CUSTOM authorization; none if not given. */
  readonly meshConfig?: MeshConfig;
  /** The Secrets config names by credentialName (`sextant-credentials`), by namespace.name key; none if not given. */
  readonly credentials?: ReadonlyMap<string, Credential>;
}

const MESH_GATEWAY = "mesh";

/**
 * PushContext is the immutable snapshot one push is generated from
 * (istiod's PushContext). Generators read it without locks; a change builds
 * a new one. `configVersion` hashes config and services; endpoints have a
 * version per host, so an endpoint change invalidates only that host's EDS,
 * and a version of each host's service accounts, which its clusters' SANs
 * depend on.
 */
export class PushContext {
  readonly configVersion: string;
  /** What the config version hashes, item by item: the cache compares two snapshots' to drop only what changed. */
  readonly dependencies: ContextDependencies;
  readonly trustDomain: string;
  readonly rootNamespace: string;
  readonly meshConfig: MeshConfig;
  readonly servicesByHost: ReadonlyMap<string, Service>;
  /** VirtualServices with hosts, their delegates merged in (delegates themselves are not listed). */
  readonly virtualServices: readonly RoutedVirtualService[];
  readonly destinationRules: readonly TypedConfig<DestinationRule>[];
  readonly peerAuthentications: readonly TypedConfig<PeerAuthentication>[];
  readonly authorizationPolicies: readonly TypedConfig<AuthorizationPolicy>[];
  /** Sidecar resources (egress scoping), by namespace/name; `hosts` are the egress hosts as written. */
  readonly sidecars: readonly TypedConfig<Sidecar>[];
  /** Gateways by namespace/name (router proxies merge those that select them: model/gateway.ts). */
  readonly gateways: readonly TypedConfig<Gateway>[];
  /** EnvoyFilters by namespace/name (model/envoy-filter.ts picks and orders a proxy's). */
  readonly envoyFilters: readonly TypedConfig<EnvoyFilter>[];
  /** WasmPlugins by namespace/name (model/wasm-plugin.ts selects them for a listener). */
  readonly wasmPlugins: readonly TypedConfig<WasmPlugin>[];
  /** Telemetry resources by namespace/name (./telemetry.ts picks those that apply to a proxy). */
  readonly telemetries: readonly TypedConfig<Telemetry>[];
  /** The Secrets' TLS material by namespace.name key: SDS serves it, unversioned by configVersion. */
  readonly #credentials: ReadonlyMap<string, Credential>;
  /** WorkloadGroups by namespace/name: auto-registration checks a proxy's identity against its group's. */
  readonly #workloadGroups: ReadonlyMap<string, TypedConfig<WorkloadGroup>>;
  /** The DestinationRules by their namespace, in the order of {@link destinationRules}. */
  readonly #rulesByNamespace = new Map<string, TypedConfig<DestinationRule>[]>();
  /** Every service of the registry, sorted by hostname then namespace (deterministic iteration). */
  readonly services: readonly Service[];
  readonly endpointsByHost: ReadonlyMap<string, readonly Endpoint[]>;
  readonly endpointVersions: ReadonlyMap<string, string>;
  readonly #serviceAccounts: ReadonlyMap<string, { uris: readonly string[]; version: string }>;
  /** Addresses of ServiceEntry hosts without one, by "<namespace>/<hostname>" (auto-allocation.ts). */
  readonly #autoAllocated: ReadonlyMap<string, AutoAllocatedAddresses>;

  private constructor(
    readonly domainSuffix: string,
    parts: ContextParts & { endpointsByHost: Map<string, Endpoint[]>; endpointVersions: Map<string, string> },
  ) {
    this.configVersion = parts.configVersion;
    this.dependencies = parts.dependencies;
    this.trustDomain = parts.trustDomain;
    this.rootNamespace = parts.rootNamespace;
    this.meshConfig = parts.meshConfig;
    this.servicesByHost = parts.servicesByHost;
    this.virtualServices = parts.virtualServices;
    this.destinationRules = parts.destinationRules;
    for (const config of this.destinationRules) {
      const list = this.#rulesByNamespace.get(config.ref.namespace);
      if (list) list.push(config);
      else this.#rulesByNamespace.set(config.ref.namespace, [config]);
    }
    this.peerAuthentications = parts.peerAuthentications;
    this.authorizationPolicies = parts.authorizationPolicies;
    this.sidecars = parts.sidecars;
    this.gateways = parts.gateways;
    this.envoyFilters = parts.envoyFilters;
    this.wasmPlugins = parts.wasmPlugins;
    this.telemetries = parts.telemetries;
    this.#credentials = parts.credentials;
    this.#workloadGroups = parts.workloadGroups;
    this.#autoAllocated = parts.autoAllocated;
    this.services = [...parts.servicesByHost.values()].sort((a, b) =>
      a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : a.namespace < b.namespace ? -1 : 1,
    );
    this.endpointsByHost = parts.endpointsByHost;
    this.endpointVersions = parts.endpointVersions;
    this.#serviceAccounts = serviceAccountsByHost(
      parts.endpointsByHost,
      parts.servicesByHost,
      parts.trustDomain,
    );
  }

  /** Builds a snapshot from scratch. */
  static build(inputs: PushInputs): PushContext {
    const trustDomain = inputs.trustDomain ?? DEFAULT_TRUST_DOMAIN;
    const rootNamespace = inputs.rootNamespace ?? DEFAULT_ROOT_NAMESPACE;
    const configHash = createHash("sha256");
    const meshConfig = inputs.meshConfig ?? EMPTY_MESH_CONFIG;
    configHash.update(`${trustDomain}\u0000${rootNamespace}\u0001`);
    if (meshConfig.extensionProviders.length > 0 || meshConfig.telemetry)
      configHash.update(`${JSON.stringify(meshConfig)}\u0001`);
    const sortedConfig = [...inputs.config].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const configDigests = new Map<string, ConfigDigest>();
    for (const [key, resource] of sortedConfig) {
      let digest = `${key}\u0000${resource.generation}\u0000${JSON.stringify(resource.spec)}\u0001`;
      // Annotations change no generation, and one (istio.io/dry-run) changes what is built.
      if (Object.keys(resource.annotations ?? {}).length > 0)
        digest += `${JSON.stringify(resource.annotations)}\u0001`;
      configHash.update(digest);
      configDigests.set(key, {
        kind: resource.kind,
        namespace: resource.namespace,
        spec: resource.spec,
        digest,
      });
    }
    const servicesByHost = new Map<string, Service>();
    const serviceDigests = new Map<string, ServiceDigest>();
    for (const [key, service] of [...inputs.services].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      const digest = `${key}\u0000${JSON.stringify(service)}\u0001`;
      configHash.update(digest);
      servicesByHost.set(service.hostname, service);
      serviceDigests.set(key, { hostname: service.hostname, digest });
    }
    const sortedResources = sortedConfig.map(([, resource]) => resource);
    const typed = <K extends ConfigKind>(kind: K, hostsOf: (spec: ConfigSpecs[K]) => string[]) =>
      decodeStoredOfKind(sortedResources, kind).map(({ resource, spec }) => ({
        ref: { kind, namespace: resource.namespace, name: resource.name },
        generation: resource.generation,
        spec,
        ...(Object.keys(resource.annotations ?? {}).length > 0 ? { annotations: resource.annotations } : {}),
        hosts: hostsOf(spec).map((host) => resolveHost(host, resource.namespace, inputs.domainSuffix)),
      }));
    // The Gateway API becomes internal Gateways, VirtualServices and
    // DestinationRules (as istiod converts it), translated with the rest.
    const gatewayApi = convertGatewayApi({
      resources: sortedResources,
      services: servicesByHost,
      domainSuffix: inputs.domainSuffix,
    });
    const converted = <T>(configs: readonly ConvertedConfig<T>[], hostsOf: (spec: T) => string[]) =>
      configs.map(({ ref, generation, spec, annotations }) => ({
        ref,
        generation,
        spec,
        ...(annotations ? { annotations } : {}),
        hosts: hostsOf(spec).map((host) => resolveHost(host, ref.namespace, inputs.domainSuffix)),
      }));
    const { endpointsByHost, endpointVersions } = mergeShards(inputs.endpointShards);
    return new PushContext(inputs.domainSuffix, {
      configVersion: configHash.digest("hex").slice(0, 16),
      dependencies: {
        global: `${inputs.domainSuffix}\u0000${trustDomain}\u0000${rootNamespace}\u0000${JSON.stringify(meshConfig)}`,
        configs: configDigests,
        services: serviceDigests,
      },
      trustDomain,
      rootNamespace,
      meshConfig,
      servicesByHost,
      virtualServices: mergeDelegates(
        [
          ...typed("VirtualService", (spec) => spec.hosts),
          ...converted(gatewayApi.virtualServices, (spec) => spec.hosts),
        ],
        inputs.domainSuffix,
        visible,
      ),
      destinationRules: [
        ...typed("DestinationRule", (spec) => [spec.host]),
        ...converted(gatewayApi.destinationRules, (spec) => [spec.host]),
      ],
      peerAuthentications: typed("PeerAuthentication", () => []),
      authorizationPolicies: typed("AuthorizationPolicy", () => []),
      sidecars: typed("Sidecar", () => []),
      gateways: [...typed("Gateway", () => []), ...converted(gatewayApi.gateways, () => [])],
      envoyFilters: typed("EnvoyFilter", () => []),
      wasmPlugins: typed("WasmPlugin", () => []),
      telemetries: typed("Telemetry", () => []),
      credentials: inputs.credentials ?? new Map(),
      workloadGroups: new Map(
        typed("WorkloadGroup", () => []).map((group) => [`${group.ref.namespace}/${group.ref.name}`, group]),
      ),
      autoAllocated: allocateAddresses(inputs.services.values()),
      endpointsByHost,
      endpointVersions,
    });
  }

  /** The same config with new endpoints: what an endpoint-only change needs, without re-decoding config. */
  withEndpoints(shards: PushInputs["endpointShards"]): PushContext {
    const { endpointsByHost, endpointVersions } = mergeShards(shards);
    return this.#with({ endpointsByHost, endpointVersions });
  }

  /** The same config and endpoints with new credentials: a rotated Secret changes no configVersion. */
  withCredentials(credentials: ReadonlyMap<string, Credential>): PushContext {
    return this.#with({ credentials });
  }

  #with(
    changed: Partial<Pick<ContextParts, "credentials">> & {
      endpointsByHost?: Map<string, Endpoint[]>;
      endpointVersions?: Map<string, string>;
    },
  ): PushContext {
    return new PushContext(this.domainSuffix, {
      configVersion: this.configVersion,
      dependencies: this.dependencies,
      trustDomain: this.trustDomain,
      rootNamespace: this.rootNamespace,
      meshConfig: this.meshConfig,
      servicesByHost: this.servicesByHost as Map<string, Service>,
      virtualServices: this.virtualServices,
      destinationRules: this.destinationRules,
      peerAuthentications: this.peerAuthentications,
      authorizationPolicies: this.authorizationPolicies,
      sidecars: this.sidecars,
      gateways: this.gateways,
      envoyFilters: this.envoyFilters,
      wasmPlugins: this.wasmPlugins,
      telemetries: this.telemetries,
      credentials: this.#credentials,
      workloadGroups: this.#workloadGroups,
      autoAllocated: this.#autoAllocated,
      endpointsByHost: this.endpointsByHost as Map<string, Endpoint[]>,
      endpointVersions: this.endpointVersions as Map<string, string>,
      ...changed,
    });
  }

  /**
   * The SPIFFE URIs of the workloads behind host, sorted: one per distinct
   * (namespace, service account) of its endpoints (an endpoint without a
   * namespace is in the service's), as istiod's PushContext.ServiceAccounts
   * lists them for a service's SANs. Empty if none carries an account.
   */
  serviceAccountsOf(host: string): readonly string[] {
    return this.#serviceAccounts.get(host)?.uris ?? [];
  }

  /** A version of serviceAccountsOf(host), for cache keys: it changes only when the list does. */
  serviceAccountVersion(host: string): string {
    return this.#serviceAccounts.get(host)?.version ?? "none";
  }

  /**
   * The addresses auto-allocated to a ServiceEntry host without one, if it
   * is such a host: computed once per snapshot from every service of the
   * registry (not per proxy), so every proxy and replica agrees.
   */
  autoAllocatedAddresses(
    service: Pick<Service, "namespace" | "hostname">,
  ): AutoAllocatedAddresses | undefined {
    return this.#autoAllocated.get(allocationKey(service));
  }

  /** The TLS material of the Secret ref, if config names it and discovery published it. */
  credential(ref: SecretRef): Credential | undefined {
    return this.#credentials.get(credentialKey(ref));
  }

  /** The WorkloadGroup namespace/name, if the config holds it. */
  workloadGroup(namespace: string, name: string): TypedConfig<WorkloadGroup> | undefined {
    return this.#workloadGroups.get(`${namespace}/${name}`);
  }

  /** The PeerAuthentication that applies to a workload, composed with Istio's precedence. */
  peerAuthenticationFor(
    namespace: string,
    labels: Readonly<Record<string, string>>,
  ): MergedPeerAuthentication {
    return composePeerAuthentication(this.peerAuthentications, this.rootNamespace, namespace, labels);
  }

  /** The AuthorizationPolicies that apply to a workload, by action. */
  authorizationPoliciesFor(
    namespace: string,
    labels: Readonly<Record<string, string>>,
  ): WorkloadAuthorizationPolicies {
    return authorizationPoliciesFor(this.authorizationPolicies, this.rootNamespace, namespace, labels);
  }

  /**
   * The VirtualService that routes host for a proxy in namespace, as Istio
   * picks it for the mesh gateway: visible to the namespace, bound to "mesh",
   * an exact host before a wildcard, then by namespace/name (istiod uses
   * creation time, which ingest does not keep). One made from a Gateway API
   * mesh route (GAMMA) applies only in its own namespace (the consumer's
   * route, which wins over every other) and the Service's (the producer's).
   */
  virtualServiceFor(host: string, namespace: string): RoutedVirtualService | undefined {
    const serviceNamespace = this.servicesByHost.get(host)?.namespace;
    let best: { config: RoutedVirtualService; rank: number } | undefined;
    for (const config of this.virtualServices) {
      if (!visible(config.spec.exportTo, config.ref.namespace, namespace)) continue;
      const gateways = config.spec.gateways;
      if (gateways.length > 0 && !gateways.includes(MESH_GATEWAY)) continue;
      const exact = config.hosts.includes(host);
      if (!exact && !config.hosts.some((pattern) => hostMatches(pattern, host))) continue;
      const gatewayApi = config.annotations?.[ROUTE_SEMANTICS_ANNOTATION] === "gateway";
      if (gatewayApi && config.ref.namespace !== namespace && config.ref.namespace !== serviceNamespace)
        continue;
      const rank = gatewayApi && config.ref.namespace === namespace ? 2 : exact ? 1 : 0;
      if (!best || rank > best.rank) best = { config, rank };
    }
    return best?.config;
  }

  /**
   * The DestinationRule that applies to host for a proxy of namespace, as
   * istiod's PushContext.destinationRule and SidecarScope.DestinationRule
   * pick it, for clusters, endpoints and routes alike:
   *
   * 1. the rules of the proxy's own namespace (whatever their exportTo),
   * 2. else those of the service's namespace exported to the proxy's,
   * 3. else those of the root namespace exported to the proxy's;
   *
   * a rule of any other namespace never applies, whatever its exportTo.
   * Within a step, the most specific host (exact, then the longest
   * wildcard). A rule with a workloadSelector applies only to proxies of
   * its own namespace; given their labels, only to those it selects, and
   * then it wins over one without (without labels, the first rule is
   * taken). Istio merges several selector-less rules for one host (subsets
   * of later ones added); here the first by namespace/name is taken, as
   * ingest keeps no creation time. `serviceNamespace` is the namespace of
   * the service the host names, the registry's by default.
   */
  destinationRuleFor(
    host: string,
    namespace: string,
    labels?: Readonly<Record<string, string>>,
    serviceNamespace = this.servicesByHost.get(host)?.namespace,
  ): TypedConfig<DestinationRule> | undefined {
    const namespaces = [namespace];
    if (serviceNamespace && !namespaces.includes(serviceNamespace)) namespaces.push(serviceNamespace);
    if (!namespaces.includes(this.rootNamespace)) namespaces.push(this.rootNamespace);
    for (const owner of namespaces) {
      const candidates = (this.#rulesByNamespace.get(owner) ?? []).filter(
        (config) =>
          (owner === namespace || visible(config.spec.exportTo, owner, namespace)) &&
          ruleSelects(config, namespace, labels),
      );
      const best = mostSpecificHost(
        host,
        candidates.flatMap((config) => config.hosts),
      );
      if (best === undefined) continue;
      const forHost = candidates.filter((config) => config.hosts.includes(best));
      return (labels && forHost.find((config) => config.spec.workloadSelector !== undefined)) ?? forHost[0];
    }
    return undefined;
  }

  /** The service behind host, if the registry has it and it is visible from namespace. */
  serviceFor(host: string, namespace: string): Service | undefined {
    const service = this.servicesByHost.get(host);
    if (!service) return undefined;
    return visible(service.exportTo, service.namespace, namespace) ? service : undefined;
  }
}

/** Istio's exportTo: empty or "*" is everyone; "." is the resource's own namespace; else the names listed. True if a resource of ownNamespace is visible from namespace. */
export function visible(exportTo: readonly string[], ownNamespace: string, namespace: string): boolean {
  if (exportTo.length === 0 || exportTo.includes("*")) return true;
  return exportTo.some((entry) => (entry === "." ? ownNamespace : entry) === namespace);
}

/**
 * Whether a DestinationRule may apply to a proxy of namespace: one without
 * a workloadSelector always; one with it only to the proxies of its own
 * namespace, those whose labels it selects (when the labels are given).
 */
function ruleSelects(
  config: TypedConfig<DestinationRule>,
  namespace: string,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const selector = config.spec.workloadSelector;
  if (!selector) return true;
  if (config.ref.namespace !== namespace) return false;
  return !labels || selectorMatches(selector.matchLabels, labels);
}

/** Istio's MostSpecificHostMatch: the exact host if listed, else the longest wildcard that covers it. */
function mostSpecificHost(host: string, patterns: readonly string[]): string | undefined {
  if (patterns.includes(host)) return host;
  let best: string | undefined;
  for (const pattern of patterns)
    if (pattern.startsWith("*") && hostMatches(pattern, host) && (!best || pattern.length > best.length))
      best = pattern;
  return best;
}

/** One config resource as the config version hashes it. */
export interface ConfigDigest {
  readonly kind: string;
  readonly namespace: string;
  /** The stored spec, undecoded (the cache reads a VirtualService's hosts from it). */
  readonly spec: unknown;
  /** Equal for two snapshots exactly when the resource is unchanged. */
  readonly digest: string;
}

/** One registry service as the config version hashes it. */
export interface ServiceDigest {
  readonly hostname: string;
  readonly digest: string;
}

/**
 * The config version's inputs one by one (istiod computes ConfigsUpdated
 * from its events; Sextant's snapshots arrive whole, so the cache diffs two).
 */
export interface ContextDependencies {
  /** Domain suffix, trust domain, root namespace and MeshConfig: any change affects everything. */
  readonly global: string;
  /** By KV key. */
  readonly configs: ReadonlyMap<string, ConfigDigest>;
  /** By KV key. */
  readonly services: ReadonlyMap<string, ServiceDigest>;
}

/** What a PushContext holds besides its endpoints. */
interface ContextParts {
  configVersion: string;
  dependencies: ContextDependencies;
  trustDomain: string;
  rootNamespace: string;
  meshConfig: MeshConfig;
  servicesByHost: Map<string, Service>;
  virtualServices: readonly RoutedVirtualService[];
  destinationRules: readonly TypedConfig<DestinationRule>[];
  peerAuthentications: readonly TypedConfig<PeerAuthentication>[];
  authorizationPolicies: readonly TypedConfig<AuthorizationPolicy>[];
  sidecars: readonly TypedConfig<Sidecar>[];
  gateways: readonly TypedConfig<Gateway>[];
  envoyFilters: readonly TypedConfig<EnvoyFilter>[];
  wasmPlugins: readonly TypedConfig<WasmPlugin>[];
  telemetries: readonly TypedConfig<Telemetry>[];
  credentials: ReadonlyMap<string, Credential>;
  workloadGroups: ReadonlyMap<string, TypedConfig<WorkloadGroup>>;
  autoAllocated: ReadonlyMap<string, AutoAllocatedAddresses>;
}

function serviceAccountsByHost(
  endpointsByHost: ReadonlyMap<string, readonly Endpoint[]>,
  servicesByHost: ReadonlyMap<string, Service>,
  trustDomain: string,
) {
  const byHost = new Map<string, { uris: readonly string[]; version: string }>();
  for (const [host, endpoints] of endpointsByHost) {
    const serviceNamespace = servicesByHost.get(host)?.namespace ?? "";
    const uris = new Set<string>();
    for (const endpoint of endpoints) {
      const namespace = endpoint.namespace || serviceNamespace;
      if (endpoint.serviceAccount && namespace)
        uris.add(spiffeUri(trustDomain, namespace, endpoint.serviceAccount));
    }
    if (uris.size === 0) continue;
    const sorted = [...uris].sort();
    byHost.set(host, {
      uris: sorted,
      version: createHash("sha256").update(sorted.join("\n")).digest("hex").slice(0, 16),
    });
  }
  return byHost;
}

function mergeShards(shards: PushInputs["endpointShards"]) {
  const byHost = new Map<string, Array<[string, readonly Endpoint[]]>>();
  for (const [key, shard] of shards)
    byHost.set(shard.hostname, [...(byHost.get(shard.hostname) ?? []), [key, shard.endpoints]]);
  const endpointsByHost = new Map<string, Endpoint[]>();
  const endpointVersions = new Map<string, string>();
  for (const [host, entries] of byHost) {
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const endpoints = entries.flatMap(([, list]) => list);
    endpointsByHost.set(host, endpoints);
    endpointVersions.set(
      host,
      createHash("sha256").update(JSON.stringify(endpoints)).digest("hex").slice(0, 16),
    );
  }
  return { endpointsByHost, endpointVersions };
}
