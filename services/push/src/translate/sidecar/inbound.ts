import { isIP } from "node:net";
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
import type {
  Filter,
  ListenerFilter,
  ListenerFilterChainMatchPredicate,
} from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import {
  HttpConnectionManager_PathWithEscapedSlashesAction as EscapedSlashes,
  HttpConnectionManager_ForwardClientCertDetails as ForwardClientCert,
  type HttpFilter,
} from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import { TlsParameters_TlsProtocol } from "@sextant/proto/gen/envoy/extensions/transport_sockets/tls/v3/common";
import { CaptureMode, type Sidecar } from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import { Protocol } from "@sextant/proto/gen/sextant/mesh/v1/service";
import { parseProtocol } from "../../model/protocol.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { MtlsMode } from "../../model/security.js";
import { applicableSidecar } from "../../model/sidecar-scope.js";
import type { GeneratedResource, TypedConfig } from "../../model/types.js";
import { wasmPluginsAttached } from "../../model/wasm-plugin.js";
import { type ListenerExtensions, listenerExtensions } from "../extension/wasm-filters.js";
import { TLS_TRANSPORT_SOCKET } from "../grpc/tls.js";
import { authzHttpFilterGroups, authzNetworkFilterGroups, authzSources } from "./authz.js";
import { serviceTargets } from "./cluster-rules.js";
import { SDS_DEFAULT_SECRET, SDS_ROOT_SECRET, sdsSecretConfig } from "./cluster-tls.js";
import { additionalAddresses, wildcardAddresses } from "./dual-stack.js";
import {
  BLACKHOLE_CLUSTER,
  HCM_FILTER_NAME,
  INBOUND_PASSTHROUGH_CLUSTER,
  tcpProxyFilter,
  trailingHttpFilters,
} from "./filters.js";
import { staticListenerPorts, VIRTUAL_INBOUND_PORT, VIRTUAL_OUTBOUND_PORT } from "./proxy-ports.js";
import { isHttpProtocol } from "./routes.js";

/** The inbound capture listener's name and port (iptables redirects inbound traffic there). */
export const VIRTUAL_INBOUND = "virtualInbound";
/** The catch-all chains' names: HTTP found by sniffing, and everything else (Istio's names). */
const CATCH_ALL_HTTP_CHAIN = "virtualInbound-catchall-http";
const CATCH_ALL_TCP_CHAIN = VIRTUAL_INBOUND;
const BLACKHOLE_CHAIN = "virtualInbound-blackhole";

/**
 * The ALPN values inbound chains match (Istio's, less `istio-peer-exchange`:
 * that value asks for the metadata-exchange filter, which Sextant's
 * sidecars do not run, so no chain claims it). Istio's client sidecars
 * send `istio` on mTLS, or `istio-http/<version>` when they know the traffic
 * is HTTP (Sextant's send `istio`); plaintext HTTP is recognized by the HTTP
 * inspector.
 */
const MTLS_HTTP_ALPNS = ["istio-http/1.0", "istio-http/1.1", "istio-h2"];
const MTLS_TCP_ALPNS = ["istio"];
const ALL_MTLS_ALPNS = ["istio", ...MTLS_HTTP_ALPNS];
const PLAINTEXT_HTTP_ALPNS = ["http/1.1", "h2c"];

/**
 * How a port's chains carry traffic (Istio's ListenerProtocol): HTTP or TCP
 * when the port declares it, `auto` (both, chosen by protocol sniffing) when
 * it declares nothing Istio knows.
 */
type PortProtocol = "http" | "tcp" | "auto";

/** Istio's ModelProtocolToListenerProtocol. UDP has no chains of its own in Istio; it gets TCP's. */
export function portProtocol(protocol: Protocol): PortProtocol {
  if (isHttpProtocol(protocol)) return "http";
  if (protocol === Protocol.PROTOCOL_UNSPECIFIED || protocol === Protocol.UNRECOGNIZED) return "auto";
  return "tcp";
}

/** One inbound port of the proxy: a port some service of its workload targets, or a Sidecar ingress listener's. */
export interface InboundPort {
  /** The workload (target) port. */
  readonly port: number;
  readonly protocol: PortProtocol;
  /** HTTP/2, gRPC or gRPC-Web: the HCM is told to expect HTTP/2. */
  readonly http2: boolean;
  /** The address in the chains' names (`<bind>_<port>`). */
  readonly bind: string;
  /** The decorator's host and port: the service (first by hostname) and its port, or `<sidecar>.<namespace>` and the port. */
  readonly hostname: string;
  readonly servicePort: number;
  /** The Sidecar whose ingress listener declares the port. */
  readonly sidecar?: ConfigRef;
}

function http2(protocol: Protocol): boolean {
  return (
    protocol === Protocol.PROTOCOL_HTTP2 ||
    protocol === Protocol.PROTOCOL_GRPC ||
    protocol === Protocol.PROTOCOL_GRPC_WEB
  );
}

/** Whether the proxy's traffic is not redirected to it (INTERCEPTION_MODE NONE): it has no virtualInbound then. */
function interceptionNone(proxy: MeshProxy): boolean {
  return proxy.metadata.INTERCEPTION_MODE === "NONE";
}

/**
 * The proxy's inbound ports (Istio's inbound chain configs): with a
 * Sidecar that has ingress listeners, one per listener (those with
 * captureMode NONE bind a port of their own in Istio and get no chain
 * here); otherwise one per workload port of its service targets (the same
 * ones the inbound clusters are built for; on a port several services
 * target, the first by hostname decides). A port one of the proxy's own
 * listeners takes is left out (see serviceTargetPorts and
 * sidecarIngressPorts). Sorted by port.
 */
export function inboundPorts(push: PushContext, proxy: MeshProxy): InboundPort[] {
  const sidecar = applicableSidecar(push, proxy);
  const ports =
    sidecar && sidecar.spec.ingress.length > 0
      ? sidecarIngressPorts(proxy, sidecar)
      : serviceTargetPorts(push, proxy);
  return ports.sort((a, b) => a.port - b.port);
}

/**
 * The workload ports of the proxy's service targets, but those a listener
 * of the proxy's own takes (Istio's conflictWithReservedListener for a
 * chain bound to the wildcard, whatever its protocol): the outbound and
 * inbound capture ports and the static listeners' ports. The application
 * cannot listen there, and traffic addressed to 15006 must reach the
 * blackhole chain, not loop back into virtualInbound.
 */
function serviceTargetPorts(push: PushContext, proxy: MeshProxy): InboundPort[] {
  const [bind] = wildcardAddresses(proxy);
  const reserved = new Set([VIRTUAL_OUTBOUND_PORT, VIRTUAL_INBOUND_PORT, ...staticListenerPorts(proxy)]);
  const byPort = new Map<number, InboundPort>();
  for (const target of serviceTargets(push, proxy)) {
    if (byPort.has(target.targetPort) || reserved.has(target.targetPort)) continue;
    byPort.set(target.targetPort, {
      port: target.targetPort,
      protocol: portProtocol(target.port.protocol),
      http2: http2(target.port.protocol),
      bind,
      hostname: target.service.hostname,
      servicePort: target.port.number,
    });
  }
  return [...byPort.values()];
}

/**
 * A Sidecar's ingress listeners as inbound ports: the listener's port and
 * protocol, named after its bind, else the proxy's first global unicast
 * address, else the wildcard (Istio's getSidecarInboundBindIPs); traced as
 * `<sidecar>.<namespace>:<port>` (Istio has no service for them). The
 * first listener of a port wins. Left out, as in Istio, is a listener on a
 * static listener's port that binds the wildcard, or binds nothing and is
 * HTTP. Istio checks no capture port here, yet a chain on 15006 would take
 * traffic from the blackhole chain (the one Istio's own config check
 * allows there) and loop it back into virtualInbound: such a listener is
 * left out too.
 */
function sidecarIngressPorts(proxy: MeshProxy, sidecar: TypedConfig<Sidecar>): InboundPort[] {
  const [wildcard] = wildcardAddresses(proxy);
  const unicast = proxy.instanceIps.find(isGlobalUnicast);
  const staticPorts = staticListenerPorts(proxy);
  const byPort = new Map<number, InboundPort>();
  for (const listener of sidecar.spec.ingress) {
    const number = listener.port?.number;
    if (!number || listener.captureMode === CaptureMode.NONE || byPort.has(number)) continue;
    const protocol = parseProtocol(listener.port?.protocol ?? "");
    const bindsWildcard = listener.bind ? listener.bind === wildcard : isHttpProtocol(protocol);
    if (number === VIRTUAL_INBOUND_PORT || (bindsWildcard && staticPorts.includes(number))) continue;
    byPort.set(number, {
      port: number,
      protocol: portProtocol(protocol),
      http2: http2(protocol),
      bind: listener.bind || unicast || wildcard,
      hostname: `${sidecar.ref.name}.${sidecar.ref.namespace}`,
      servicePort: number,
      sidecar: { kind: sidecar.ref.kind, namespace: sidecar.ref.namespace, name: sidecar.ref.name },
    });
  }
  return [...byPort.values()];
}

/** Go's netip IsGlobalUnicast: not unspecified, loopback, link-local, multicast or the IPv4 broadcast address. */
function isGlobalUnicast(ip: string): boolean {
  const family = isIP(ip);
  if (family === 4) {
    const [a = 0, b = 0] = ip.split(".").map(Number);
    return !(a === 0 || a === 127 || a >= 224 || (a === 169 && b === 254));
  }
  if (family === 6) {
    const lower = ip.toLowerCase();
    return !(lower === "::" || lower === "::1" || /^fe[89ab]/.test(lower) || lower.startsWith("ff"));
  }
  return false;
}

/**
 * The ports the proxy declares (Istio's needPerPortPassthroughFilterChain):
 * its Sidecar's ingress listener ports when it has any, else the workload
 * ports of its service targets, those its own listeners take included. A
 * PeerAuthentication port-level mode for another port gets passthrough
 * chains of its own.
 */
function declaredPorts(push: PushContext, proxy: MeshProxy): Set<number> {
  const sidecar = applicableSidecar(push, proxy);
  return new Set(
    sidecar && sidecar.spec.ingress.length > 0
      ? sidecar.spec.ingress.map((listener) => listener.port?.number ?? 0)
      : serviceTargets(push, proxy).map((target) => target.targetPort),
  );
}

/** What virtualInbound is built from beyond config: whether it exists, its ports and addresses (for the cache key). */
export function virtualInboundKey(push: PushContext, proxy: MeshProxy): string {
  if (interceptionNone(proxy)) return "none";
  return JSON.stringify([
    inboundPorts(push, proxy),
    [...declaredPorts(push, proxy)].sort((a, b) => a - b),
    wildcardAddresses(proxy),
  ]);
}

/**
 * The inbound HTTP filters: authorization (CUSTOM, AUDIT, DENY, ALLOW:
 * ./authz.ts) with the port's Wasm plugins in their phases' slots, then
 * fault, CORS, router.
 */
export function inboundHttpFilters(
  push: PushContext,
  proxy: MeshProxy,
  extensions: ListenerExtensions,
): HttpFilter[] {
  const { custom, local } = authzHttpFilterGroups(push, proxy);
  return [...extensions.httpFilters({ custom, authz: local }), ...trailingHttpFilters()];
}

/**
 * The cipher suites of inbound mTLS (Istio's SupportedCiphers, used when
 * MeshConfig's meshMTLS sets none): AEAD only, ECDHE first. They bind TLS
 * 1.2; TLS 1.3 has its own fixed suites.
 */
const MESH_MTLS_CIPHER_SUITES = [
  "ECDHE-ECDSA-AES256-GCM-SHA384",
  "ECDHE-RSA-AES256-GCM-SHA384",
  "ECDHE-ECDSA-AES128-GCM-SHA256",
  "ECDHE-RSA-AES128-GCM-SHA256",
  "AES256-GCM-SHA384",
  "AES128-GCM-SHA256",
];

/**
 * Istio's inbound mTLS transport socket (BuildInboundTLS): the workload's
 * certificate (SDS `default`) and the mesh roots (SDS `ROOTCA`), client
 * certificates required, TLS 1.2 at least with the mesh's cipher suites,
 * ALPN h2 and http/1.1. Istio offers `istio-peer-exchange` first on TCP
 * chains when it runs metadata exchange; without it (as here) TCP chains
 * offer the same as HTTP ones.
 */
function inboundMtlsSocket(): TransportSocket {
  const context = DownstreamTlsContext.fromPartial({
    commonTlsContext: {
      tlsParams: {
        tlsMinimumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_2,
        tlsMaximumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_3,
        cipherSuites: MESH_MTLS_CIPHER_SUITES,
      },
      alpnProtocols: ["h2", "http/1.1"],
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

/** One filter chain's match on virtualInbound (no address match: every chain takes IPv4 and IPv6). */
interface ChainMatch {
  destinationPort?: number;
  transportProtocol?: "tls" | "raw_buffer";
  applicationProtocols?: readonly string[];
}

/** One chain to build: what it carries, what it matches, whether it terminates mTLS (Istio's FilterChainMatchOptions). */
interface ChainOption {
  protocol: "http" | "tcp";
  transportProtocol: "tls" | "raw_buffer";
  applicationProtocols?: readonly string[];
  mtls?: true;
}

const mtlsHttp: ChainOption = {
  protocol: "http",
  transportProtocol: "tls",
  applicationProtocols: MTLS_HTTP_ALPNS,
  mtls: true,
};
const plaintextHttp: ChainOption = {
  protocol: "http",
  transportProtocol: "raw_buffer",
  applicationProtocols: PLAINTEXT_HTTP_ALPNS,
};
const plaintextTcp: ChainOption = { protocol: "tcp", transportProtocol: "raw_buffer" };
/** TLS the sidecar does not terminate (a client's own TLS), passed through as TCP. */
const passthroughTls: ChainOption = { protocol: "tcp", transportProtocol: "tls" };

/**
 * The chains of a port by its protocol and mTLS mode, in Istio's order
 * (getFilterChainMatchOptions). STRICT takes only TLS; PERMISSIVE tells
 * mTLS from the mesh (Istio's ALPNs) apart from plaintext and other TLS;
 * DISABLE takes only plaintext (with no inspector on such a port, a
 * client's own TLS counts as raw_buffer: bytes to a TCP port). A sniffed (`auto`) port has an HTTP chain for what
 * the HTTP inspector or the client's ALPN says is HTTP, and TCP chains for
 * the rest.
 */
const CHAIN_OPTIONS: Record<PortProtocol, Record<MtlsMode, readonly ChainOption[]>> = {
  http: {
    STRICT: [{ protocol: "http", transportProtocol: "tls", mtls: true }],
    PERMISSIVE: [
      { protocol: "http", transportProtocol: "tls", applicationProtocols: ALL_MTLS_ALPNS, mtls: true },
      { protocol: "http", transportProtocol: "raw_buffer" },
    ],
    DISABLE: [{ protocol: "http", transportProtocol: "raw_buffer" }],
  },
  tcp: {
    STRICT: [{ protocol: "tcp", transportProtocol: "tls", mtls: true }],
    PERMISSIVE: [
      { protocol: "tcp", transportProtocol: "tls", applicationProtocols: ALL_MTLS_ALPNS, mtls: true },
      passthroughTls,
      plaintextTcp,
    ],
    DISABLE: [plaintextTcp],
  },
  auto: {
    STRICT: [mtlsHttp, { protocol: "tcp", transportProtocol: "tls", mtls: true }],
    PERMISSIVE: [
      mtlsHttp,
      plaintextHttp,
      { protocol: "tcp", transportProtocol: "tls", applicationProtocols: MTLS_TCP_ALPNS, mtls: true },
      plaintextTcp,
      passthroughTls,
    ],
    DISABLE: [plaintextHttp, plaintextTcp],
  },
};

/** One filter chain of virtualInbound. */
interface InboundChain {
  name: string;
  filterChainMatch: ChainMatch;
  filters: Filter[];
  transportSocket?: TransportSocket;
  metadata?: { filterMetadata: { istio: { config: string } } };
}

/** What the chains of one port (or of the catch-all) are made of, by the protocol a chain carries. */
interface ChainSource {
  /** The port the chains match; none for the catch-all. */
  port?: number;
  name: Record<"http" | "tcp", string>;
  filters: Record<"http" | "tcp", () => Filter[]>;
  /** The config that declared the chains (a Sidecar), as Istio's chain metadata names it. */
  config?: string;
}

function buildChains(source: ChainSource, protocol: PortProtocol, mode: MtlsMode): InboundChain[] {
  return CHAIN_OPTIONS[protocol][mode].map((option) => {
    const filterChainMatch: ChainMatch = {
      ...(source.port !== undefined && { destinationPort: source.port }),
      transportProtocol: option.transportProtocol,
      ...(option.applicationProtocols && { applicationProtocols: option.applicationProtocols }),
    };
    return {
      name: source.name[option.protocol],
      filterChainMatch,
      filters: source.filters[option.protocol](),
      ...(option.mtls && { transportSocket: inboundMtlsSocket() }),
      ...(source.config && { metadata: { filterMetadata: { istio: { config: source.config } } } }),
    };
  });
}

const ZERO = { seconds: 0, nanos: 0 };
const MAX_CONNECTIONS_PER_SOCKET_EVENT = 1;
const INBOUND_SERVER_NAME = "istio-envoy";

/** Where an inbound HCM sends every request, and how the route is named and traced. */
interface InboundRoute {
  cluster: string;
  /** The service port in the virtual host's name (`inbound|http|<port>`); 0 for the catch-all. */
  servicePort: number;
  /** The trace decorator: `<host>:<service port>/*`, `:0/*` for the catch-all. */
  operation: string;
  http2: boolean;
}

/**
 * Istio's inbound HCM: the inline route config named after the cluster, one
 * virtual host `inbound|http|<service port>` for every domain, a route to
 * the cluster without timeouts; the authorization filters before the
 * router; client certificate details forwarded; Server `istio-envoy`.
 */
function inboundHcm(
  push: PushContext,
  proxy: MeshProxy,
  route: InboundRoute,
  statPrefix: string,
  extensions: ListenerExtensions,
): Filter {
  const manager = HttpConnectionManager.fromPartial({
    statPrefix,
    routeConfig: {
      name: route.cluster,
      virtualHosts: [
        {
          name: `inbound|http|${route.servicePort}`,
          domains: ["*"],
          routes: [
            {
              name: "default",
              match: { prefix: "/" },
              route: {
                cluster: route.cluster,
                timeout: ZERO,
                maxStreamDuration: { maxStreamDuration: ZERO, grpcTimeoutHeaderMax: ZERO },
              },
              decorator: { operation: route.operation },
            },
          ],
        },
      ],
      validateClusters: false,
    },
    httpFilters: inboundHttpFilters(push, proxy, extensions),
    // Istio's inbound Server header (outbound keeps Envoy's "envoy"), and 100-continue proxied as is.
    serverName: INBOUND_SERVER_NAME,
    proxy100Continue: true,
    useRemoteAddress: false,
    forwardClientCertDetails: ForwardClientCert.APPEND_FORWARD,
    setCurrentClientCertDetails: { subject: true, dns: true, uri: true },
    upgradeConfigs: [{ upgradeType: "websocket" }],
    normalizePath: true,
    pathWithEscapedSlashesAction: EscapedSlashes.KEEP_UNCHANGED,
    streamIdleTimeout: ZERO,
    ...(route.http2 && { http2ProtocolOptions: {} }),
  } as never);
  return {
    name: HCM_FILTER_NAME,
    typedConfig: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager),
  } as Filter;
}

/** The network filters of a TCP chain: the network RBAC filters and NETWORK Wasm plugins, then tcp_proxy to the cluster. */
function inboundTcpFilters(
  push: PushContext,
  proxy: MeshProxy,
  cluster: string,
  extensions: ListenerExtensions,
): Filter[] {
  const { custom, local } = authzNetworkFilterGroups(push, proxy);
  return [...extensions.networkFilters({ custom, authz: local }), tcpProxyFilter(cluster)];
}

/** The chains of an inbound port: `<bind>_<port>` to `inbound|<port>||`, with the port's mTLS mode. */
function portChains(push: PushContext, proxy: MeshProxy, port: InboundPort): InboundChain[] {
  const name = `${port.bind}_${port.port}`;
  const cluster = `inbound|${port.port}||`;
  const route: InboundRoute = {
    cluster,
    servicePort: port.servicePort,
    operation: `${port.hostname}:${port.servicePort}/*`,
    http2: port.http2,
  };
  const extensions = listenerExtensions(push, proxy, { class: "inbound", port: port.port });
  const source: ChainSource = {
    port: port.port,
    name: { http: name, tcp: name },
    ...(port.sidecar && {
      config: `/apis/networking.istio.io/v1/namespaces/${port.sidecar.namespace}/sidecar/${port.sidecar.name}`,
    }),
    filters: {
      http: () => [
        ...extensions.networkFilters(),
        inboundHcm(push, proxy, route, `inbound_${name}`, extensions),
      ],
      tcp: () => inboundTcpFilters(push, proxy, cluster, extensions),
    },
  };
  return buildChains(source, port.protocol, portMtlsMode(push, proxy, port.port));
}

/**
 * Istio's passthrough chains, for traffic to ports no service declares:
 * sniffed, to InboundPassthroughCluster (HTTP as `virtualInbound-catchall-http`
 * through an HCM, so HTTP AuthorizationPolicy applies there too; the rest
 * as `virtualInbound` through tcp_proxy). First for every port, with the
 * workload's mode; then, for each port a PeerAuthentication sets a mode
 * for that the proxy does not declare, the same chains matching that port
 * with its mode. Not for 15006, though Istio builds them there too: they
 * would take traffic from the blackhole chain and loop it back into
 * virtualInbound.
 */
function catchAllChains(push: PushContext, proxy: MeshProxy, declared: ReadonlySet<number>): InboundChain[] {
  const merged = push.peerAuthenticationFor(proxy.namespace, proxy.labels);
  const route: InboundRoute = {
    cluster: INBOUND_PASSTHROUGH_CLUSTER,
    servicePort: 0,
    operation: ":0/*",
    http2: false,
  };
  const source = (port?: number): ChainSource => {
    // The catch-all is port 0 to a plugin's match, as Istio's passthrough chains.
    const extensions = listenerExtensions(push, proxy, { class: "inbound", port: port ?? 0 });
    return {
      port,
      name: { http: CATCH_ALL_HTTP_CHAIN, tcp: CATCH_ALL_TCP_CHAIN },
      filters: {
        http: () => [
          ...extensions.networkFilters(),
          inboundHcm(push, proxy, route, INBOUND_PASSTHROUGH_CLUSTER, extensions),
        ],
        tcp: () => inboundTcpFilters(push, proxy, INBOUND_PASSTHROUGH_CLUSTER, extensions),
      },
    };
  };
  const chains = buildChains(source(), "auto", merged.mode);
  const undeclared = [...merged.perPort]
    .filter(([port]) => !declared.has(port) && port !== VIRTUAL_INBOUND_PORT)
    .sort(([a], [b]) => a - b);
  for (const [port, mode] of undeclared) chains.push(...buildChains(source(port), "auto", mode));
  return chains;
}

/** Traffic addressed to 15006 itself would loop back into this listener: it goes to BlackHoleCluster. */
function blackholeChain(): InboundChain {
  return {
    name: BLACKHOLE_CHAIN,
    filterChainMatch: { destinationPort: VIRTUAL_INBOUND_PORT },
    filters: [tcpProxyFilter(BLACKHOLE_CLUSTER)],
  };
}

const ORIGINAL_DST: ListenerFilter = {
  name: "envoy.filters.listener.original_dst",
  typedConfig: packAny(TypeUrl.OriginalDst, OriginalDst, OriginalDst.fromPartial({})),
  filterDisabled: undefined,
};

/** Istio reads at most 512 bytes for the ClientHello (Envoy's default is 64 KiB). */
const TLS_INSPECTOR_CONFIG = packAny(
  TypeUrl.TlsInspector,
  TlsInspector,
  TlsInspector.fromPartial({ initialReadBufferSize: 512 }),
);
const HTTP_INSPECTOR_CONFIG = packAny(TypeUrl.HttpInspector, HttpInspector, HttpInspector.fromPartial({}));

/** A predicate that matches connections to any of ports (Envoy's ranges are [start, end)). */
function anyOfPorts(ports: readonly number[]): ListenerFilterChainMatchPredicate {
  const ranges = ports.map((port) => ({ destinationPortRange: { start: port, end: port + 1 } }));
  // An or_match needs two rules at least.
  return ranges.length === 1
    ? (ranges[0] as ListenerFilterChainMatchPredicate)
    : { orMatch: { rules: ranges } };
}

/**
 * The listener filters, as Istio's populateListenerFilters: original_dst,
 * then tls_inspector where some chain matches a transport protocol of
 * `tls`, and http_inspector where some chain matches the plaintext HTTP
 * ALPNs, judged per destination port (port 0: the catch-all chains, which
 * match any port). An inspector waits for the client's first bytes, so on
 * a port that has no use for it (a DISABLE TCP port, where the server may
 * speak first, as MySQL does) it is turned off by `filter_disabled` on that
 * port's range.
 */
function listenerFilters(chains: readonly InboundChain[]): ListenerFilter[] {
  const needs = new Map<number, { tls: boolean; http: boolean }>();
  for (const { filterChainMatch: match } of chains) {
    const port = match.destinationPort ?? 0;
    const need = needs.get(port) ?? { tls: false, http: false };
    need.tls ||= match.transportProtocol === "tls";
    need.http ||= (match.applicationProtocols ?? []).some((alpn) => PLAINTEXT_HTTP_ALPNS.includes(alpn));
    needs.set(port, need);
  }
  const ports = [...needs.keys()].sort((a, b) => a - b);
  const specific = ports.filter((port) => port !== 0);
  const filters = [ORIGINAL_DST];
  if (ports.some((port) => needs.get(port)?.tls)) {
    // With the catch-all needing it, it runs everywhere but the ports that do
    // not; otherwise only on the ports that do.
    const everywhere = needs.get(0)?.tls ?? false;
    const off = specific.filter((port) => needs.get(port)?.tls !== everywhere);
    filters.push({
      name: "envoy.filters.listener.tls_inspector",
      typedConfig: TLS_INSPECTOR_CONFIG,
      filterDisabled:
        off.length === 0 ? undefined : everywhere ? anyOfPorts(off) : { notMatch: anyOfPorts(off) },
    });
  }
  // After tls_inspector: on a connection it found TLS on, http_inspector does not look.
  if (ports.some((port) => needs.get(port)?.http)) {
    // Istio lists the ports that need no HTTP sniffing, the catch-all's 0 among them
    // when it needs none (a range no connection has, so it changes nothing).
    const off = ports.filter((port) => !needs.get(port)?.http);
    filters.push({
      name: "envoy.filters.listener.http_inspector",
      typedConfig: HTTP_INSPECTOR_CONFIG,
      filterDisabled: off.length === 0 ? undefined : anyOfPorts(off),
    });
  }
  return filters;
}

/**
 * Istio's `virtualInbound` on port 15006 (the inbound capture port), bound
 * to the proxy's wildcard addresses (`::` as an additional address on a
 * dual-stack proxy). Its chains, in Istio's order: `virtualInbound-blackhole`
 * for traffic addressed to 15006 itself; the catch-all chains for ports
 * nothing declares; then per inbound port `<bind>_<port>` chains (HTTP: an
 * HCM with the inline route config `inbound|<port>||`; TCP: network RBAC
 * then tcp_proxy to `inbound|<port>||`; both for a port that declares no
 * protocol) with the port's PeerAuthentication mode. Listener filters as
 * the chains need them; no protocol detection timeout (Istio's mesh default
 * protocolDetectionTimeout of 0s): a connection is never classified by
 * having been slow. None when the proxy's traffic is not redirected
 * (INTERCEPTION_MODE NONE), as in Istio.
 */
export function buildVirtualInbound(push: PushContext, proxy: MeshProxy): GeneratedResource | null {
  if (interceptionNone(proxy)) return null;
  const merged = push.peerAuthenticationFor(proxy.namespace, proxy.labels);
  const ports = inboundPorts(push, proxy);
  const sidecar = applicableSidecar(push, proxy);
  const sidecarIngress = sidecar && sidecar.spec.ingress.length > 0 ? sidecar : undefined;
  const sources: ConfigRef[] = [
    ...merged.sources,
    ...authzSources(push, proxy),
    ...(sidecarIngress ? [sidecarIngress.ref] : []),
    ...wasmPluginsAttached(push, proxy),
  ];
  const [bind, ...extraBinds] = wildcardAddresses(proxy);
  const filterChains: InboundChain[] = [
    blackholeChain(),
    ...catchAllChains(push, proxy, declaredPorts(push, proxy)),
    ...ports.flatMap((port) => portChains(push, proxy, port)),
  ];
  const listener = Listener.fromPartial({
    name: VIRTUAL_INBOUND,
    address: { socketAddress: { address: bind, portValue: VIRTUAL_INBOUND_PORT } },
    additionalAddresses: additionalAddresses(extraBinds, VIRTUAL_INBOUND_PORT),
    listenerFilters: listenerFilters(filterChains),
    listenerFiltersTimeout: ZERO,
    continueOnListenerFiltersTimeout: true,
    trafficDirection: TrafficDirection.INBOUND,
    // Istio's MAX_CONNECTIONS_PER_SOCKET_EVENT_LOOP default: one accept per wakeup spreads connections over Envoy's workers.
    maxConnectionsToAcceptPerSocketEvent: MAX_CONNECTIONS_PER_SOCKET_EVENT,
    filterChains: filterChains as never,
  });
  return { name: VIRTUAL_INBOUND, resource: packAny(TypeUrl.Listener, Listener, listener), sources };
}
