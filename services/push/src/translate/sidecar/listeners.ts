import { resolveHost } from "@sextant/model";
import { type ConfigRef, packAny, type Service } from "@sextant/proto";
import { HttpConnectionManager, Listener, TlsInspector, TypeUrl } from "@sextant/proto/envoy";
import { TrafficDirection } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import { HttpConnectionManager_PathWithEscapedSlashesAction as EscapedSlashes } from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import type {
  L4MatchAttributes,
  RouteDestination,
  TLSMatchAttributes,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { Protocol } from "@sextant/proto/gen/sextant/mesh/v1/service";
import { cacheKey } from "../../cache/xds-cache.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { selectorMatches } from "../../model/security.js";
import { sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";
import { outboundClusterName } from "../names.js";
import {
  BLACKHOLE_CLUSTER,
  HCM_FILTER_NAME,
  PASSTHROUGH_CLUSTER,
  tcpProxyFilter,
  trailingHttpFilters,
  weightedTcpProxyFilter,
} from "./filters.js";
import { buildVirtualInbound, VIRTUAL_INBOUND, virtualInboundKey } from "./inbound.js";
import { isHttpProtocol, labelsKey } from "./routes.js";

/** The outbound capture listener's name and port (iptables redirects outbound traffic there). */
export const VIRTUAL_OUTBOUND = "virtualOutbound";
export const VIRTUAL_OUTBOUND_PORT = 15001;

const ZERO = { seconds: 0, nanos: 0 };

/**
 * Listeners for Envoy sidecars (LDS; Envoy subscribes with the wildcard):
 * `virtualOutbound` (15001), `virtualInbound` (15006), and the outbound
 * listeners of the proxy's scope: `0.0.0.0_<port>` for HTTP ports (HCM, RDS
 * `<port>`), `<VIP>_<port>` for TCP ports (`0.0.0.0_<port>` for a service
 * without a VIP). Sorted by name; a by-name subscription gets those of them
 * it names. Health (15021) and Prometheus (15090) listeners are static in
 * the agent's Envoy bootstrap, as in Istio's, so they are not served here.
 *
 * Cache keys: outbound listeners by the proxy's namespace, Sidecar and labels
 * (sourceLabels of TCP/TLS routes); virtualInbound by namespace, labels and
 * the proxy's inbound ports (which follow endpoints, not config).
 */
export function generateSidecarListeners(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy, cache } = context;
  const scope = sidecarScope(push, proxy);
  const sidecar = scope.sidecar ? `${scope.sidecar.ref.namespace}/${scope.sidecar.ref.name}` : "";
  const labels = labelsKey(proxy.labels);
  const plans = outboundPlans(push, proxy);
  const wanted = (name: string) => watched === "*" || watched.has(name);
  const out: GeneratedResource[] = [];
  const names = [VIRTUAL_INBOUND, VIRTUAL_OUTBOUND, ...plans.keys()].sort();
  for (const name of names) {
    if (!wanted(name)) continue;
    let resource: GeneratedResource | null;
    if (name === VIRTUAL_INBOUND) {
      const ports = virtualInboundKey(push, proxy);
      resource = cache.get(
        cacheKey("lds-sidecar-inbound", proxy.namespace, labels, ports, push.configVersion),
        () => buildVirtualInbound(push, proxy),
      );
    } else if (name === VIRTUAL_OUTBOUND) {
      resource = cache.get(
        cacheKey("lds-sidecar", scope.outboundTrafficPolicy, sidecar, name, push.configVersion),
        () => buildVirtualOutbound(scope.outboundTrafficPolicy, scope.sidecar?.ref),
      );
    } else {
      const plan = plans.get(name)!;
      resource = cache.get(
        cacheKey("lds-sidecar", proxy.namespace, sidecar, labels, name, push.configVersion),
        () => buildOutboundListener(push, proxy, plan),
      );
    }
    if (resource) out.push(resource);
  }
  return out;
}

/**
 * Istio's `virtualOutbound` on 0.0.0.0:15001: use_original_dst hands each
 * connection to the listener of its original destination; what matches none
 * takes the default chain `PassthroughFilterChain` (tcp_proxy to
 * PassthroughCluster under ALLOW_ANY, BlackHoleCluster under REGISTRY_ONLY);
 * traffic addressed to 15001 itself goes to BlackHoleCluster.
 */
export function buildVirtualOutbound(
  policy: "ALLOW_ANY" | "REGISTRY_ONLY",
  sidecar: ConfigRef | undefined,
): GeneratedResource {
  const listener = Listener.fromPartial({
    name: VIRTUAL_OUTBOUND,
    address: { socketAddress: { address: "0.0.0.0", portValue: VIRTUAL_OUTBOUND_PORT } },
    useOriginalDst: true,
    trafficDirection: TrafficDirection.OUTBOUND,
    filterChains: [
      {
        name: "virtualOutbound-blackhole",
        filterChainMatch: { destinationPort: VIRTUAL_OUTBOUND_PORT },
        filters: [tcpProxyFilter(BLACKHOLE_CLUSTER)],
      },
    ] as never,
    defaultFilterChain: {
      name: "PassthroughFilterChain",
      filters: [tcpProxyFilter(policy === "REGISTRY_ONLY" ? BLACKHOLE_CLUSTER : PASSTHROUGH_CLUSTER)],
    } as never,
  });
  return {
    name: VIRTUAL_OUTBOUND,
    resource: packAny(TypeUrl.Listener, Listener, listener),
    sources: sidecar ? [sidecar] : [],
  };
}

/** What one outbound listener serves: an HTTP port (all services on it, by RDS) or one TCP service port. */
type OutboundPlan =
  | { kind: "http"; name: string; port: number; sidecar?: ConfigRef }
  | {
      kind: "tcp";
      name: string;
      address: string;
      port: number;
      service: Service;
      protocol: Protocol;
      sidecar?: ConfigRef;
    };

/** The outbound listeners of the proxy's scope by name (Istio's buildSidecarOutboundListeners, without sniffing). */
function outboundPlans(push: PushContext, proxy: MeshProxy): Map<string, OutboundPlan> {
  const scope = sidecarScope(push, proxy);
  const sidecar = scope.sidecar?.ref;
  const plans = new Map<string, OutboundPlan>();
  const sorted = [...scope.services].sort((a, b) =>
    a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0,
  );
  for (const service of sorted) {
    for (const port of service.ports) {
      if (isHttpProtocol(port.protocol)) {
        const name = `0.0.0.0_${port.number}`;
        // An HTTP listener on the wildcard address takes the port: a TCP service without a VIP there yields.
        plans.set(name, { kind: "http", name, port: port.number, ...(sidecar ? { sidecar } : {}) });
      }
    }
  }
  for (const service of sorted) {
    for (const port of service.ports) {
      if (isHttpProtocol(port.protocol) || port.protocol === Protocol.PROTOCOL_UDP) continue;
      const vip = service.addresses.find((address) => address && address !== "0.0.0.0") ?? "0.0.0.0";
      const name = `${vip}_${port.number}`;
      if (plans.has(name)) continue;
      plans.set(name, {
        kind: "tcp",
        name,
        address: vip,
        port: port.number,
        service,
        protocol: port.protocol,
        ...(sidecar ? { sidecar } : {}),
      });
    }
  }
  return plans;
}

function buildOutboundListener(push: PushContext, proxy: MeshProxy, plan: OutboundPlan): GeneratedResource {
  const sources: ConfigRef[] = plan.sidecar ? [plan.sidecar] : [];
  let listener: Listener;
  if (plan.kind === "http") {
    const manager = HttpConnectionManager.fromPartial({
      statPrefix: `outbound_0.0.0.0_${plan.port}`,
      rds: {
        configSource: { ads: {}, initialFetchTimeout: ZERO, resourceApiVersion: ApiVersion.V3 },
        routeConfigName: String(plan.port),
      },
      httpFilters: trailingHttpFilters(),
      useRemoteAddress: false,
      upgradeConfigs: [{ upgradeType: "websocket" }],
      normalizePath: true,
      pathWithEscapedSlashesAction: EscapedSlashes.KEEP_UNCHANGED,
      streamIdleTimeout: ZERO,
    } as never);
    listener = Listener.fromPartial({
      name: plan.name,
      address: { socketAddress: { address: "0.0.0.0", portValue: plan.port } },
      bindToPort: false,
      trafficDirection: TrafficDirection.OUTBOUND,
      filterChains: [
        {
          filters: [
            {
              name: HCM_FILTER_NAME,
              typedConfig: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager),
            },
          ],
        },
      ] as never,
    });
  } else {
    const { chains, sni } = tcpFilterChains(push, proxy, plan, sources);
    listener = Listener.fromPartial({
      name: plan.name,
      address: { socketAddress: { address: plan.address, portValue: plan.port } },
      bindToPort: false,
      trafficDirection: TrafficDirection.OUTBOUND,
      ...(sni
        ? {
            listenerFilters: [
              {
                name: "envoy.filters.listener.tls_inspector",
                typedConfig: packAny(TypeUrl.TlsInspector, TlsInspector, TlsInspector.fromPartial({})),
              },
            ],
          }
        : {}),
      filterChains: chains as never,
    });
  }
  return { name: plan.name, resource: packAny(TypeUrl.Listener, Listener, listener), sources };
}

/**
 * The filter chains of a TCP service port: for a TLS/HTTPS port, one chain
 * per applicable `tls` route match of its VirtualService, matched on the SNI
 * hosts; else the first applicable `tcp` route; else (and after the TLS
 * chains, without SNI) tcp_proxy to `outbound|<port>||<fqdn>`.
 */
function tcpFilterChains(
  push: PushContext,
  proxy: MeshProxy,
  plan: Extract<OutboundPlan, { kind: "tcp" }>,
  sources: ConfigRef[],
): { chains: Array<Record<string, unknown>>; sni: boolean } {
  const host = plan.service.hostname;
  const defaultCluster = outboundClusterName(plan.port, "", host);
  const virtualService = push.virtualServiceFor(host, proxy.namespace);
  const chains: Array<Record<string, unknown>> = [];
  const proxyFor = (routes: readonly RouteDestination[]) => {
    const vsNamespace = virtualService!.ref.namespace;
    const destinations = routes.filter((d) => routes.length === 1 || d.weight > 0);
    const clusterOf = (d: RouteDestination) => {
      const destHost = resolveHost(d.destination?.host ?? "", vsNamespace, push.domainSuffix);
      const ports = push.servicesByHost.get(destHost)?.ports ?? [];
      const port = d.destination?.port?.number || (ports.length === 1 ? ports[0]!.number : plan.port);
      return outboundClusterName(port, d.destination?.subset ?? "", destHost);
    };
    if (destinations.length === 1) return tcpProxyFilter(clusterOf(destinations[0]!));
    return weightedTcpProxyFilter(
      defaultCluster,
      destinations.map((d) => ({ name: clusterOf(d), weight: d.weight })),
    );
  };
  const applies = (match: L4MatchAttributes | TLSMatchAttributes) =>
    (!match.port || match.port === plan.port) &&
    selectorMatches(match.sourceLabels, proxy.labels) &&
    (!match.sourceNamespace || match.sourceNamespace === proxy.namespace) &&
    (match.gateways.length === 0 || match.gateways.includes("mesh"));
  let sni = false;
  if (virtualService) {
    const tls = plan.protocol === Protocol.PROTOCOL_TLS || plan.protocol === Protocol.PROTOCOL_HTTPS;
    if (tls) {
      for (const route of virtualService.spec.tls) {
        for (const match of route.match) {
          if (!applies(match)) continue;
          sni = true;
          chains.push({
            filterChainMatch: { serverNames: [...match.sniHosts].sort() },
            filters: [proxyFor(route.route)],
          });
        }
      }
    }
    if (chains.length === 0) {
      const route = virtualService.spec.tcp.find((r) => r.match.length === 0 || r.match.some(applies));
      if (route) chains.push({ filters: [proxyFor(route.route)] });
    }
    if (chains.length > 0) sources.push(virtualService.ref);
  }
  if (chains.length === 0 || sni) chains.push({ filters: [tcpProxyFilter(defaultCluster)] });
  return { chains, sni };
}
