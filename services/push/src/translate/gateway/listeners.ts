import { CA_CERT_SUFFIX } from "@sextant/model";
import { type ConfigRef, packAny } from "@sextant/proto";
import { DownstreamTlsContext, HttpConnectionManager, Listener, TypeUrl } from "@sextant/proto/envoy";
import { TrafficDirection, type TransportSocket } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import type { Filter, ListenerFilter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import type { HttpFilter } from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import {
  HttpConnectionManager_PathWithEscapedSlashesAction as EscapedSlashes,
  HttpConnectionManager_ForwardClientCertDetails as ForwardClientCert,
} from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import {
  type ServerTLSSettings,
  ServerTLSSettings_TLSmode as TlsMode,
  ServerTLSSettings_TLSProtocol as TlsProtocol,
} from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import { Protocol } from "@sextant/proto/gen/sextant/mesh/v1/service";
import { labelsKey } from "../../cache/selection.js";
import { cacheKey } from "../../cache/xds-cache.js";
import { metadataFlag } from "../../model/auto-allocation.js";
import {
  type GatewayPort,
  type GatewayServer,
  isPassthrough,
  matchesGatewayHosts,
  mergedGatewayFor,
  resolveGatewayName,
  virtualServicesForGateway,
} from "../../model/gateway.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import { listenerTelemetry, withTelemetry } from "../common/telemetry.js";
import { listenerExtensions } from "../extension/wasm-filters.js";
import type { GenerationContext } from "../generator.js";
import { TLS_TRANSPORT_SOCKET } from "../grpc/tls.js";
import { authzHttpFilterGroups, authzNetworkFilterGroups, authzSources } from "../sidecar/authz.js";
import {
  credentialSecretConfig,
  SDS_DEFAULT_SECRET,
  SDS_ROOT_SECRET,
  sdsSecretConfig,
} from "../sidecar/cluster-tls.js";
import { additionalAddresses, wildcardAddresses } from "../sidecar/dual-stack.js";
import { HCM_FILTER_NAME, tlsInspectorFilter, trailingHttpFilters } from "../sidecar/filters.js";
import { routeTarget, type TcpTarget, tcpFilter } from "../sidecar/listeners.js";
import { staticListenerPorts } from "../sidecar/proxy-ports.js";
import { autoPassthroughTargets } from "./sni-dnat.js";

const ZERO = { seconds: 0, nanos: 0 };
/** Istio's PILOT_GATEWAY_TRANSPORT_SOCKET_CONNECT_TIMEOUT default, set on every gateway filter chain. */
const TRANSPORT_SOCKET_CONNECT_TIMEOUT = { seconds: 15, nanos: 0 };
/** Istio's allIstioMtlsALPNs: what an AUTO_PASSTHROUGH chain matches (mesh mTLS of another network's sidecars). */
const ISTIO_MTLS_ALPNS = ["istio", "istio-peer-exchange", "istio-http/1.0", "istio-http/1.1", "istio-h2"];
/** Istio's util.ALPNHttp: what a terminating gateway chain offers. */
const ALPN_HTTP = ["h2", "http/1.1"];
const GATEWAY_SERVER_NAME = "istio-envoy";

/** One filter chain of a gateway listener (Istio's filterChainOpts). */
interface ChainPlan {
  sniHosts: readonly string[];
  applicationProtocols?: readonly string[];
  tls?: DownstreamTlsContext;
  /** An HCM chain: its RDS name and stat prefix, and whether its port is grpc-web (Istio adds the gRPC-Web filter). */
  http?: { rds: string; statPrefix: string; grpcWeb?: boolean };
  tcp?: TcpTarget;
}

/**
 * Listeners for routers (Istio's buildGatewayListeners): one per workload port
 * of the merged Gateways, `0.0.0.0_<port>`, bound. A plaintext HTTP port has
 * one HCM chain by RDS `http.<port>`; a TLS port one chain per server (an
 * HTTPS server that terminates: its SNI hosts, its TLS context, an HCM by
 * RDS `https.…`; a TCP or TLS server: tcp_proxy by its VirtualServices' `tcp`
 * routes, or for PASSTHROUGH one chain per `tls` route match's SNI hosts, for
 * AUTO_PASSTHROUGH one per mesh cluster's SNI). A port whose servers yield no
 * chain gets no listener. Cached by the router's namespace and labels.
 */
export function generateGatewayListeners(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy } = context;
  const merged = mergedGatewayFor(push, proxy, context.logger);
  if (!merged) return [];
  const wanted = watched === "*" || watched.has("*") ? undefined : watched;
  const wildcards = wildcardAddresses(proxy);
  const resources: GeneratedResource[] = [];
  const topology = gatewayTopology(proxy);
  const telemetry = listenerTelemetry(push, proxy);
  // Istio's IsUnprivileged (metadata UNPRIVILEGED_POD, which its gateway charts set unless runAsRoot).
  const unprivileged = metadataFlag(proxy, "UNPRIVILEGED_POD");
  // The bootstrap's own listeners (status, Prometheus): a gateway listener on their wildcard address would be
  // a duplicate address, which Envoy rejects; Istio sends it, Sextant leaves it out.
  const reserved = new Set(staticListenerPorts(proxy, { assumeDefaults: true, secureMetrics: true }));
  for (const port of merged.ports) {
    if (!port.bind && reserved.has(port.port)) {
      context.logger?.warn(
        { node: proxy.id, port: port.port },
        "skipping a gateway port that is one of the proxy's own static listeners",
      );
      continue;
    }
    if (unprivileged && port.port < 1024) {
      context.logger?.warn(
        { node: proxy.id, port: port.port },
        "skipping a privileged gateway port: the gateway runs unprivileged (UNPRIVILEGED_POD)",
      );
      continue;
    }
    // A server's `bind` replaces the wildcard addresses (Istio's bind over actualWildcards).
    const binds: [string, ...string[]] = port.bind ? [port.bind] : wildcards;
    const name = `${binds[0]}_${port.port}`;
    if (wanted && !wanted.has(name)) continue;
    const resource = context.cache.get(
      cacheKey(
        "lds-gateway",
        proxy.namespace,
        labelsKey(proxy.labels),
        binds.join(","),
        name,
        push.configVersion,
        JSON.stringify(topology),
        telemetry.key,
      ),
      () => {
        const built = buildGatewayListener(push, proxy, port, binds, topology);
        return built && withTelemetry(built, telemetry, proxy.kind);
      },
    );
    if (resource) resources.push(resource);
  }
  return resources;
}

function buildGatewayListener(
  push: PushContext,
  proxy: MeshProxy,
  port: GatewayPort,
  binds: readonly [string, ...string[]],
  topology: GatewayTopology,
): GeneratedResource | null {
  const name = `${binds[0]}_${port.port}`;
  const sources: ConfigRef[] = [];
  const addSource = (ref: ConfigRef | undefined) => {
    if (
      ref &&
      !sources.some((s) => s.kind === ref.kind && s.namespace === ref.namespace && s.name === ref.name)
    )
      sources.push(ref);
  };
  const chains: ChainPlan[] = [];
  if (port.plaintextHttp) {
    for (const entry of port.servers) addSource(entry.gateway);
    const first = port.servers[0]!;
    chains.push({
      sniHosts: [],
      http: {
        rds: first.routeName,
        statPrefix: `outbound_${name}`,
        grpcWeb: first.protocol === Protocol.PROTOCOL_GRPC_WEB,
      },
    });
  } else {
    // Istio's tlsHostsByPort: an SNI host of a passthrough route only once per listener.
    const sniTaken = new Set<string>();
    for (const entry of port.servers) {
      addSource(entry.gateway);
      chains.push(...serverChains(push, proxy, entry, name, sniTaken, addSource));
    }
  }
  const distinct = withoutRepeatedMatches(chains);
  if (distinct.length === 0) return null;
  for (const ref of authzSources(push, proxy)) addSource(ref);
  // A gateway's traffic is client traffic to a plugin's match (Istio's gateway listener class).
  const extensions = listenerExtensions(push, proxy, { class: "gateway", port: port.port });
  for (const ref of extensions.sources) addSource(ref);
  const httpAuthz = authzHttpFilterGroups(push, proxy);
  const tcpAuthz = authzNetworkFilterGroups(push, proxy);
  const listenerFilters: ListenerFilter[] = distinct.some(
    (chain) => chain.sniHosts.length > 0 || (chain.tls?.commonTlsContext?.alpnProtocols.length ?? 0) > 0,
  )
    ? [tlsInspectorFilter()]
    : [];
  const listener = Listener.fromPartial({
    name,
    address: { socketAddress: { address: binds[0], portValue: port.port } },
    additionalAddresses: additionalAddresses(binds.slice(1), port.port),
    trafficDirection: TrafficDirection.OUTBOUND,
    listenerFilters,
    filterChains: distinct.map((chain) => ({
      ...filterChainMatch(chain),
      // AuthorizationPolicies selecting the gateway apply on every chain (Istio's gateway listener class).
      filters: chain.http
        ? [
            ...extensions.networkFilters(),
            gatewayHcm(
              chain.http,
              extensions.httpFilters({ custom: httpAuthz.custom, authz: httpAuthz.local }),
              topology,
            ),
          ]
        : [
            ...extensions.networkFilters({ custom: tcpAuthz.custom, authz: tcpAuthz.local }),
            tcpFilter(chain.tcp!),
          ],
      ...(chain.tls ? { transportSocket: downstreamTlsSocket(chain.tls) } : {}),
      transportSocketConnectTimeout: TRANSPORT_SOCKET_CONNECT_TIMEOUT,
    })) as never,
    maxConnectionsToAcceptPerSocketEvent: 1,
  });
  return { name, resource: packAny(TypeUrl.Listener, Listener, listener), sources };
}

/** The chains of one server of a TLS port (Istio's buildGatewayTCPBasedFilterChains, per server). */
function serverChains(
  push: PushContext,
  proxy: MeshProxy,
  entry: GatewayServer,
  listenerName: string,
  sniTaken: Set<string>,
  addSource: (ref: ConfigRef) => void,
): ChainPlan[] {
  const { server } = entry;
  if (entry.protocol === Protocol.PROTOCOL_HTTPS && server.tls && !isPassthrough(server)) {
    return [
      {
        sniHosts: entry.sniHosts,
        tls: gatewayTlsContext(server.tls),
        http: { rds: entry.routeName, statPrefix: server.name || `outbound_${listenerName}` },
      },
    ];
  }
  if (!server.tls || !isPassthrough(server)) {
    const target = tcpRouteTarget(push, proxy, entry, addSource);
    if (!target) return [];
    return [
      {
        sniHosts: server.tls ? entry.sniHosts : [],
        ...(server.tls ? { tls: gatewayTlsContext(server.tls) } : {}),
        tcp: target,
      },
    ];
  }
  if (server.tls.mode === TlsMode.AUTO_PASSTHROUGH) {
    return autoPassthroughTargets(push, proxy, entry.sniHosts).map(({ sni }) => ({
      sniHosts: [sni],
      applicationProtocols: ISTIO_MTLS_ALPNS,
      tcp: { cluster: sni },
    }));
  }
  // PASSTHROUGH: one chain per `tls` route match of the gateway's VirtualServices, by its SNI hosts.
  const chains: ChainPlan[] = [];
  const port = server.port?.number ?? 0;
  for (const config of virtualServicesForGateway(push, proxy.namespace, entry.gatewayName)) {
    if (!matchesGatewayHosts(entry.hosts, config)) continue;
    for (const route of config.spec.tls) {
      if (route.route.length === 0) continue;
      for (const match of route.match) {
        if (!l4Applies(match, port, config.ref.namespace, entry.gatewayName)) continue;
        if (match.sniHosts.some((host) => sniTaken.has(host))) continue;
        for (const host of match.sniHosts) sniTaken.add(host);
        addSource(config.ref);
        chains.push({
          sniHosts: match.sniHosts,
          tcp: routeTarget(push, config, route.route, port),
        });
      }
    }
  }
  return chains;
}

/**
 * The chains with each match once, as Envoy needs ("multiple filter chains
 * with the same matching rules" rejects the whole listener): a chain keeps
 * the server names no earlier chain of the same ALPNs has, and is dropped if
 * none is left, or if it matches every name and an earlier one already did.
 * Istio checks SNI hosts within servers and within passthrough routes, not
 * across the two (a passthrough route's SNI equal to a terminating server's
 * host); there the first chain keeps the name.
 */
function withoutRepeatedMatches(chains: readonly ChainPlan[]): ChainPlan[] {
  const taken = new Set<string>();
  const out: ChainPlan[] = [];
  for (const chain of chains) {
    const alpns = (chain.applicationProtocols ?? []).join(",");
    const names = chain.sniHosts.includes("*") ? [] : [...new Set(chain.sniHosts)];
    if (names.length === 0) {
      if (taken.has(`${alpns}\u0000*`)) continue;
      taken.add(`${alpns}\u0000*`);
      out.push(chain);
      continue;
    }
    const left = names.filter((host) => !taken.has(`${alpns}\u0000${host}`));
    if (left.length === 0) continue;
    for (const host of left) taken.add(`${alpns}\u0000${host}`);
    out.push(left.length === names.length ? chain : { ...chain, sniHosts: left });
  }
  return out;
}

/** Istio's l4SingleMatch for a gateway server: the match's port is the server's, its gateways (if any) name this one. */
function l4Applies(
  match: { port: number; gateways: readonly string[] },
  serverPort: number,
  vsNamespace: string,
  gatewayName: string,
): boolean {
  if (match.port && match.port !== serverPort) return false;
  return (
    match.gateways.length === 0 ||
    match.gateways.some((name) => resolveGatewayName(name, vsNamespace) === gatewayName)
  );
}

/**
 * Istio's buildGatewayNetworkFiltersFromTCPRoutes: the first `tcp` route
 * (with destinations) of the gateway's VirtualServices whose hosts match the
 * server's that applies to it (no match, or one whose port and gateways fit).
 */
function tcpRouteTarget(
  push: PushContext,
  proxy: MeshProxy,
  entry: GatewayServer,
  addSource: (ref: ConfigRef) => void,
): TcpTarget | undefined {
  const port = entry.server.port?.number ?? 0;
  for (const config of virtualServicesForGateway(push, proxy.namespace, entry.gatewayName)) {
    if (!matchesGatewayHosts(entry.hosts, config)) continue;
    for (const route of config.spec.tcp) {
      const applies =
        route.match.length === 0 ||
        route.match.some((match) => l4Applies(match, port, config.ref.namespace, entry.gatewayName));
      if (!applies || route.route.length === 0) continue;
      addSource(config.ref);
      return routeTarget(push, config, route.route, port);
    }
  }
  return undefined;
}

/** Istio's toFilterChainMatch: the SNI hosts sorted (none for `*`), the ALPNs; no match at all when neither. */
function filterChainMatch(chain: ChainPlan): { filterChainMatch?: Record<string, unknown> } {
  const serverNames = chain.sniHosts.includes("*") ? [] : [...new Set(chain.sniHosts)].sort();
  const alpns = chain.applicationProtocols ?? [];
  if (serverNames.length === 0 && alpns.length === 0) return {};
  return {
    filterChainMatch: {
      ...(serverNames.length > 0 ? { serverNames } : {}),
      ...(alpns.length > 0 ? { applicationProtocols: alpns } : {}),
    },
  };
}

/** What of the router's ProxyConfig `gatewayTopology` its HCMs take. */
interface GatewayTopology {
  numTrustedProxies: number;
  forwardClientCertDetails: ForwardClientCert;
}

/** ProxyConfig's ForwardClientCertDetails by name (UNDEFINED keeps the gateway default). */
const FORWARD_CLIENT_CERT: Readonly<Record<string, ForwardClientCert>> = {
  SANITIZE: ForwardClientCert.SANITIZE,
  FORWARD_ONLY: ForwardClientCert.FORWARD_ONLY,
  APPEND_FORWARD: ForwardClientCert.APPEND_FORWARD,
  SANITIZE_SET: ForwardClientCert.SANITIZE_SET,
  ALWAYS_FORWARD_ONLY: ForwardClientCert.ALWAYS_FORWARD_ONLY,
};

/**
 * The router's ProxyConfig `gatewayTopology` (node metadata PROXY_CONFIG, from
 * the pod's proxy.istio.io/config or the mesh default): how many proxies in
 * front of it to trust in X-Forwarded-For, and what to do with client
 * certificate details (default SANITIZE_SET).
 */
function gatewayTopology(proxy: MeshProxy): GatewayTopology {
  const config = proxy.metadata.PROXY_CONFIG;
  const topology =
    typeof config === "object" && config !== null
      ? (config as { gatewayTopology?: { numTrustedProxies?: unknown; forwardClientCertDetails?: unknown } })
          .gatewayTopology
      : undefined;
  const hops = Number(topology?.numTrustedProxies ?? 0);
  const details = FORWARD_CLIENT_CERT[String(topology?.forwardClientCertDetails ?? "")];
  return {
    numTrustedProxies: Number.isInteger(hops) && hops > 0 ? hops : 0,
    forwardClientCertDetails: details ?? ForwardClientCert.SANITIZE_SET,
  };
}

/**
 * Istio's buildGatewayConnectionManager: the client's address trusted (the
 * gateway is the edge, behind `numTrustedProxies` proxies), client
 * certificate details sanitized and set (or as gatewayTopology says; the
 * current certificate's details set for APPEND_FORWARD and SANITIZE_SET),
 * Server `istio-envoy`, by RDS.
 */
function gatewayHcm(
  http: { rds: string; statPrefix: string; grpcWeb?: boolean },
  /** Authorization and Wasm plugins: the filters before gRPC-Web, fault, CORS and the router. */
  leading: HttpFilter[],
  topology: GatewayTopology,
): Filter {
  const setsDetails =
    topology.forwardClientCertDetails === ForwardClientCert.APPEND_FORWARD ||
    topology.forwardClientCertDetails === ForwardClientCert.SANITIZE_SET;
  const manager = HttpConnectionManager.fromPartial({
    statPrefix: http.statPrefix,
    rds: {
      configSource: { ads: {}, initialFetchTimeout: ZERO, resourceApiVersion: ApiVersion.V3 },
      routeConfigName: http.rds,
    },
    httpFilters: [...leading, ...trailingHttpFilters({ grpcWeb: http.grpcWeb === true })],
    serverName: GATEWAY_SERVER_NAME,
    // Istio's ENABLE_100_CONTINUE_HEADERS (on): 100-continue proxied as is.
    proxy100Continue: true,
    useRemoteAddress: true,
    xffNumTrustedHops: topology.numTrustedProxies,
    forwardClientCertDetails: topology.forwardClientCertDetails,
    ...(setsDetails
      ? { setCurrentClientCertDetails: { subject: true, cert: true, dns: true, uri: true } }
      : {}),
    httpProtocolOptions: {},
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

function downstreamTlsSocket(context: DownstreamTlsContext): TransportSocket {
  return {
    name: TLS_TRANSPORT_SOCKET,
    typedConfig: packAny(TypeUrl.DownstreamTlsContext, DownstreamTlsContext, context),
  };
}

/**
 * Istio's BuildListenerTLSContext for a gateway server: ALPN h2 and
 * http/1.1; client certificates required for MUTUAL and ISTIO_MUTUAL.
 * ISTIO_MUTUAL: the workload's certificate and roots from the agent
 * (`default`, `ROOTCA`). credentialName(s): `kubernetes://<name>` over ADS
 * (one per name: an RSA and an ECDSA certificate, say), MUTUAL validating
 * clients against caCertCredentialName, else the first name's
 * `-cacert`. Else the certificate files (each of tlsCertificates, or the
 * server's pair), as the agent's file SDS names them; clients are checked
 * against the server's caCertificates (Envoy takes one CA, so the
 * per-certificate ones are unused, as in Istio). SIMPLE and MUTUAL take the
 * server's protocol versions and cipher suites.
 */
function gatewayTlsContext(tls: ServerTLSSettings): DownstreamTlsContext {
  const mutual = tls.mode === TlsMode.MUTUAL || tls.mode === TlsMode.ISTIO_MUTUAL;
  const validateClient = mutual || tls.mode === TlsMode.OPTIONAL_MUTUAL;
  // Istio offers istio-peer-exchange first on a TCP server terminating ISTIO_MUTUAL; Sextant runs no metadata exchange.
  const common: Record<string, unknown> = { alpnProtocols: ALPN_HTTP };
  const sans = tls.subjectAltNames.map((san) => ({ exact: san, ignoreCase: false }));
  if (tls.mode === TlsMode.ISTIO_MUTUAL) {
    common.tlsCertificateSdsSecretConfigs = [sdsSecretConfig(SDS_DEFAULT_SECRET)];
    common.combinedValidationContext = {
      defaultValidationContext: { matchSubjectAltNames: sans },
      validationContextSdsSecretConfig: sdsSecretConfig(SDS_ROOT_SECRET),
    };
  } else if (tls.credentialNames.length > 0 || tls.credentialName) {
    const names = tls.credentialNames.length > 0 ? tls.credentialNames : [tls.credentialName];
    common.tlsCertificateSdsSecretConfigs = names.map(credentialSecretConfig);
    const caCredential = tls.caCertCredentialName || `${names[0]}${CA_CERT_SUFFIX}`;
    if (tls.mode === TlsMode.MUTUAL || tls.mode === TlsMode.OPTIONAL_MUTUAL) {
      common.combinedValidationContext = {
        defaultValidationContext: {
          matchSubjectAltNames: sans,
          verifyCertificateSpki: tls.verifyCertificateSpki,
          verifyCertificateHash: tls.verifyCertificateHash,
        },
        validationContextSdsSecretConfig: credentialSecretConfig(caCredential),
      };
    } else if (sans.length > 0) {
      common.validationContext = { matchSubjectAltNames: sans };
    }
  } else {
    // Certificate files mounted in the gateway: the agent's SDS serves them by path (Istio's file-cert / file-root names).
    const fileCertificate = (pair: { serverCertificate: string; privateKey: string }) =>
      pair.serverCertificate ? `file-cert:${pair.serverCertificate}~${pair.privateKey}` : SDS_DEFAULT_SECRET;
    const pairs = tls.tlsCertificates.length > 0 ? tls.tlsCertificates : [tls];
    common.tlsCertificateSdsSecretConfigs = pairs.map((pair) => sdsSecretConfig(fileCertificate(pair)));
    if (validateClient)
      common.combinedValidationContext = {
        defaultValidationContext: { matchSubjectAltNames: sans },
        validationContextSdsSecretConfig: sdsSecretConfig(
          tls.caCertificates ? `file-root:${tls.caCertificates}` : SDS_ROOT_SECRET,
        ),
      };
  }
  if (tls.mode === TlsMode.SIMPLE || tls.mode === TlsMode.MUTUAL || tls.mode === TlsMode.OPTIONAL_MUTUAL) {
    const params: Record<string, unknown> = {};
    if (tls.minProtocolVersion !== TlsProtocol.TLS_AUTO)
      params.tlsMinimumProtocolVersion = tls.minProtocolVersion;
    if (tls.maxProtocolVersion !== TlsProtocol.TLS_AUTO)
      params.tlsMaximumProtocolVersion = tls.maxProtocolVersion;
    const ciphers = [...new Set(tls.cipherSuites)];
    if (ciphers.length > 0) params.cipherSuites = ciphers;
    if (Object.keys(params).length > 0) common.tlsParams = params;
  }
  return DownstreamTlsContext.fromPartial({
    commonTlsContext: common as never,
    requireClientCertificate: mutual,
  });
}
