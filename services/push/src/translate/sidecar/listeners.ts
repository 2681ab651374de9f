import { isIP } from "node:net";
import { debuglog } from "node:util";
import { hostMatches, resolveHost } from "@sextant/model";
import { type ConfigRef, packAny, type Service, type ServicePort } from "@sextant/proto";
import { HttpConnectionManager, Listener, TypeUrl } from "@sextant/proto/envoy";
import { TrafficDirection } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import type { Filter, ListenerFilter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import { HttpConnectionManager_PathWithEscapedSlashesAction as EscapedSlashes } from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import type {
  L4MatchAttributes,
  RouteDestination,
  TLSMatchAttributes,
  VirtualService,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { Protocol, Resolution } from "@sextant/proto/gen/sextant/mesh/v1/service";
import type { CacheDependencies } from "../../cache/dependencies.js";
import { labelsKey, sourceLabelsSelection } from "../../cache/selection.js";
import { cacheKey } from "../../cache/xds-cache.js";
import { aliasesByTarget, clusterHost, isAlias } from "../../model/aliases.js";
import { usesAutoAllocatedAddresses } from "../../model/auto-allocation.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { selectorMatches } from "../../model/security.js";
import { type SidecarScope, sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource, TypedConfig, WatchedNames } from "../../model/types.js";
import { listenerTelemetry, withTelemetry } from "../common/telemetry.js";
import { type ListenerExtensions, listenerExtensions } from "../extension/wasm-filters.js";
import type { GenerationContext } from "../generator.js";
import { outboundClusterName } from "../names.js";
import { withAutoAllocatedAddresses } from "./auto-addresses.js";
import {
  additionalAddresses,
  addressesOfProxyFamilies,
  ipMode,
  isWildcardAddress,
  WILDCARD_IPV4,
  wildcardAddresses,
} from "./dual-stack.js";
import {
  BLACKHOLE_CLUSTER,
  HCM_FILTER_NAME,
  httpInspectorFilter,
  PASSTHROUGH_CLUSTER,
  tcpProxyFilter,
  tlsInspectorFilter,
  trailingHttpFilters,
  weightedTcpProxyFilter,
} from "./filters.js";
import { buildVirtualInbound, VIRTUAL_INBOUND, virtualInboundKey } from "./inbound.js";
import { staticListenerPorts, VIRTUAL_INBOUND_PORT, VIRTUAL_OUTBOUND_PORT } from "./proxy-ports.js";
import { alternativeHosts, isHttpProtocol } from "./routes.js";

/** The outbound capture listener's name (iptables redirects outbound traffic there; its port is in ./proxy-ports.ts). */
export const VIRTUAL_OUTBOUND = "virtualOutbound";

const ZERO = { seconds: 0, nanos: 0 };

/** Why a listener or chain is left out or narrowed; on with NODE_DEBUG=sextant-listeners. */
const debug = debuglog("sextant-listeners");

/**
 * Listeners for Envoy sidecars (LDS; Envoy subscribes with the wildcard):
 * `virtualOutbound` (15001), `virtualInbound` (15006), and the outbound
 * listeners of the proxy's scope (see outboundPlans). Sorted by name; a
 * by-name subscription gets those of them it names. Health (15021) and
 * Prometheus (15090) listeners are static in the agent's Envoy bootstrap,
 * as in Istio's, so they are not served here.
 *
 * Cache keys: outbound listeners by the proxy's namespace, Sidecar, the
 * VirtualService source labels and WasmPlugins that select it, and the
 * listener's plan (which services share it, its binds: endpoints of
 * headless services and the proxy's IP family decide those), so that the
 * proxies of a namespace share them; virtualInbound by namespace, labels
 * and the proxy's inbound ports (which follow endpoints, not config).
 * Outbound ones outlive changes that cannot reach them (cache/dependencies.ts).
 */
export function generateSidecarListeners(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy, cache } = context;
  const scope = sidecarScope(push, proxy);
  const sidecar = scope.sidecar ? `${scope.sidecar.ref.namespace}/${scope.sidecar.ref.name}` : "";
  const selection = sourceLabelsSelection(push, proxy);
  const plans = outboundPlans(push, proxy);
  const telemetry = listenerTelemetry(push, proxy);
  const wanted = (name: string) => watched === "*" || watched.has(name);
  const out: GeneratedResource[] = [];
  const names = [VIRTUAL_INBOUND, VIRTUAL_OUTBOUND, ...plans.keys()].sort();
  for (const name of names) {
    if (!wanted(name)) continue;
    let resource: GeneratedResource | null;
    if (name === VIRTUAL_INBOUND) {
      const ports = virtualInboundKey(push, proxy);
      resource = cache.get(
        cacheKey("lds-sidecar-inbound", proxy.namespace, labelsKey(proxy.labels), ports, telemetry.key),
        () => {
          const inbound = buildVirtualInbound(push, proxy);
          return inbound && withTelemetry(inbound, telemetry, proxy.kind);
        },
      );
    } else if (name === VIRTUAL_OUTBOUND) {
      const binds = wildcardAddresses(proxy);
      resource = cache.get(
        cacheKey("lds-sidecar", scope.outboundTrafficPolicy, sidecar, name, binds.join(","), telemetry.key),
        () =>
          withTelemetry(
            buildVirtualOutbound(scope.outboundTrafficPolicy, scope.sidecar?.ref, binds),
            telemetry,
            proxy.kind,
          ),
        OUTBOUND_LISTENER,
      );
    } else {
      const plan = plans.get(name)!;
      const extensions = listenerExtensions(push, proxy, { class: "outbound", port: plan.port });
      resource = cache.get(
        cacheKey(
          "lds-sidecar",
          proxy.namespace,
          sidecar,
          selection,
          extensions.sources.map((ref) => `${ref.namespace}/${ref.name}`).join(","),
          planKey(plan),
          telemetry.key,
        ),
        () =>
          withTelemetry(
            buildOutboundListener(plan, scope.outboundTrafficPolicy, scope.sidecar?.ref, extensions),
            telemetry,
            proxy.kind,
          ),
        OUTBOUND_LISTENER,
      );
    }
    if (resource) out.push(resource);
  }
  return out;
}

const OUTBOUND_LISTENER: CacheDependencies = { class: "sidecar-lds" };

/**
 * Istio's `virtualOutbound` on the proxy's wildcard address (`::` on an
 * IPv6-only proxy), port 15001: use_original_dst hands each connection to
 * the listener of its original destination; traffic addressed to 15001
 * itself goes to BlackHoleCluster (chain `virtualOutbound-blackhole`), what
 * matches no listener to the chain `virtualOutbound-catchall-tcp` (tcp_proxy
 * to PassthroughCluster under ALLOW_ANY, BlackHoleCluster under
 * REGISTRY_ONLY), a chain without a match, as Istio builds it (no default
 * chain). A dual-stack proxy's binds `::` as an additional address (as
 * Istio's with ISTIO_DUAL_STACK: see ./dual-stack.ts), so that IPv6
 * connections iptables redirects find it.
 */
export function buildVirtualOutbound(
  policy: "ALLOW_ANY" | "REGISTRY_ONLY",
  sidecar: ConfigRef | undefined,
  binds: readonly [string, ...string[]],
): GeneratedResource {
  const [address, ...extraBinds] = binds;
  const listener = Listener.fromPartial({
    name: VIRTUAL_OUTBOUND,
    address: { socketAddress: { address, portValue: VIRTUAL_OUTBOUND_PORT } },
    additionalAddresses: additionalAddresses(extraBinds, VIRTUAL_OUTBOUND_PORT),
    useOriginalDst: true,
    trafficDirection: TrafficDirection.OUTBOUND,
    filterChains: [
      {
        name: "virtualOutbound-blackhole",
        filterChainMatch: { destinationPort: VIRTUAL_OUTBOUND_PORT },
        filters: [tcpProxyFilter(BLACKHOLE_CLUSTER)],
      },
      {
        name: "virtualOutbound-catchall-tcp",
        filters: [tcpProxyFilter(policy === "REGISTRY_ONLY" ? BLACKHOLE_CLUSTER : PASSTHROUGH_CLUSTER)],
      },
    ] as never,
  });
  return {
    name: VIRTUAL_OUTBOUND,
    resource: packAny(TypeUrl.Listener, Listener, listener),
    sources: sidecar ? [sidecar] : [],
  };
}

/** How a listener treats a port's traffic (Istio's ListenerProtocol): HTTP, TCP, or sniffed (auto). */
type ListenerProtocol = "http" | "tcp" | "auto";

/**
 * Istio's ModelProtocolToListenerProtocol: HTTP, HTTP2, gRPC and gRPC-Web
 * ports are HTTP; an unnamed or unknown-protocol port (UNSPECIFIED, Istio's
 * "unsupported") is sniffed; UDP gets no listener; every other port is TCP.
 */
function listenerProtocolOf(protocol: Protocol): ListenerProtocol | undefined {
  if (isHttpProtocol(protocol)) return "http";
  if (protocol === Protocol.PROTOCOL_UNSPECIFIED) return "auto";
  if (protocol === Protocol.PROTOCOL_UDP) return undefined;
  return "tcp";
}

/** Istio's Protocol.IsTCP: the protocols proxied as TCP (a sniffed port is neither TCP nor HTTP). */
function isTcpProtocol(protocol: Protocol): boolean {
  return listenerProtocolOf(protocol) === "tcp";
}

/** Istio's Protocol.IsTLS. */
function isTlsProtocol(protocol: Protocol): boolean {
  return protocol === Protocol.PROTOCOL_TLS || protocol === Protocol.PROTOCOL_HTTPS;
}

/** The ALPN values the HTTP inspector sets for plaintext HTTP (HTTP/1.0 only when Istio's HTTP10 is on). */
const PLAINTEXT_HTTP_ALPNS = ["http/1.1", "h2c"];
const RAW_BUFFER = "raw_buffer";
/** The name of the default chain of an outbound listener none of whose chains matches everything. */
const PASSTHROUGH_FILTER_CHAIN = "PassthroughFilterChain";

/** Where a TCP chain proxies to: one cluster, or weighted clusters of a route with several destinations. */
export type TcpTarget =
  | { cluster: string }
  | { statPrefix: string; clusters: Array<{ name: string; weight: number }> };

/** One filter chain of an outbound listener, before it is built (Istio's filterChainOpts). */
interface ChainPlan {
  sniHosts: string[];
  cidrs: string[];
  applicationProtocols: string[];
  transportProtocol: string;
  /** An HCM chain: its RDS name and the port protocol that created it (grpc-web adds its filter). */
  http?: { rds: string; protocol: Protocol };
  tcp?: TcpTarget;
  /** The VirtualService whose route the chain is. */
  source?: ConfigRef;
  /** Whether the chain names its VirtualService in its metadata (Istio's config info; not on subnet chains). */
  tagged?: boolean;
}

/** One outbound listener being planned (Istio's outboundListenerEntry). */
interface ListenerPlan {
  name: string;
  /** The addresses it binds, primary first (the rest become additional_addresses). */
  binds: string[];
  port: number;
  /** The protocol of the port that created it; UNSPECIFIED once it sniffs (HTTP and TCP chains). */
  protocol: Protocol;
  chains: ChainPlan[];
}

/** One service port to place on a listener (Istio's outboundListenerOpts). */
interface PortRequest {
  service: Service;
  port: ServicePort;
  /** A pod address of a headless service, which the listener binds instead of the service's address. */
  bind?: string;
}

/**
 * The outbound listeners of the proxy's scope by name, as Istio's
 * buildSidecarOutboundListeners places them: every port of every service of
 * the egress listeners, sorted by hostname,
 *
 * - HTTP ports on the wildcard address `0.0.0.0_<port>` (one HCM chain for
 *   every service of the port, by RDS `<port>`), matched on plaintext HTTP
 *   ALPNs so that other traffic on the port falls through;
 * - TCP ports on the service's VIP `<VIP>_<port>`, or on the wildcard for a
 *   service without one (TLS ports then match the hostname's SNI), headless
 *   services one listener per pod address `<podIP>_<port>`;
 * - unnamed and unknown-protocol ports sniffed: their TCP chains and an
 *   HTTP chain matched on the ALPNs the HTTP inspector sets, by RDS
 *   `<hostname>:<port>` (that service's routes alone) on the service's own
 *   address, by RDS `<port>` on the wildcard;
 *
 * several services on one address merging their chains (see addChains), a
 * service port whose listener would bind an address another listener has
 * merging into that one (Envoy rejects two listeners on one address, even
 * if neither binds). A listener on a wildcard address at a port of the
 * proxy's own listeners is not built (see reservedPorts).
 */
const planMemo = new WeakMap<PushContext, WeakMap<SidecarScope, Map<string, Map<string, ListenerPlan>>>>();

/**
 * The outbound listener plans of proxy, shared by the proxies of a snapshot
 * that plan alike: of one scope, selected by the same VirtualService source
 * labels, of the same IP families, static listener ports and use of
 * auto-allocated addresses, and among the endpoints of headless services
 * (whose per-endpoint listeners skip the proxy's own address) at the same
 * addresses, which for all but those endpoints' own pods is none. The
 * plans are read, never changed, by the callers.
 */
function outboundPlans(push: PushContext, proxy: MeshProxy): Map<string, ListenerPlan> {
  const scope = sidecarScope(push, proxy);
  let byScope = planMemo.get(push);
  if (!byScope) {
    byScope = new WeakMap();
    planMemo.set(push, byScope);
  }
  let byVariant = byScope.get(scope);
  if (!byVariant) {
    byVariant = new Map();
    byScope.set(scope, byVariant);
  }
  const headless = headlessEndpointAddresses(push);
  const variant = cacheKey(
    sourceLabelsSelection(push, proxy),
    ipMode(proxy),
    [...reservedPorts(proxy)].sort((a, b) => a - b).join(","),
    usesAutoAllocatedAddresses(proxy) ? "auto-allocated" : "",
    proxy.instanceIps.filter((ip) => headless.has(ip)).join(","),
  );
  let plans = byVariant.get(variant);
  if (!plans) {
    plans = planOutbound(push, proxy, scope);
    byVariant.set(variant, plans);
  }
  return plans;
}

const headlessMemo = new WeakMap<PushContext, ReadonlySet<string>>();

/** The endpoint addresses of the services without an address that resolve PASSTHROUGH (what {@link portRequests} binds per endpoint). */
function headlessEndpointAddresses(push: PushContext): ReadonlySet<string> {
  let addresses = headlessMemo.get(push);
  if (!addresses) {
    const found = new Set<string>();
    for (const service of push.services) {
      if (
        service.resolution !== Resolution.RESOLUTION_PASSTHROUGH ||
        serviceAddress(service) !== WILDCARD_IPV4
      )
        continue;
      for (const endpoint of push.endpointsByHost.get(service.hostname) ?? []) found.add(endpoint.address);
    }
    addresses = found;
    headlessMemo.set(push, addresses);
  }
  return addresses;
}

/** A plan's cache-key text, once per plan (shared plans are asked for by every proxy of their variant). */
const planKeys = new WeakMap<ListenerPlan, string>();

function planKey(plan: ListenerPlan): string {
  let key = planKeys.get(plan);
  if (key === undefined) {
    key = JSON.stringify(plan);
    planKeys.set(plan, key);
  }
  return key;
}

function planOutbound(push: PushContext, proxy: MeshProxy, scope: SidecarScope): Map<string, ListenerPlan> {
  const placement: Placement = {
    plans: new Map(),
    owners: new Map(),
    wildcards: wildcardAddresses(proxy),
    reserved: reservedPorts(proxy),
  };
  for (const egress of scope.egressListeners) {
    const virtualServices = egress.virtualServices;
    for (const imported of egress.services) {
      const service = withAutoAllocatedAddresses(push, proxy, imported);
      for (const port of service.ports) {
        for (const request of portRequests(push, proxy, service, port))
          placePort(push, proxy, placement, request, virtualServices);
      }
    }
  }
  return placement.plans;
}

/** The outbound listeners being planned, and what decides where a port goes. */
interface Placement {
  /** The listeners by name. */
  plans: Map<string, ListenerPlan>;
  /** The listener holding each `<address>_<port>`, its additional addresses included. */
  owners: Map<string, ListenerPlan>;
  wildcards: [string, ...string[]];
  reserved: ReadonlySet<number>;
}

/**
 * The ports of the proxy's own wildcard listeners (Istio's
 * conflictWithReservedListener): the outbound and inbound capture ports
 * (virtualOutbound, virtualInbound) and the bootstrap's static listeners
 * (status, Prometheus, secure metrics), from the node's metadata, Istio's
 * 15021 and 15090 when it has none. An outbound listener on a wildcard
 * address at one of them would have the address of one of those, which
 * Envoy rejects ("duplicate address"). Istio checks only ports that bind
 * the wildcard for certain (HTTP ones); a TCP or sniffed port of a service
 * without an address binds it too, so here the check is on the address.
 */
function reservedPorts(proxy: MeshProxy): Set<number> {
  return new Set([
    VIRTUAL_OUTBOUND_PORT,
    VIRTUAL_INBOUND_PORT,
    ...staticListenerPorts(proxy, { assumeDefaults: true, secureMetrics: true }),
  ]);
}

/**
 * The listener requests of one service port: none for an alias (an
 * ExternalName service, whose traffic is its target's: Istio builds it no
 * listener). A headless service (resolution
 * PASSTHROUGH, no address) with a TCP or sniffed port gets one per endpoint
 * of the port with an IP address, the proxy's own excepted, bound to that
 * address; a ServiceEntry without endpoints and without a workload selector
 * falls back to the wildcard (a Kubernetes service without endpoints has no
 * listener: traffic to it could not work).
 */
function portRequests(
  push: PushContext,
  proxy: MeshProxy,
  service: Service,
  port: ServicePort,
): PortRequest[] {
  if (isAlias(service)) return [];
  const protocol = listenerProtocolOf(port.protocol);
  const headless =
    service.resolution === Resolution.RESOLUTION_PASSTHROUGH &&
    serviceAddress(service) === WILDCARD_IPV4 &&
    (protocol === "tcp" || protocol === "auto");
  if (!headless) return [{ service, port }];
  const endpoints = (push.endpointsByHost.get(service.hostname) ?? []).filter(
    (endpoint) => Object.keys(endpoint.ports).length === 0 || endpoint.ports[port.name] !== undefined,
  );
  if (
    service.registry !== "kubernetes" &&
    endpoints.length === 0 &&
    Object.keys(service.selector).length === 0
  )
    return [{ service, port }];
  const requests: PortRequest[] = [];
  for (const endpoint of endpoints) {
    // The proxy's own addresses, all of them: a dual-stack pod is an endpoint per family here (Istio,
    // with ISTIO_DUAL_STACK, makes one endpoint of both and skips it by its first address).
    if (isIP(endpoint.address) === 0 || proxy.instanceIps.includes(endpoint.address)) continue;
    requests.push({ service, port, bind: endpoint.address });
  }
  return requests;
}

/** A service's first VIP, else the wildcard (Istio's GetAddressForProxy). */
function serviceAddress(service: Service): string {
  return service.addresses.find((address) => address && address !== WILDCARD_IPV4) ?? WILDCARD_IPV4;
}

/**
 * The addresses a service's TCP listener binds, primary first (Istio's
 * GetAddressForProxy and GetExtraAddressesForProxy). A Kubernetes service:
 * its cluster IPs of the proxy's families (a dual-stack service's second
 * one an additional address on a dual-stack proxy), else its first. A
 * ServiceEntry: its address; without one the proxy's wildcards (`::` on an
 * IPv6-only proxy, `0.0.0.0` with `::` on a dual-stack one: its addresses
 * may be hostnames or absent, so the proxy's families decide).
 */
function listenAddresses(proxy: MeshProxy, service: Service): [string, ...string[]] {
  const primary = serviceAddress(service);
  if (service.registry === "serviceentry" && primary === WILDCARD_IPV4) return wildcardAddresses(proxy);
  if (service.registry !== "kubernetes") return [primary];
  const [first, ...more] = addressesOfProxyFamilies(proxy, service.addresses);
  return first ? [first, ...more] : [primary];
}

/** Places one service port on its listener, creating it or merging into the one there (Istio's buildSidecarOutboundListener). */
function placePort(
  push: PushContext,
  proxy: MeshProxy,
  placement: Placement,
  request: PortRequest,
  virtualServices: readonly TypedConfig<VirtualService>[],
): void {
  const { plans, owners, wildcards } = placement;
  const { service, port } = request;
  const protocol = listenerProtocolOf(port.protocol);
  if (!protocol) return;
  let binds: string[];
  let cidrs: string[] = [];
  if (request.bind) binds = [request.bind];
  else if (protocol === "http") binds = wildcards;
  else {
    const addresses = listenAddresses(proxy, service);
    if (addresses[0].includes("/")) {
      binds = wildcards;
      cidrs = addresses;
    } else binds = addresses;
  }
  if (placement.reserved.has(port.number) && binds.some(isWildcardAddress)) {
    debug(
      "no listener for %s:%d on %s: the port is one of the proxy's own listeners",
      service.hostname,
      port.number,
      binds.join(","),
    );
    return;
  }
  const name = `${binds[0]}_${port.number}`;
  // The listener with this address, under its own name when the address is another's additional one.
  const current = owners.get(name);
  if (current && current.name !== name)
    debug("%s:%d merges into %s, which binds %s", service.hostname, port.number, current.name, binds[0]);
  const httpChain = (rds: string): ChainPlan => ({
    sniHosts: [],
    cidrs: [],
    applicationProtocols: [...PLAINTEXT_HTTP_ALPNS],
    transportProtocol: RAW_BUFFER,
    http: { rds, protocol: port.protocol },
  });
  const tcpChains = () =>
    tcpChainPlans(push, proxy, request, binds[0]!, cidrs, hostConfigs(service.hostname, virtualServices));

  // What is there already is TCP (one protocol's chains) or sniffing (an HTTP chain on ALPN, TCP chains):
  // HTTP binds the wildcard, where non-HTTP traffic to the port falls through, so HTTP sniffs too.
  const currentIsTcp = current !== undefined && isTcpProtocol(current.protocol);
  let chains: ChainPlan[];
  if (protocol === "http") {
    // A sniffing listener has its HTTP chain, which serves every HTTP service of the port by RDS.
    if (current && !currentIsTcp) return;
    chains = [httpChain(String(port.number))];
  } else if (protocol === "tcp" || (current && !currentIsTcp)) {
    chains = tcpChains();
  } else {
    // A sniffed service on its own VIP has a route configuration of its own.
    const rds = binds[0] === wildcards[0] ? String(port.number) : `${service.hostname}:${port.number}`;
    chains = [...tcpChains(), httpChain(rds)];
  }
  if (!current) {
    const sniffing = protocol !== "tcp";
    // An additional address another listener has already stays with that one; a repeated one is bound once.
    const extraBinds = [...new Set(binds.slice(1))].filter((bind) => {
      const owner = owners.get(`${bind}_${port.number}`);
      if (owner) debug("%s does not bind %s:%d, which %s has", name, bind, port.number, owner.name);
      return !owner && bind !== binds[0];
    });
    const plan: ListenerPlan = {
      name,
      binds: [binds[0]!, ...extraBinds],
      port: port.number,
      protocol: sniffing ? Protocol.PROTOCOL_UNSPECIFIED : port.protocol,
      chains: [],
    };
    plans.set(name, plan);
    for (const bind of plan.binds) owners.set(`${bind}_${port.number}`, plan);
    addChains(plan, chains);
    return;
  }
  // Server-first protocols (MongoDB, MySQL) share a port with nothing else: an inspector would stall them.
  if (!sharesWellKnownPort(port.protocol, current.protocol)) return;
  addChains(current, chains);
  if (currentIsTcp && protocol !== "tcp") current.protocol = Protocol.PROTOCOL_UNSPECIFIED;
}

/** Istio's isConflictWithWellKnownPort: MongoDB and MySQL ports share a listener only with their own protocol. */
function sharesWellKnownPort(incoming: Protocol, existing: Protocol): boolean {
  const serverFirst = (p: Protocol) => p === Protocol.PROTOCOL_MONGO || p === Protocol.PROTOCOL_MYSQL;
  return !((serverFirst(incoming) || serverFirst(existing)) && incoming !== existing);
}

/**
 * Adds chains to a listener, in order, each without what an earlier chain
 * already matches. Envoy files every chain under each combination of the
 * values its match lists (destination range, server name, transport
 * protocol, ALPN: the leaves of its filter chain trie) and rejects the
 * listener if two chains share one, "the same" or "overlapping" matching
 * rules. Istio drops a chain whose match equals an earlier one's
 * (filterChainOpts.conflictsWith), so a repeated or partly shared match
 * (two TCP routes on the same subnets, TLS routes whose SNI lists share a
 * host) still reaches Envoy; here the first chain keeps a combination, as
 * the first route of a VirtualService wins, and a later one keeps what is
 * left of its own: all of it, part of it (one chain, or several when what
 * is left is not one match's product), or nothing.
 */
function addChains(plan: ListenerPlan, incoming: readonly ChainPlan[]): void {
  const taken = new Set(
    plan.chains.flatMap((chain) => {
      const values = matchValues(chain);
      return matchLeaves(values).map((leaf) => leafKey(values, leaf));
    }),
  );
  for (const chain of incoming) {
    const values = matchValues(chain);
    const leaves = matchLeaves(values);
    const free = leaves.filter((leaf) => !taken.has(leafKey(values, leaf)));
    if (free.length === 0) {
      debug("%s: a chain is dropped, an earlier one has its match", plan.name);
      continue;
    }
    const kept = free.length === leaves.length ? [chain] : chainsCovering(chain, values, free);
    if (kept.length !== 1 || kept[0] !== chain)
      debug("%s: a chain keeps what earlier ones do not match", plan.name);
    plan.chains.push(...kept);
    for (const leaf of free) taken.add(leafKey(values, leaf));
  }
}

/** The values of a chain's match in each dimension, keyed as Envoy compares them, with the value as written ("" = any). */
interface MatchValues {
  cidrs: Map<string, string>;
  serverNames: Map<string, string>;
  transport: string;
  alpns: Map<string, string>;
}

/** A combination of a match's values: destination range, server name, ALPN (the transport is the match's one). */
type Leaf = readonly [cidr: string, serverName: string, alpn: string];

/** A leaf of Envoy's filter chain trie: a combination with its match's transport protocol. */
const leafKey = (values: MatchValues, leaf: Leaf) => [values.transport, ...leaf].join("|");

/** What filterChainMatch emits, as Envoy reads it: masked ranges, server names lowercased, a wildcard's by its suffix. */
function matchValues(chain: ChainPlan): MatchValues {
  const anyIfEmpty = (values: Map<string, string>) => (values.size > 0 ? values : new Map([["", ""]]));
  const cidrs = new Map<string, string>();
  for (const cidr of chain.cidrs) {
    const range = cidrRange(cidr);
    if (range && range.addressPrefix !== WILDCARD_IPV4 && !cidrs.has(range.key)) cidrs.set(range.key, cidr);
  }
  const serverNames = new Map<string, string>();
  if (!chain.sniHosts.includes("*")) {
    for (const host of chain.sniHosts) {
      const key = host.toLowerCase().replace(/^\*\./, ".");
      if (!serverNames.has(key)) serverNames.set(key, host);
    }
  }
  return {
    cidrs: anyIfEmpty(cidrs),
    serverNames: anyIfEmpty(serverNames),
    transport: chain.transportProtocol,
    alpns: anyIfEmpty(new Map(chain.applicationProtocols.map((alpn) => [alpn, alpn]))),
  };
}

/** Every combination of a match's values. */
function matchLeaves(values: MatchValues): Leaf[] {
  const leaves: Leaf[] = [];
  for (const cidr of values.cidrs.keys())
    for (const serverName of values.serverNames.keys())
      for (const alpn of values.alpns.keys()) leaves.push([cidr, serverName, alpn]);
  return leaves;
}

/**
 * Chains like chain that together match exactly the given leaves (a subset
 * of chain's): one with the values the leaves use when they are all of
 * those values' combinations, else one per destination range, then per
 * server name, each narrowed the same way.
 */
function chainsCovering(chain: ChainPlan, values: MatchValues, leaves: readonly Leaf[]): ChainPlan[] {
  const used = [0, 1, 2].map((d) => [...new Set(leaves.map((leaf) => leaf[d]!))]);
  if (used[0]!.length * used[1]!.length * used[2]!.length === leaves.length) {
    // A dimension keeps its list as written unless some of its values are gone.
    const written = (all: Map<string, string>, keys: string[], field: string[]) =>
      keys.length === all.size ? field : keys.map((key) => all.get(key)!);
    return [
      {
        ...chain,
        cidrs: written(values.cidrs, used[0]!, chain.cidrs),
        sniHosts: written(values.serverNames, used[1]!, chain.sniHosts),
        applicationProtocols: written(values.alpns, used[2]!, chain.applicationProtocols),
      },
    ];
  }
  const split = used.findIndex((keys) => keys.length > 1);
  return used[split]!.flatMap((key) =>
    chainsCovering(
      chain,
      values,
      leaves.filter((leaf) => leaf[split] === key),
    ),
  );
}

/** Istio's isMatchAll: a chain without any match condition (SNI "*" counts as none). */
function matchesAll(chain: ChainPlan): boolean {
  return (
    (chain.sniHosts.length === 0 || chain.sniHosts.includes("*")) &&
    chain.applicationProtocols.length === 0 &&
    chain.transportProtocol === "" &&
    chain.cidrs.length === 0
  );
}

/** An address or CIDR as Envoy's CidrRange, masked; undefined if it is neither. */
function cidrRange(value: string): { addressPrefix: string; prefixLen: number; key: string } | undefined {
  const [address = "", length] = value.split("/");
  const family = isIP(address);
  if (family === 0) return undefined;
  const bits = family === 4 ? 32 : 128;
  const prefixLen = length === undefined ? bits : Number(length);
  if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > bits) return undefined;
  // Envoy's CidrRange keeps the first prefixLen bits: ranges that differ only past them are one range.
  const width = BigInt(bits - prefixLen);
  const masked = (addressBits(address, family) >> width) << width;
  const key = `${masked.toString(16)}/${prefixLen}`;
  if (family === 6) return { addressPrefix: address, prefixLen, key };
  const octets = [24n, 16n, 8n, 0n].map((shift) => Number((masked >> shift) & 255n));
  return { addressPrefix: octets.join("."), prefixLen, key };
}

/** An IP address (one isIP accepts) as its bits. */
function addressBits(address: string, family: number): bigint {
  const fromOctets = (octets: string) =>
    octets.split(".").reduce((acc, octet) => (acc << 8n) | BigInt(octet), 0n);
  if (family === 4) return fromOctets(address);
  // An IPv6 address may end in an IPv4 one (::ffff:10.0.0.1): its two last groups.
  const dotted = address.includes(".") ? address.slice(address.lastIndexOf(":") + 1) : "";
  const head = dotted ? `${address.slice(0, address.length - dotted.length)}0:0` : address;
  const [left = "", right] = head.split("::");
  const groups = (part: string) => (part ? part.split(":") : []);
  const missing = right === undefined ? [] : Array(8 - groups(left).length - groups(right).length).fill("0");
  const all = [...groups(left), ...missing, ...groups(right ?? "")];
  const bits = all.reduce((acc, group) => (acc << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
  return dotted ? (bits & ~0xffffffffn) | fromOctets(dotted) : bits;
}

/**
 * The VirtualServices of the egress listener whose hosts match host (Istio's
 * getConfigsForHost), in Istio's order: by creation time, then name, then
 * namespace. Ingest keeps no creation time, so by name, then namespace.
 */
function hostConfigs(
  host: string,
  virtualServices: readonly TypedConfig<VirtualService>[],
): TypedConfig<VirtualService>[] {
  const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return virtualServices
    .filter((config) => config.hosts.some((pattern) => hostMatches(pattern, host)))
    .sort((a, b) => compare(a.ref.name, b.ref.name) || compare(a.ref.namespace, b.ref.namespace));
}

/**
 * The SNI names of a service on a shared listener (Istio's sniHosts of
 * buildSidecarOutboundTLSFilterChainOpts): its hostname, then each of its
 * aliases (ExternalName services naming it) with the alias's alternative
 * names, since a client that dialed an alias sends the alias as SNI.
 */
function sniHostsOf(push: PushContext, proxy: MeshProxy, service: Service): string[] {
  const aliases = aliasesByTarget(push).get(service.hostname) ?? [];
  return [
    service.hostname,
    ...aliases.flatMap((alias) => [alias, ...alternativeHosts(alias, proxy.namespace, push.domainSuffix)]),
  ];
}

/**
 * The TCP chains of one service port (Istio's buildSidecarOutboundTCPListenerOpts).
 *
 * TLS/HTTPS ports: a chain per applicable `tls` route match of the host's
 * VirtualServices, matched on its SNI hosts (and destination subnets), a
 * match whose SNI hosts and subnets an earlier one had skipped; without
 * any, one chain to `outbound|<port>||<host>`, matched on the hostname's
 * SNI when the listener is the wildcard one shared with other services.
 *
 * Other ports: the first applicable `tcp` route (routes matching only
 * destination subnets each add a chain matched on them and go on), else one
 * chain to `outbound|<port>||<host>`.
 */
function tcpChainPlans(
  push: PushContext,
  proxy: MeshProxy,
  request: PortRequest,
  bind: string,
  cidrs: string[],
  configs: TypedConfig<VirtualService>[],
): ChainPlan[] {
  const { service, port } = request;
  const chains: ChainPlan[] = [];
  const chain = (target: TcpTarget, extra: Partial<ChainPlan> = {}): ChainPlan => ({
    sniHosts: [],
    cidrs,
    applicationProtocols: [],
    transportProtocol: "",
    tcp: target,
    ...extra,
  });
  const applies = (match: L4MatchAttributes | TLSMatchAttributes) =>
    (!match.port || match.port === port.number) &&
    selectorMatches(match.sourceLabels, proxy.labels) &&
    (!match.sourceNamespace || match.sourceNamespace === proxy.namespace) &&
    (match.gateways.length === 0 || match.gateways.includes("mesh"));
  const target = (config: TypedConfig<VirtualService>, routes: readonly RouteDestination[]) =>
    routeTarget(push, config, routes, port.number);
  const serviceCluster = outboundClusterName(
    service.ports.length === 1 ? service.ports[0]!.number : port.number,
    "",
    service.hostname,
  );

  if (isTlsProtocol(port.protocol)) {
    const handled = new Set<string>();
    for (const config of configs) {
      for (const route of config.spec.tls) {
        if (route.route.length === 0) continue;
        for (const match of route.match) {
          if (!applies(match)) continue;
          // Istio keys on the lists as written; as sets, so that a repeated or reordered
          // sniHosts list never yields two chains Envoy sees as the same match.
          const asSet = (values: string[]) => [...new Set(values)].sort().join(",");
          const key = `${asSet(match.sniHosts)}|${asSet(match.destinationSubnets)}`;
          if (handled.has(key)) continue;
          handled.add(key);
          chains.push(
            chain(target(config, route.route), {
              sniHosts: [...match.sniHosts],
              cidrs: match.destinationSubnets.length > 0 ? [...match.destinationSubnets] : cidrs,
              source: config.ref,
              tagged: true,
            }),
          );
        }
      }
    }
    if (chains.length > 0) return chains;
    // Without a VIP the listener is the wildcard one every such service shares: only SNI tells them apart.
    const [wildcard] = wildcardAddresses(proxy);
    const shared = cidrs.length > 0 || (listenAddresses(proxy, service)[0] === wildcard && bind === wildcard);
    return [chain({ cluster: serviceCluster }, shared ? { sniHosts: sniHostsOf(push, proxy, service) } : {})];
  }

  for (const config of configs) {
    for (const route of config.spec.tcp) {
      if (route.route.length === 0) continue;
      if (route.match.length === 0) {
        chains.push(chain(target(config, route.route), { source: config.ref, tagged: true }));
        return chains;
      }
      const subnets: string[] = [];
      for (const match of route.match) {
        if (!applies(match)) continue;
        if (match.destinationSubnets.length === 0) {
          chains.push(chain(target(config, route.route), { source: config.ref, tagged: true }));
          return chains;
        }
        subnets.push(...match.destinationSubnets);
      }
      if (subnets.length > 0) {
        chains.push(chain(target(config, route.route), { cidrs: subnets, source: config.ref }));
        // A route on exactly the service's own CIDRs already covers what the default chain would.
        if ([...subnets].sort().join(",") === [...cidrs].sort().join(",")) return chains;
      }
    }
  }
  chains.push(chain({ cluster: serviceCluster }));
  return chains;
}

/**
 * Where a TCP/TLS route sends traffic: a single destination's cluster
 * (Istio's GetDestinationCluster: the destination's port, else the port of a
 * single-port service, else the listener's; an alias's cluster is its
 * external name's), or weighted clusters of the
 * destinations with a weight, under the stat prefix `<vs name>.<vs namespace>`.
 */
export function routeTarget(
  push: PushContext,
  config: TypedConfig<VirtualService>,
  routes: readonly RouteDestination[],
  listenPort: number,
): TcpTarget {
  const clusterOf = (d: RouteDestination) => {
    const host = resolveHost(d.destination?.host ?? "", config.ref.namespace, push.domainSuffix);
    const ports = push.servicesByHost.get(host)?.ports ?? [];
    const port = d.destination?.port?.number || (ports.length === 1 ? ports[0]!.number : listenPort);
    return outboundClusterName(port, d.destination?.subset ?? "", clusterHost(push, host));
  };
  if (routes.length === 1) return { cluster: clusterOf(routes[0]!) };
  return {
    statPrefix: `${config.ref.name}.${config.ref.namespace}`,
    clusters: routes.filter((d) => d.weight > 0).map((d) => ({ name: clusterOf(d), weight: d.weight })),
  };
}

/**
 * Builds a planned listener (Istio's buildListenerFromEntry): the TLS
 * inspector when a chain matches SNI, the HTTP inspector when one matches
 * ALPN; a chain matching everything becomes the default chain (or the only
 * chain, if it is alone); with none, the default chain is
 * `PassthroughFilterChain`, to PassthroughCluster (BlackHoleCluster under
 * REGISTRY_ONLY), so that traffic no chain matches is not dropped.
 */
function buildOutboundListener(
  plan: ListenerPlan,
  policy: "ALLOW_ANY" | "REGISTRY_ONLY",
  sidecar: ConfigRef | undefined,
  extensions: ListenerExtensions,
): GeneratedResource {
  const sources: ConfigRef[] = sidecar ? [sidecar] : [];
  const addSource = (ref: ConfigRef | undefined) => {
    if (
      ref &&
      !sources.some((s) => s.kind === ref.kind && s.namespace === ref.namespace && s.name === ref.name)
    )
      sources.push(ref);
  };
  for (const ref of extensions.sources) addSource(ref);
  const listenerFilters: ListenerFilter[] = [];
  if (plan.chains.some((chain) => chain.sniHosts.length > 0)) listenerFilters.push(tlsInspectorFilter());
  if (plan.chains.some((chain) => chain.applicationProtocols.length > 0))
    listenerFilters.push(httpInspectorFilter());
  const filterChains: Array<Record<string, unknown>> = [];
  let defaultFilterChain: Record<string, unknown> | undefined;
  for (const chain of plan.chains) {
    addSource(chain.source);
    const built: Record<string, unknown> = {
      filters: [
        ...extensions.networkFilters(),
        chain.http ? hcmFilter(plan, chain.http, extensions) : tcpFilter(chain.tcp!),
      ],
      ...(chain.tagged && chain.source ? { metadata: configMetadata(chain.source) } : {}),
    };
    if (matchesAll(chain)) defaultFilterChain = built;
    else filterChains.push({ filterChainMatch: filterChainMatch(chain), ...built });
  }
  if (defaultFilterChain && filterChains.length === 0) {
    filterChains.push(defaultFilterChain);
    defaultFilterChain = undefined;
  } else if (!defaultFilterChain) {
    defaultFilterChain = {
      filterChainMatch: {},
      name: PASSTHROUGH_FILTER_CHAIN,
      filters: [tcpProxyFilter(policy === "REGISTRY_ONLY" ? BLACKHOLE_CLUSTER : PASSTHROUGH_CLUSTER)],
    };
  }
  const listener = Listener.fromPartial({
    name: plan.name,
    address: { socketAddress: { address: plan.binds[0]!, portValue: plan.port } },
    additionalAddresses: additionalAddresses(plan.binds.slice(1), plan.port),
    bindToPort: false,
    trafficDirection: TrafficDirection.OUTBOUND,
    listenerFilters,
    listenerFiltersTimeout: ZERO,
    continueOnListenerFiltersTimeout: true,
    filterChains: filterChains as never,
    ...(defaultFilterChain ? { defaultFilterChain: defaultFilterChain as never } : {}),
  });
  return { name: plan.name, resource: packAny(TypeUrl.Listener, Listener, listener), sources };
}

/** Istio's config info metadata: the VirtualService a chain comes from, as its Kubernetes API path. */
function configMetadata(ref: ConfigRef): Record<string, unknown> {
  const config = `/apis/networking.istio.io/v1/namespaces/${ref.namespace}/virtual-service/${ref.name}`;
  return { filterMetadata: { istio: { config } } };
}

/** Istio's toFilterChainMatch: ALPN and transport protocol, the SNI hosts sorted, the destination CIDRs sorted. */
function filterChainMatch(chain: ChainPlan): Record<string, unknown> {
  const match: Record<string, unknown> = {};
  // Each value once as Envoy reads it: it rejects a chain that lists one twice (overlapping rules).
  const values = matchValues(chain);
  if (chain.sniHosts.length > 0 && !chain.sniHosts.includes("*"))
    match.serverNames = [...values.serverNames.values()].sort();
  const ranges = [...values.cidrs.values()]
    .filter(Boolean)
    .sort()
    .map((cidr) => {
      const { addressPrefix, prefixLen } = cidrRange(cidr)!;
      return { addressPrefix, prefixLen };
    });
  if (ranges.length > 0) match.prefixRanges = ranges;
  if (chain.transportProtocol) match.transportProtocol = chain.transportProtocol;
  if (chain.applicationProtocols.length > 0) match.applicationProtocols = chain.applicationProtocols;
  return match;
}

export function tcpFilter(target: TcpTarget): Filter {
  return "cluster" in target
    ? tcpProxyFilter(target.cluster)
    : weightedTcpProxyFilter(target.statPrefix, target.clusters);
}

/** The outbound HCM, by RDS; gRPC-Web's filter when the port that created the listener is grpc-web. */
function hcmFilter(
  plan: ListenerPlan,
  http: { rds: string; protocol: Protocol },
  extensions: ListenerExtensions,
): Filter {
  const manager = HttpConnectionManager.fromPartial({
    statPrefix: `outbound_${plan.name}`,
    rds: {
      configSource: { ads: {}, initialFetchTimeout: ZERO, resourceApiVersion: ApiVersion.V3 },
      routeConfigName: http.rds,
    },
    httpFilters: [
      ...extensions.httpFilters(),
      ...trailingHttpFilters({ grpcWeb: http.protocol === Protocol.PROTOCOL_GRPC_WEB }),
    ],
    useRemoteAddress: false,
    upgradeConfigs: [{ upgradeType: "websocket" }],
    normalizePath: true,
    pathWithEscapedSlashesAction: EscapedSlashes.KEEP_UNCHANGED,
    streamIdleTimeout: ZERO,
  } as never);
  return {
    name: HCM_FILTER_NAME,
    typedConfig: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager),
  } as Filter;
}
