import { type ConfigRef, packAny } from "@sextant/proto";
import {
  DownstreamTlsContext,
  HttpConnectionManager,
  HttpInspector,
  Listener,
  OriginalDst,
  TlsInspector,
  TypeUrl,
} from "@sextant/proto/envoy";
import type { TransportSocket } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { TrafficDirection } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { Filter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import {
  HttpConnectionManager_PathWithEscapedSlashesAction as EscapedSlashes,
  HttpConnectionManager_ForwardClientCertDetails as ForwardClientCert,
  type HttpFilter,
} from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import { TlsParameters_TlsProtocol } from "@sextant/proto/gen/envoy/extensions/transport_sockets/tls/v3/common";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { MtlsMode } from "../../model/security.js";
import type { GeneratedResource } from "../../model/types.js";
import { authzHttpFilters, authzNetworkFilters, authzSources } from "./authz.js";
import { SDS_DEFAULT_SECRET, SDS_ROOT_SECRET, sdsSecretConfig } from "./cluster-tls.js";
import {
  BLACKHOLE_CLUSTER,
  HCM_FILTER_NAME,
  INBOUND_PASSTHROUGH_CLUSTER,
  tcpProxyFilter,
  trailingHttpFilters,
} from "./filters.js";
import { isHttpProtocol } from "./routes.js";

/** The inbound capture listener's name and port (iptables redirects inbound traffic there). */
export const VIRTUAL_INBOUND = "virtualInbound";
export const VIRTUAL_INBOUND_PORT = 15006;
/** The TLS transport socket. */
export const TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls";
/** The ALPN values Istio's clients send over mTLS, which the inbound mTLS chains match. */
export const ISTIO_MTLS_ALPNS = [
  "istio",
  "istio-peer-exchange",
  "istio-http/1.0",
  "istio-http/1.1",
  "istio-h2",
];

/** One inbound port of the proxy: a port some service of its workload targets. */
export interface InboundPort {
  /** The workload (target) port. */
  readonly port: number;
  readonly http: boolean;
  /** The service (first by hostname) and its port number, for the route's decorator. */
  readonly hostname: string;
  readonly servicePort: number;
}

/**
 * The proxy's inbound ports (Istio's service instances): for every endpoint
 * at one of the proxy's instance IPs, each port of its service, delivered to
 * the endpoint's port of that name (else the service's target port, else the
 * port number). Sorted by port; on a port several services target, the first
 * by hostname decides.
 */
export function inboundPorts(push: PushContext, proxy: MeshProxy): InboundPort[] {
  const ips = new Set(proxy.instanceIps);
  const byPort = new Map<number, InboundPort>();
  const hosts = [...push.endpointsByHost.keys()].sort();
  for (const host of hosts) {
    const service = push.servicesByHost.get(host);
    if (!service) continue;
    for (const endpoint of push.endpointsByHost.get(host) ?? []) {
      if (!ips.has(endpoint.address)) continue;
      for (const port of service.ports) {
        const target = endpoint.ports[port.name] || port.targetPort || port.number;
        if (byPort.has(target)) continue;
        byPort.set(target, {
          port: target,
          http: isHttpProtocol(port.protocol),
          hostname: service.hostname,
          servicePort: port.number,
        });
      }
    }
  }
  return [...byPort.values()].sort((a, b) => a.port - b.port);
}

/** The inbound HTTP filters: authorization (CUSTOM, AUDIT, DENY, ALLOW: ./authz.ts), then fault, CORS, router. */
export function inboundHttpFilters(push: PushContext, proxy: MeshProxy): HttpFilter[] {
  return [...authzHttpFilters(push, proxy), ...trailingHttpFilters()];
}

/**
 * Istio's inbound mTLS transport socket: the workload's certificate (SDS
 * `default`) and the mesh roots (SDS `ROOTCA`), client certificates
 * required, TLS 1.2 at least; ALPN h2/http1.1 for HTTP, with
 * istio-peer-exchange first for TCP.
 */
export function inboundMtlsSocket(http: boolean): TransportSocket {
  const context = DownstreamTlsContext.fromPartial({
    commonTlsContext: {
      tlsParams: {
        tlsMinimumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_2,
        tlsMaximumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_3,
      },
      alpnProtocols: http ? ["h2", "http/1.1"] : ["istio-peer-exchange", "h2", "http/1.1"],
      tlsCertificateSdsSecretConfigs: [sdsSecretConfig(SDS_DEFAULT_SECRET)],
      combinedValidationContext: {
        defaultValidationContext: {},
        validationContextSdsSecretConfig: sdsSecretConfig(SDS_ROOT_SECRET),
      },
    },
    requireClientCertificate: true,
  } as never);
  return {
    name: TLS_TRANSPORT_SOCKET,
    typedConfig: packAny(TypeUrl.DownstreamTlsContext, DownstreamTlsContext, context),
  };
}

/** The mode for a workload port: port-level over workload-wide (Istio's ComposePeerAuthentication). */
export function portMtlsMode(push: PushContext, proxy: MeshProxy, port: number): MtlsMode {
  const merged = push.peerAuthenticationFor(proxy.namespace, proxy.labels);
  return merged.perPort.get(port) ?? merged.mode;
}

type Chain = Record<string, unknown>;

/**
 * The filter chains one mode gives, as Istio's inbound chains: STRICT one
 * mTLS chain (transport protocol tls); PERMISSIVE an mTLS chain for Istio's
 * ALPNs, for TCP also a chain for other TLS (passed through as is), and a
 * plaintext chain (raw_buffer); DISABLE one plaintext chain matching all.
 */
function chainsForMode(
  mode: MtlsMode,
  name: string,
  match: Chain,
  http: boolean,
  filters: () => unknown[],
): Chain[] {
  const mtls = (extra: Chain) => ({
    name,
    filterChainMatch: { ...match, transportProtocol: "tls", ...extra },
    filters: filters(),
    transportSocket: inboundMtlsSocket(http),
  });
  if (mode === "STRICT") return [mtls({})];
  if (mode === "DISABLE") return [{ name, filterChainMatch: match, filters: filters() }];
  const chains: Chain[] = [mtls({ applicationProtocols: ISTIO_MTLS_ALPNS })];
  if (!http)
    chains.push({ name, filterChainMatch: { ...match, transportProtocol: "tls" }, filters: filters() });
  chains.push({ name, filterChainMatch: { ...match, transportProtocol: "raw_buffer" }, filters: filters() });
  return chains;
}

const ZERO = { seconds: 0, nanos: 0 };

function inboundHcm(push: PushContext, proxy: MeshProxy, port: InboundPort, statPrefix: string): Filter {
  const cluster = `inbound|${port.port}||`;
  const manager = HttpConnectionManager.fromPartial({
    statPrefix,
    routeConfig: {
      name: cluster,
      virtualHosts: [
        {
          name: `inbound|http|${port.port}`,
          domains: ["*"],
          routes: [
            {
              name: "default",
              match: { prefix: "/" },
              route: {
                cluster,
                timeout: ZERO,
                maxStreamDuration: { maxStreamDuration: ZERO, grpcTimeoutHeaderMax: ZERO },
              },
              decorator: { operation: `${port.hostname}:${port.servicePort}/*` },
            },
          ],
        },
      ],
      validateClusters: false,
    },
    httpFilters: inboundHttpFilters(push, proxy),
    useRemoteAddress: false,
    forwardClientCertDetails: ForwardClientCert.APPEND_FORWARD,
    setCurrentClientCertDetails: { subject: true, dns: true, uri: true },
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

/**
 * Istio's `virtualInbound` on 0.0.0.0:15006 (the inbound capture port):
 * listener filters original_dst, tls_inspector, http_inspector; a chain
 * `virtualInbound-blackhole` for traffic addressed to 15006 itself; per
 * inbound port chains `0.0.0.0_<port>` (HTTP: an HCM with the inline route
 * config `inbound|<port>||`; TCP: network RBAC then tcp_proxy to
 * `inbound|<port>||`) with the port's PeerAuthentication TLS; and the
 * `virtualInbound` passthrough chains (tcp_proxy to InboundPassthroughCluster)
 * for ports no service targets, with the workload's mode.
 */
export function buildVirtualInbound(push: PushContext, proxy: MeshProxy): GeneratedResource {
  const merged = push.peerAuthenticationFor(proxy.namespace, proxy.labels);
  const sources: ConfigRef[] = [...merged.sources, ...authzSources(push, proxy)];
  const filterChains: Chain[] = [
    {
      name: "virtualInbound-blackhole",
      filterChainMatch: { destinationPort: VIRTUAL_INBOUND_PORT },
      filters: [tcpProxyFilter(BLACKHOLE_CLUSTER)],
    },
  ];
  for (const port of inboundPorts(push, proxy)) {
    const name = `0.0.0.0_${port.port}`;
    const mode = portMtlsMode(push, proxy, port.port);
    const filters = port.http
      ? () => [inboundHcm(push, proxy, port, `inbound_${name}`)]
      : () => [...authzNetworkFilters(push, proxy), tcpProxyFilter(`inbound|${port.port}||`)];
    filterChains.push(...chainsForMode(mode, name, { destinationPort: port.port }, port.http, filters));
  }
  filterChains.push(
    ...chainsForMode(merged.mode, VIRTUAL_INBOUND, {}, false, () => [
      ...authzNetworkFilters(push, proxy),
      tcpProxyFilter(INBOUND_PASSTHROUGH_CLUSTER),
    ]),
  );
  const listener = Listener.fromPartial({
    name: VIRTUAL_INBOUND,
    address: { socketAddress: { address: "0.0.0.0", portValue: VIRTUAL_INBOUND_PORT } },
    listenerFilters: [
      {
        name: "envoy.filters.listener.original_dst",
        typedConfig: packAny(TypeUrl.OriginalDst, OriginalDst, OriginalDst.fromPartial({})),
      },
      {
        name: "envoy.filters.listener.tls_inspector",
        typedConfig: packAny(TypeUrl.TlsInspector, TlsInspector, TlsInspector.fromPartial({})),
      },
      {
        name: "envoy.filters.listener.http_inspector",
        typedConfig: packAny(TypeUrl.HttpInspector, HttpInspector, HttpInspector.fromPartial({})),
      },
    ],
    listenerFiltersTimeout: { seconds: 5, nanos: 0 },
    continueOnListenerFiltersTimeout: true,
    trafficDirection: TrafficDirection.INBOUND,
    filterChains: filterChains as never,
  });
  return { name: VIRTUAL_INBOUND, resource: packAny(TypeUrl.Listener, Listener, listener), sources };
}
