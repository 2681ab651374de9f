import { isIP } from "node:net";
import {
  type ConfigRef,
  Protocol,
  packAny,
  Resolution,
  type Service,
  type ServicePort,
} from "@sextant/proto";
import { Cluster, TypeUrl } from "@sextant/proto/envoy";
import { Cluster_DiscoveryType, Cluster_LbPolicy } from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import { HealthStatus as EnvoyHealthStatus } from "@sextant/proto/gen/envoy/config/core/v3/health_check";
import {
  ClientTLSSettings_TLSmode,
  type DestinationRule,
  LoadBalancerSettings_SimpleLB,
  type Subset,
  type TrafficPolicy,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { IstioIngressListener } from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import type { CacheDependencies } from "../../cache/dependencies.js";
import { cacheKey } from "../../cache/xds-cache.js";
import { isAlias } from "../../model/aliases.js";
import { parseProtocol } from "../../model/protocol.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { type MtlsMode, TLS_MODE_LABEL } from "../../model/security.js";
import { type SidecarScope, sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource, PushChange, TypedConfig, WatchedNames } from "../../model/types.js";
import { clusterPolicy, portLevelPolicy } from "../common/traffic-policy.js";
import type { GenerationContext } from "../generator.js";
import { outboundClusterName } from "../names.js";
import {
  localityGroups,
  localityLbEndpoints,
  PERSISTENT_SESSION_HEADER_LABEL,
  PERSISTENT_SESSION_LABEL,
} from "./cluster-endpoints.js";
import {
  applyConnectionPool,
  applyTrafficPolicy,
  MESH_CONNECT_TIMEOUT,
  setUpstreamProtocol,
} from "./cluster-policy.js";
import {
  ruleLabelsKey,
  type ServiceTarget,
  serviceTargets,
  sidecarDestinationRule,
} from "./cluster-rules.js";
import { istioMtlsSni } from "./cluster-tls.js";
import { type ClusterDraft, ClusterWrapper } from "./cluster-wrapper.js";
import {
  dnsLookupFamily,
  ipMode,
  LOCALHOST_IPV4,
  LOCALHOST_IPV6,
  localhostAddresses,
  passthroughBindAddresses,
  WILDCARD_IPV4,
  WILDCARD_IPV6,
} from "./dual-stack.js";

/** Istio's catch-all cluster names (util.BlackHoleCluster, PassthroughCluster, InboundPassthroughCluster). */
export const BLACKHOLE_CLUSTER = "BlackHoleCluster";
export const PASSTHROUGH_CLUSTER = "PassthroughCluster";
export const INBOUND_PASSTHROUGH_CLUSTER = "InboundPassthroughCluster";

/** MeshConfig's dnsRefreshRate default (60 s). */
const MESH_DNS_REFRESH_RATE = { seconds: 60, nanos: 0 };
/** istiod's maxSecondsValue: "never" for an ORIGINAL_DST cluster's cleanup interval. */
const MAX_DURATION_SECONDS = 9223372035;
const PASSTHROUGH_IDLE_TIMEOUT = { seconds: 300, nanos: 0 };

/** Istio's inbound cluster name: `inbound|<port>||`. */
export function inboundClusterName(port: number): string {
  return `inbound|${port}||`;
}

/**
 * CDS for Envoy sidecars (istiod's BuildClusters for a SidecarProxy), every
 * cluster sorted by name:
 *
 * - for each service in the proxy's SidecarScope and each of its ports
 *   (not UDP; ExternalName aliases have none), `outbound|<port>||<fqdn>` and
 *   one `outbound|<port>|<subset>|<fqdn>` per subset of its DestinationRule,
 *   with the rule's traffic policy (see {@link buildOutboundClusters});
 * - BlackHoleCluster, PassthroughCluster;
 * - `inbound|<port>||` per workload port of the proxy's own services (or of
 *   its Sidecar's ingress listeners), and InboundPassthroughCluster.
 *
 * A wildcard subscription gets all of them; a subscription by name the
 * named ones among them. Outbound clusters are cached by what they depend
 * on: the config version, the DestinationRule chosen for the proxy, the
 * host's service accounts (SANs), and for DNS clusters the host's endpoints
 * and the proxy's IP family and locality; the proxy's namespace does not
 * enter, so proxies of all namespaces share them.
 */
export function generateSidecarClusters(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy } = context;
  const scope = sidecarScope(push, proxy);
  const resources = [...outboundClusters(context, scope)];
  const family = ipMode(proxy);
  resources.push(
    cached(context, cacheKey("cds-sidecar-static", BLACKHOLE_CLUSTER), () =>
      resource(buildBlackHoleCluster(), []),
    ),
    cached(context, cacheKey("cds-sidecar-static", PASSTHROUGH_CLUSTER), () =>
      resource(buildPassthroughCluster(), []),
    ),
    cached(context, cacheKey("cds-sidecar-static", INBOUND_PASSTHROUGH_CLUSTER, family), () =>
      resource(buildInboundPassthroughCluster(proxy), []),
    ),
    ...buildInboundClusters(push, proxy, scope),
  );
  const wanted = watched === "*" || watched.has("*") ? undefined : watched;
  const seen = new Set<string>();
  return resources
    .filter((r) => (wanted === undefined || wanted.has(r.name)) && !seen.has(r.name) && seen.add(r.name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/**
 * When sidecar CDS must be re-run: on any full push, and on endpoint changes
 * (SANs follow the endpoints' service accounts, DNS clusters carry their
 * endpoints, inbound clusters follow the proxy's own). Unchanged clusters
 * come from the cache.
 */
export function sidecarClustersNeedPush(change: PushChange, _watched: WatchedNames): boolean {
  return change.full || change.endpointHosts.size > 0;
}

const outboundMemo = new WeakMap<
  PushContext,
  WeakMap<SidecarScope, Map<string, readonly GeneratedResource[]>>
>();

/**
 * The outbound clusters of a scope, memoized per snapshot, scope and what
 * else of the proxy they read (its labels where DestinationRules select by
 * them, its IP family and locality for DNS clusters): the proxies of a
 * deployment share one list per push instead of looking up every cluster.
 */
function outboundClusters(context: GenerationContext, scope: SidecarScope): readonly GeneratedResource[] {
  const { push, proxy } = context;
  let byScope = outboundMemo.get(push);
  if (!byScope) {
    byScope = new WeakMap();
    outboundMemo.set(push, byScope);
  }
  let byVariant = byScope.get(scope);
  if (!byVariant) {
    byVariant = new Map();
    byScope.set(scope, byVariant);
  }
  // A router's clusters differ from a sidecar's (credentialName, see buildOutboundCluster).
  const variant = `${ruleLabelsKey(push, proxy)}\u0000${ipMode(proxy)}\u0000${localityKey(proxy)}\u0000${proxy.kind}`;
  let list = byVariant.get(variant);
  if (!list) {
    const built: GeneratedResource[] = [];
    for (const service of scope.services) {
      if (isAlias(service)) continue;
      const rule = sidecarDestinationRule(push, proxy, service);
      for (const port of service.ports) {
        if (port.protocol === Protocol.PROTOCOL_UDP) continue;
        built.push(...cachedOutboundClusters(context, service, port, rule));
      }
    }
    list = built;
    byVariant.set(variant, list);
  }
  return list;
}

function cached(context: GenerationContext, key: string, build: () => GeneratedResource): GeneratedResource {
  return context.cache.get(key, build) as GeneratedResource;
}

function resource(cluster: Cluster, sources: readonly ConfigRef[]): GeneratedResource {
  return { name: cluster.name, resource: packAny(TypeUrl.Cluster, Cluster, cluster), sources };
}

const OUTBOUND_CLUSTER: CacheDependencies = { class: "sidecar-cds" };

function cachedOutboundClusters(
  context: GenerationContext,
  service: Service,
  port: ServicePort,
  rule: TypedConfig<DestinationRule> | undefined,
): GeneratedResource[] {
  const { push, proxy } = context;
  const type = discoveryType(service);
  const dependsOnEndpoints =
    type !== Cluster_DiscoveryType.EDS || usesPassthrough(service, rule?.spec.trafficPolicy);
  const key = (subset: string) =>
    cacheKey(
      "cds-sidecar",
      outboundClusterName(port.number, subset, service.hostname),
      rule ? `${rule.ref.namespace}/${rule.ref.name}` : "-",
      push.serviceAccountVersion(service.hostname),
      dependsOnEndpoints ? (push.endpointVersions.get(service.hostname) ?? "none") : "",
      dependsOnEndpoints ? `${ipMode(proxy)}/${localityKey(proxy)}` : "",
      proxy.kind === "router" ? "router" : "",
    );
  const names = ["", ...(rule?.spec.subsets ?? []).map((subset) => subset.name)];
  // Built together (as istiod does), cached one by one: a miss on any rebuilds the lot.
  let built: Map<string, GeneratedResource | null> | undefined;
  const out: GeneratedResource[] = [];
  for (const subset of names) {
    const found = context.cache.get(
      key(subset),
      () => {
        built ??= new Map(
          buildOutboundClusters(push, proxy, service, port, rule).map((entry) => [
            entry.subset,
            entry.resource,
          ]),
        );
        return built.get(subset) ?? null;
      },
      OUTBOUND_CLUSTER,
    );
    if (found) out.push(found);
  }
  return out;
}

/** One outbound cluster of a service port, by subset name ("" for the default cluster). */
interface OutboundCluster {
  readonly subset: string;
  readonly resource: GeneratedResource | null;
}

/**
 * istiod's buildOutboundClusters for one service port: the default cluster
 * `outbound|<port>||<fqdn>` and, when the DestinationRule has subsets, one
 * cluster per subset (its labels select the endpoints; its policy merged
 * over the rule's). Each cluster:
 *
 * - type from the service's resolution: EDS over ADS (static registry
 *   entries), STRICT_DNS (DNS), LOGICAL_DNS (DNS_ROUND_ROBIN), ORIGINAL_DST
 *   (PASSTHROUGH, or a PASSTHROUGH load balancer); DNS clusters carry their
 *   endpoints inline, and one without endpoints is not built;
 * - `alt_stat_name` `<name>;`, the mesh connect timeout, circuit breakers,
 *   load balancer, outlier detection, HTTP protocol options, upstream TLS as
 *   {@link applyTrafficPolicy} applies them;
 * - metadata `istio`: the service (`host`, `name`, `namespace`), the
 *   DestinationRule (`config`), the subset, `alpn_override: "false"` under
 *   SIMPLE/MUTUAL TLS, `external: true` on a MESH_EXTERNAL default cluster.
 */
export function buildOutboundClusters(
  push: PushContext,
  proxy: MeshProxy,
  service: Service,
  port: ServicePort,
  rule: TypedConfig<DestinationRule> | undefined,
): OutboundCluster[] {
  const sources = rule ? [rule.ref] : [];
  const out: OutboundCluster[] = [];
  const defaultCluster = buildOutboundCluster(push, proxy, service, port, rule, undefined);
  out.push({ subset: "", resource: defaultCluster ? resource(defaultCluster, sources) : null });
  for (const subset of rule?.spec.subsets ?? []) {
    const cluster = buildOutboundCluster(push, proxy, service, port, rule, subset);
    out.push({ subset: subset.name, resource: cluster ? resource(cluster, sources) : null });
  }
  return out;
}

function buildOutboundCluster(
  push: PushContext,
  proxy: MeshProxy,
  service: Service,
  port: ServicePort,
  rule: TypedConfig<DestinationRule> | undefined,
  subset: Subset | undefined,
): Cluster | null {
  const subsetName = subset?.name ?? "";
  const name = outboundClusterName(port.number, subsetName, service.hostname);
  let type = discoveryType(service);
  if (subset?.trafficPolicy?.loadBalancer?.simple === LoadBalancerSettings_SimpleLB.PASSTHROUGH)
    type = Cluster_DiscoveryType.ORIGINAL_DST;
  const draft: ClusterDraft = { name, type, commonLbConfig: {}, altStatName: `${name};` };
  if (type === Cluster_DiscoveryType.STRICT_DNS || type === Cluster_DiscoveryType.LOGICAL_DNS) {
    Object.assign(draft, dnsSettings(proxy));
    let endpoints = localityLbEndpoints(
      localityGroups(
        push,
        { locality: proxy.locality, labels: {} },
        {
          service,
          port,
          subset: subsetName,
          rule: rule?.spec,
          use: "cds",
        },
      ),
    ).filter((group) => group.lbEndpoints.length > 0);
    // Envoy takes exactly one endpoint for LOGICAL_DNS (it resolves that name and uses the first address).
    if (type === Cluster_DiscoveryType.LOGICAL_DNS && endpoints[0])
      endpoints = [{ ...endpoints[0], lbEndpoints: endpoints[0].lbEndpoints.slice(0, 1) }];
    if (endpoints.length === 0) return null;
    draft.loadAssignment = { clusterName: name, endpoints };
  }
  const wrapper = new ClusterWrapper(draft);
  setUpstreamProtocol(wrapper, port);
  const istio: Record<string, unknown> = { services: [serviceMetadata(service)] };
  draft.metadata = { filterMetadata: { istio } };

  if (!subset && supportsDrainingEndpoints(service)) {
    draft.commonLbConfig = {
      ...draft.commonLbConfig,
      overrideHostStatus: {
        statuses: [
          EnvoyHealthStatus.HEALTHY,
          EnvoyHealthStatus.DRAINING,
          EnvoyHealthStatus.UNKNOWN,
          EnvoyHealthStatus.DEGRADED,
        ],
      },
    };
  }

  const policy = clusterPolicy(rule?.spec, subsetName, port.number);
  applyTrafficPolicy(wrapper, {
    policy,
    port,
    direction: "outbound",
    tls: {
      sni: istioMtlsSni(port.number, subsetName, service.hostname),
      meshExternal: service.meshExternal,
      serviceMtlsMode: serviceMtlsMode(
        push,
        service,
        port,
        subset ? subset.trafficPolicy : rule?.spec.trafficPolicy,
      ),
      serviceAccounts: push.serviceAccountsOf(service.hostname),
      // istiod refuses a credentialName of a rule without workloadSelector to sidecars only: gateways take it.
      ruleHasSelector: rule?.spec.workloadSelector !== undefined || proxy.kind === "router",
      external: service.registry === "serviceentry",
    },
  });
  if (draft.type === Cluster_DiscoveryType.EDS) {
    draft.edsClusterConfig = {
      serviceName: name,
      edsConfig: {
        ads: {},
        initialFetchTimeout: { seconds: 0, nanos: 0 },
        resourceApiVersion: ApiVersion.V3,
      },
    };
  }
  if (!subset && service.meshExternal) istio.external = true;
  if (rule) {
    istio.config = `/apis/networking.istio.io/v1/namespaces/${rule.ref.namespace}/destination-rule/${rule.ref.name}`;
    if (subset) istio.subset = subset.name;
    const mode = policy?.tls?.mode;
    if (mode === ClientTLSSettings_TLSmode.SIMPLE || mode === ClientTLSSettings_TLSmode.MUTUAL)
      istio.alpn_override = "false";
  }
  return wrapper.build();
}

/** istiod's convertResolution for a sidecar. */
function discoveryType(service: Service): Cluster_DiscoveryType {
  switch (service.resolution) {
    case Resolution.RESOLUTION_DNS:
      return Cluster_DiscoveryType.STRICT_DNS;
    case Resolution.RESOLUTION_DNS_ROUND_ROBIN:
      return Cluster_DiscoveryType.LOGICAL_DNS;
    case Resolution.RESOLUTION_PASSTHROUGH:
      return Cluster_DiscoveryType.ORIGINAL_DST;
    default:
      return Cluster_DiscoveryType.EDS;
  }
}

function usesPassthrough(service: Service, policy: TrafficPolicy | undefined): boolean {
  return (
    service.resolution === Resolution.RESOLUTION_PASSTHROUGH ||
    policy?.loadBalancer?.simple === LoadBalancerSettings_SimpleLB.PASSTHROUGH ||
    policy?.portLevelSettings.some(
      (settings) => settings.loadBalancer?.simple === LoadBalancerSettings_SimpleLB.PASSTHROUGH,
    ) === true
  );
}

/**
 * istiod's PushContext.BestEffortInferServiceMTLSMode, which decides auto
 * mTLS: unknown for MESH_EXTERNAL services; for passthrough traffic
 * DISABLE unless every endpoint of the port is labelled
 * `security.istio.io/tlsMode: istio` (and there is one); otherwise the
 * namespace-wide (else mesh-wide) PeerAuthentication of the service's
 * namespace, PERMISSIVE when there is none.
 */
function serviceMtlsMode(
  push: PushContext,
  service: Service,
  port: ServicePort,
  policy: TrafficPolicy | undefined,
): MtlsMode | "UNKNOWN" {
  if (service.meshExternal) return "UNKNOWN";
  if (
    service.resolution === Resolution.RESOLUTION_PASSTHROUGH ||
    policy?.loadBalancer?.simple === LoadBalancerSettings_SimpleLB.PASSTHROUGH
  ) {
    const endpoints = (push.endpointsByHost.get(service.hostname) ?? []).filter(
      (endpoint) => Object.keys(endpoint.ports).length === 0 || endpoint.ports[port.name] !== undefined,
    );
    if (endpoints.length === 0) return "DISABLE";
    if (endpoints.some((endpoint) => endpoint.labels[TLS_MODE_LABEL] !== "istio")) return "DISABLE";
  }
  return push.peerAuthenticationFor(service.namespace, {}).mode;
}

function supportsDrainingEndpoints(service: Service): boolean {
  return Boolean(service.labels[PERSISTENT_SESSION_LABEL] || service.labels[PERSISTENT_SESSION_HEADER_LABEL]);
}

/** The service entry of a cluster's `istio` metadata; a ServiceEntry's name is its host, as in istiod. */
function serviceMetadata(service: Pick<Service, "hostname" | "name" | "namespace" | "registry">) {
  return {
    host: service.hostname,
    name: service.registry === "serviceentry" ? service.hostname : service.name,
    namespace: service.namespace,
  };
}

/**
 * istiod's DNS cluster settings: lookup family from the proxy's IPs (./dual-stack.ts), the
 * mesh's refresh rate, DNS TTLs respected. istiod also names the c-ares
 * resolver with udp_max_queries 100 (typed_dns_resolver_config); the pinned
 * Envoy protos require resolvers in that message, which istiod leaves out,
 * so it is omitted: Envoy's default resolver is c-ares anyway. dns_jitter is
 * not in the pinned protos either.
 */
function dnsSettings(proxy: MeshProxy): Partial<ClusterDraft> {
  return {
    dnsLookupFamily: dnsLookupFamily(proxy),
    dnsRefreshRate: MESH_DNS_REFRESH_RATE,
    respectDnsTtl: true,
  };
}

function localityKey(proxy: MeshProxy): string {
  return `${proxy.locality.region}/${proxy.locality.zone}/${proxy.locality.subzone}`;
}

/** BlackHoleCluster: STATIC without endpoints, where REGISTRY_ONLY and unmatched routes send traffic. */
export function buildBlackHoleCluster(): Cluster {
  return new ClusterWrapper({
    name: BLACKHOLE_CLUSTER,
    type: Cluster_DiscoveryType.STATIC,
    connectTimeout: { ...MESH_CONNECT_TIMEOUT },
    lbPolicy: Cluster_LbPolicy.ROUND_ROBIN,
    altStatName: `${BLACKHOLE_CLUSTER};`,
  }).build();
}

/**
 * PassthroughCluster: ORIGINAL_DST (CLUSTER_PROVIDED), for ALLOW_ANY traffic
 * to unknown destinations; the downstream's HTTP protocol with a 5-minute
 * idle timeout; default circuit breakers.
 */
export function buildPassthroughCluster(): Cluster {
  const wrapper = new ClusterWrapper({
    name: PASSTHROUGH_CLUSTER,
    type: Cluster_DiscoveryType.ORIGINAL_DST,
    connectTimeout: { ...MESH_CONNECT_TIMEOUT },
    lbPolicy: Cluster_LbPolicy.CLUSTER_PROVIDED,
    altStatName: `${PASSTHROUGH_CLUSTER};`,
  });
  applyConnectionPool(new ClusterWrapper(wrapper.cluster), { tcp: undefined, http: undefined });
  wrapper.http = {
    commonHttpProtocolOptions: { idleTimeout: PASSTHROUGH_IDLE_TIMEOUT },
    useDownstreamProtocolConfig: { httpProtocolOptions: {}, http2ProtocolOptions: {} },
  };
  return wrapper.build();
}

/**
 * InboundPassthroughCluster: the PassthroughCluster under another name (istiod
 * keeps its alt_stat_name), sending from the proxy's passthrough source
 * addresses so that iptables does not capture it again.
 */
export function buildInboundPassthroughCluster(proxy: MeshProxy): Cluster {
  const cluster = buildPassthroughCluster();
  cluster.name = INBOUND_PASSTHROUGH_CLUSTER;
  cluster.filters = [];
  cluster.upstreamBindConfig = passthroughBindConfig(proxy);
  return cluster;
}

/**
 * The upstream bind config of inbound traffic: the first of the proxy's
 * passthrough source addresses (`127.0.0.6`, `::6` on an IPv6-only proxy),
 * `::6` as an extra source address on a dual-stack one (Envoy sends from
 * the one of the destination's family; see ./dual-stack.ts).
 */
function passthroughBindConfig(proxy: MeshProxy): NonNullable<Cluster["upstreamBindConfig"]> {
  const [source, ...extra] = passthroughBindAddresses(proxy);
  return {
    sourceAddress: socketAddress(source, 0),
    freebind: undefined,
    socketOptions: [],
    extraSourceAddresses: extra.map((address) => ({
      address: socketAddress(address, 0),
      socketOptions: undefined,
    })),
    additionalSourceAddresses: [],
    localAddressSelector: undefined,
  };
}

function socketAddress(address: string, portValue: number) {
  return {
    protocol: 0,
    address,
    portValue,
    namedPort: undefined,
    resolverName: "",
    ipv4Compat: false,
    networkNamespaceFilepath: "",
  } as NonNullable<NonNullable<Cluster["upstreamBindConfig"]>["sourceAddress"]>;
}

/**
 * The inbound clusters of a sidecar (istiod's buildInboundClusters): with a
 * Sidecar that has ingress listeners, one per listener; otherwise one per
 * workload port of the proxy's services (the first service of a port gives
 * its protocol and policy), none when INTERCEPTION_MODE is NONE. Under the
 * mesh default inboundTrafficPolicy (PASSTHROUGH) such a cluster is
 * ORIGINAL_DST to the address the connection was for, sent from 127.0.0.6.
 */
function buildInboundClusters(push: PushContext, proxy: MeshProxy, scope: SidecarScope): GeneratedResource[] {
  const sidecar = scope.sidecar;
  const targets = serviceTargets(push, proxy);
  if (sidecar && sidecar.spec.ingress.length > 0) {
    return sidecar.spec.ingress.flatMap((listener) => {
      const cluster = buildIngressListenerCluster(push, proxy, scope, listener, targets);
      return cluster ? [resource(cluster.cluster, cluster.sources)] : [];
    });
  }
  if (proxy.metadata.INTERCEPTION_MODE === "NONE") return [];
  const byTargetPort = new Map<number, ServiceTarget[]>();
  for (const target of targets)
    byTargetPort.set(target.targetPort, [...(byTargetPort.get(target.targetPort) ?? []), target]);
  return [...byTargetPort].map(([targetPort, group]) => {
    const built = buildInboundCluster(push, proxy, scope, targetPort, "", group);
    return resource(built.cluster, built.sources);
  });
}

/**
 * istiod's buildInboundCluster: `inbound|<port>||`, STATIC to bind:<target
 * port> when an address is given, else ORIGINAL_DST (never cleaned up); the
 * service port's upstream protocol; telemetry metadata of the services on
 * that port; the connection pool of the service's DestinationRule
 * (port-level for the service port), replaced by the Sidecar's inbound
 * connection pool for the port; the passthrough source addresses
 * (127.0.0.6) unless sending to localhost.
 */
function buildInboundCluster(
  push: PushContext,
  proxy: MeshProxy,
  scope: SidecarScope,
  clusterPort: number,
  bind: string,
  targets: readonly ServiceTarget[],
): { cluster: Cluster; sources: ConfigRef[] } {
  const primary = targets[0] as ServiceTarget;
  const name = inboundClusterName(clusterPort);
  const draft: ClusterDraft = {
    name,
    type: bind ? Cluster_DiscoveryType.STATIC : Cluster_DiscoveryType.ORIGINAL_DST,
    commonLbConfig: {},
    altStatName: `${name};`,
  };
  if (bind) {
    const address = bind.startsWith("unix://")
      ? { pipe: { path: bind.slice("unix://".length), mode: 0 } }
      : { socketAddress: { address: bind, portValue: primary.targetPort } };
    draft.loadAssignment = { clusterName: name, endpoints: [{ lbEndpoints: [{ endpoint: { address } }] }] };
  }
  const wrapper = new ClusterWrapper(draft);
  setUpstreamProtocol(wrapper, primary.port);
  const istio: Record<string, unknown> = {};
  if (!primary.service.meshExternal) {
    const seen = new Set<string>();
    istio.services = targets
      .filter((target) => target.port.number === primary.port.number)
      .filter((target) => !seen.has(target.service.hostname) && seen.add(target.service.hostname))
      .map((target) => serviceMetadata(target.service));
    draft.metadata = { filterMetadata: { istio } };
  }
  if (!bind) draft.cleanupInterval = { seconds: MAX_DURATION_SECONDS, nanos: 0 };

  const sources: ConfigRef[] = scope.sidecar ? [scope.sidecar.ref] : [];
  // Inbound, istiod ignores rules with a workloadSelector.
  const rule = primary.service.meshExternal
    ? undefined
    : sidecarDestinationRule(push, { namespace: proxy.namespace, labels: {} }, primary.service);
  let policy = rule?.spec.trafficPolicy
    ? portLevelPolicy(rule.spec.trafficPolicy, primary.port.number).policy
    : undefined;
  if (rule?.spec.trafficPolicy) {
    sources.push(rule.ref);
    if (draft.metadata)
      istio.config = `/apis/networking.istio.io/v1/namespaces/${rule.ref.namespace}/destination-rule/${rule.ref.name}`;
  }
  const sidecarPool = inboundConnectionPool(scope, clusterPort);
  if (sidecarPool) policy = { ...(policy ?? {}), connectionPool: sidecarPool } as typeof policy;
  applyTrafficPolicy(wrapper, { policy, port: primary.port, direction: "inbound" });
  if (bind !== LOCALHOST_IPV4 && bind !== LOCALHOST_IPV6)
    draft.upstreamBindConfig = passthroughBindConfig(proxy);
  return { cluster: wrapper.build(), sources };
}

/** istiod's SidecarScope.InboundConnectionPoolForPort: the ingress listener's pool for port, else the Sidecar's. */
function inboundConnectionPool(scope: SidecarScope, port: number) {
  const sidecar = scope.sidecar?.spec;
  if (!sidecar) return undefined;
  const listener = sidecar.ingress.find(
    (candidate) => candidate.port?.number === port && candidate.connectionPool,
  );
  return listener?.connectionPool ?? sidecar.inboundConnectionPool;
}

/**
 * istiod's buildInboundClustersFromSidecar for one ingress listener: the
 * cluster `inbound|<listener port>||` to its defaultEndpoint: `127.0.0.1:<p>`
 * (localhost), `0.0.0.0:<p>` (the proxy's IPv4 address), `[::1]:<p>`,
 * `[::]:<p>`, `unix://<path>`; any other (or none) means ORIGINAL_DST. The
 * service is the proxy's service whose target port is the listener's, else
 * a placeholder `<sidecar>.<namespace>` without telemetry.
 */
function buildIngressListenerCluster(
  push: PushContext,
  proxy: MeshProxy,
  scope: SidecarScope,
  listener: IstioIngressListener,
  targets: readonly ServiceTarget[],
): { cluster: Cluster; sources: ConfigRef[] } | undefined {
  const number = listener.port?.number;
  if (!number) return undefined;
  let bind = "";
  let targetPort = 0;
  const endpoint = listener.defaultEndpoint;
  if (endpoint.startsWith("unix://")) {
    bind = endpoint;
  } else if (endpoint) {
    const colon = endpoint.lastIndexOf(":");
    const host = endpoint.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
    targetPort = Number(endpoint.slice(colon + 1));
    if (colon < 0 || !Number.isInteger(targetPort) || targetPort <= 0) return undefined;
    const ipv4 = proxy.instanceIps.find((ip) => isIP(ip) === 4);
    const ipv6 = proxy.instanceIps.find((ip) => isIP(ip) === 6);
    // Localhost of the family asked for if the proxy has it, else of the one it has.
    const localhosts = localhostAddresses(proxy);
    if (host === WILDCARD_IPV4) bind = ipv4 ?? LOCALHOST_IPV4;
    else if (host === WILDCARD_IPV6) bind = ipv6 ?? LOCALHOST_IPV6;
    else if (host === LOCALHOST_IPV4)
      bind = localhosts.includes(LOCALHOST_IPV4) ? LOCALHOST_IPV4 : LOCALHOST_IPV6;
    else if (host === LOCALHOST_IPV6)
      bind = localhosts.includes(LOCALHOST_IPV6) ? LOCALHOST_IPV6 : LOCALHOST_IPV4;
  }
  const listenPort: ServicePort = {
    name: listener.port?.name ?? "",
    number,
    targetPort,
    protocol: parseProtocol(listener.port?.protocol ?? ""),
  };
  const sidecarName = scope.sidecar?.ref.name ?? "";
  const real = targets.find((target) => target.targetPort === number)?.service;
  const service: Service = real ?? {
    hostname: `${sidecarName}.${scope.sidecar?.ref.namespace ?? proxy.namespace}`,
    namespace: scope.sidecar?.ref.namespace ?? proxy.namespace,
    name: sidecarName,
    addresses: [],
    ports: [],
    labels: {},
    selector: {},
    exportTo: [],
    resolution: Resolution.RESOLUTION_UNSPECIFIED,
    meshExternal: true,
    externalName: "",
    registry: "",
  };
  return buildInboundCluster(push, proxy, scope, number, bind, [{ service, port: listenPort, targetPort }]);
}
