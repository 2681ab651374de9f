import { hostMatches } from "@sextant/model";
import type { ConfigRef, Service } from "@sextant/proto";
import {
  type Gateway,
  type Server,
  ServerTLSSettings_TLSmode as TlsMode,
} from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import { Protocol } from "@sextant/proto/gen/sextant/mesh/v1/service";
import type { RoutedVirtualService } from "./delegation.js";
import { parseProtocol } from "./protocol.js";
import type { MeshProxy } from "./proxy.js";
import { type PushContext, visible } from "./push-context.js";
import { selectorMatches } from "./security.js";
import type { TypedConfig } from "./types.js";

/** The reserved gateway name of sidecars (Istio's constants.IstioMeshGateway). */
const MESH_GATEWAY = "mesh";

/** One server of a Gateway, as merged for a router (hosts with `./` and `*\/` resolved). */
export interface GatewayServer {
  readonly server: Server;
  /** The Gateway it belongs to. */
  readonly gateway: ConfigRef;
  /** `<namespace>/<name>` of its Gateway, as VirtualServices name it once resolved. */
  readonly gatewayName: string;
  /** The server's hosts, `./h` as `<gateway namespace>/h`, `*\/h` as `h` (Istio's sanitizeServerHostNamespace). */
  readonly hosts: readonly string[];
  readonly protocol: Protocol;
  /** Its RDS name: `http.<port>` or `https.<server port>.<port name>.<gateway>.<namespace>`; "" for none. */
  readonly routeName: string;
  /** The SNI hosts of its filter chain (its hosts without namespaces, sorted, once each); empty without TLS. */
  readonly sniHosts: readonly string[];
}

/** The servers of one workload port (one listener). */
export interface GatewayPort {
  /** The port the listener binds: the server port translated to the workload's (see resolvePorts). */
  readonly port: number;
  /** The address the listener binds (the servers' `bind`); "" for the wildcard. */
  readonly bind: string;
  /** True for a port of plaintext HTTP servers: one HCM chain by RDS `http.<port>` for all of them. */
  readonly plaintextHttp: boolean;
  readonly servers: GatewayServer[];
}

/**
 * Every Gateway that selects a router, merged (Istio's MergedGateway): the
 * listener ports in order, the servers of each route name, and the names of
 * the servers that were dropped, with why.
 */
export interface MergedGateway {
  readonly ports: readonly GatewayPort[];
  readonly serversByRouteName: ReadonlyMap<string, readonly GatewayServer[]>;
  /** The Gateways merged, in merge order. */
  readonly gateways: readonly ConfigRef[];
  /** Servers skipped as Istio skips them (duplicate TLS hosts, protocol conflicts, route name clashes). */
  readonly rejected: readonly { gateway: string; port: number; reason: string }[];
}

/** Istio's Protocol.IsHTTP for a server port. */
function isHttp(protocol: Protocol): boolean {
  return (
    protocol === Protocol.PROTOCOL_HTTP ||
    protocol === Protocol.PROTOCOL_HTTP2 ||
    protocol === Protocol.PROTOCOL_GRPC ||
    protocol === Protocol.PROTOCOL_GRPC_WEB
  );
}

/** Istio's protocol.Parse for a Gateway port's protocol: a name it does not know is TCP. */
function serverProtocol(name: string): Protocol {
  const protocol = parseProtocol(name);
  return protocol === Protocol.PROTOCOL_UNSPECIFIED ? Protocol.PROTOCOL_TCP : protocol;
}

/** Istio's IsPassThroughServer: TLS mode PASSTHROUGH or AUTO_PASSTHROUGH. */
export function isPassthrough(server: Server): boolean {
  return (
    server.tls !== undefined &&
    (server.tls.mode === TlsMode.PASSTHROUGH || server.tls.mode === TlsMode.AUTO_PASSTHROUGH)
  );
}

/** Istio's IsTLSServer: a non-HTTP server with TLS settings (termination or passthrough). */
function isTlsServer(server: Server, protocol: Protocol): boolean {
  return server.tls !== undefined && !isHttp(protocol);
}

/** Istio's IsHTTPServer: HTTP, or HTTPS that terminates TLS. */
function isHttpServer(server: Server, protocol: Protocol): boolean {
  if (isHttp(protocol)) return true;
  return protocol === Protocol.PROTOCOL_HTTPS && server.tls !== undefined && !isPassthrough(server);
}

/** Istio's gatewayRDSRouteName; "" for a server without an HCM (TCP, TLS, passthrough). */
function routeNameOf(server: Server, protocol: Protocol, port: number, gateway: ConfigRef): string {
  const bind = server.bind ? `.${server.bind}` : "";
  if (isHttp(protocol)) return `http.${port}${bind}`;
  if (protocol === Protocol.PROTOCOL_HTTPS && server.tls && !isPassthrough(server))
    return `https.${server.port?.number}.${server.port?.name}.${gateway.name}.${gateway.namespace}${bind}`;
  return "";
}

/** Istio's sanitizeServerHostNamespace. */
function sanitizeHosts(hosts: readonly string[], namespace: string): string[] {
  const out: string[] = [];
  for (const host of hosts) {
    const slash = host.indexOf("/");
    if (slash < 0) {
      out.push(host);
      continue;
    }
    const [ns, name] = [host.slice(0, slash), host.slice(slash + 1)];
    if (ns === ".") out.push(`${namespace}/${name}`);
    else if (ns === "*") {
      if (name === "*") return ["*"];
      out.push(name);
    } else out.push(host);
  }
  return out;
}

/** Istio's GetSNIHostsForServer: the hosts without their namespaces, sorted, once each. */
function sniHostsOf(hosts: readonly string[]): string[] {
  return [...new Set(hosts.map((host) => host.slice(host.indexOf("/") + 1)))].sort();
}

/**
 * The ports of the router's own services (Istio's ServiceTargets): those of
 * its namespace whose selector selects its labels.
 */
function serviceTargets(push: PushContext, proxy: MeshProxy): Service[] {
  return push.services.filter(
    (service) =>
      service.namespace === proxy.namespace &&
      Object.keys(service.selector).length > 0 &&
      selectorMatches(service.selector, proxy.labels),
  );
}

/**
 * Istio's resolvePorts for a Gateway selected by labels: a server port that
 * is a port of one of the router's services binds that port's targetPort
 * (the first service's, by hostname); any other server port binds as written.
 */
function resolvePort(number: number, targets: readonly Service[]): number {
  for (const service of targets)
    for (const port of service.ports) if (port.number === number) return port.targetPort || number;
  return number;
}

const merged = new WeakMap<PushContext, Map<string, MergedGateway | undefined>>();

/**
 * The Gateways that apply to a router, merged (Istio's mergeGateways), or
 * undefined if none selects it: every Gateway whose selector is a subset of
 * the router's labels, in any namespace (Istio's default,
 * PILOT_SCOPE_GATEWAY_TO_NAMESPACE=false), a Gateway without a selector
 * applying to every router; in namespace/name order (istiod orders by
 * creation time, which ingest does not keep). Memoized per snapshot,
 * router namespace and labels.
 *
 * Conflicts are resolved as Istio's: the first server of a port decides
 * whether it is a plaintext port (HTTP servers merge into it; any other
 * protocol is skipped) or a TLS one (each server its own filter chain; a
 * server naming a host another TLS server of the port already has is
 * skipped, as Envoy rejects two chains with one SNI; two HTTPS servers with
 * one route name are skipped).
 */
export function mergedGatewayFor(
  push: PushContext,
  proxy: MeshProxy,
  /** Told once per snapshot and router of each server skipped (istiod logs them and counts pilot_total_rejected_configs). */
  logger?: { warn(object: object, message: string): void },
): MergedGateway | undefined {
  const key = `${proxy.namespace}\u0000${JSON.stringify(Object.entries(proxy.labels).sort())}`;
  let byProxy = merged.get(push);
  if (!byProxy) {
    byProxy = new Map();
    merged.set(push, byProxy);
  }
  if (byProxy.has(key)) return byProxy.get(key);
  const result = mergeGateways(push, proxy);
  byProxy.set(key, result);
  for (const rejected of result?.rejected ?? [])
    logger?.warn(rejected, `gateway server skipped for routers of ${proxy.namespace}: ${rejected.reason}`);
  return result;
}

/** Istio's InternalGatewayServiceAnnotation: the Services (hostnames) whose proxies a Gateway made from a Gateway API Gateway applies to. */
const GATEWAY_SERVICE_ANNOTATION = "internal.istio.io/gateway-service";

/** True if the Gateway was made from a Gateway API Gateway (it names its Service, not a selector). */
export function madeFromGatewayApi(config: TypedConfig<Gateway>): boolean {
  return config.annotations?.[GATEWAY_SERVICE_ANNOTATION] !== undefined;
}

/**
 * Whether a Gateway applies to a router (Istio's PushContext.mergeGateways):
 * one made from a Gateway API Gateway applies to the routers behind one of
 * the Services it names, in its namespace; any other, to the routers its
 * selector selects.
 */
export function gatewayAppliesTo(push: PushContext, config: TypedConfig<Gateway>, proxy: MeshProxy): boolean {
  const services = config.annotations?.[GATEWAY_SERVICE_ANNOTATION];
  if (services === undefined) return selectorMatches(config.spec.selector, proxy.labels);
  const hostnames = new Set(services.split(","));
  return serviceTargets(push, proxy).some(
    (service) => hostnames.has(service.hostname) && service.namespace === config.ref.namespace,
  );
}

function mergeGateways(push: PushContext, proxy: MeshProxy): MergedGateway | undefined {
  const selected = push.gateways.filter((config) => gatewayAppliesTo(push, config, proxy));
  if (selected.length === 0) return undefined;
  const targets = serviceTargets(push, proxy);
  // By port and bind: servers with another bind address get a listener of their own (Istio's ServerPort).
  const ports = new Map<string, GatewayPort>();
  const serversByRouteName = new Map<string, GatewayServer[]>();
  const tlsHostsByPort = new Map<string, Set<string>>();
  const rejected: Array<{ gateway: string; port: number; reason: string }> = [];
  for (const config of selected) {
    const gatewayName = `${config.ref.namespace}/${config.ref.name}`;
    for (const server of config.spec.servers) {
      if (!server.port) continue;
      const port = resolvePort(server.port.number, targets);
      const portKey = `${port}\u0000${server.bind}`;
      const protocol = serverProtocol(server.port.protocol);
      const hosts = sanitizeHosts(server.hosts, config.ref.namespace);
      const entry: GatewayServer = {
        server,
        gateway: config.ref,
        gatewayName,
        hosts,
        protocol,
        routeName: routeNameOf(server, protocol, port, config.ref),
        sniHosts: server.tls ? sniHostsOf(hosts) : [],
      };
      const reject = (reason: string) => rejected.push({ gateway: gatewayName, port, reason });
      if (server.tls) {
        const known = tlsHostsByPort.get(portKey) ?? new Set<string>();
        tlsHostsByPort.set(portKey, known);
        const duplicates = hosts.filter((host) => known.has(host));
        if (duplicates.length > 0) {
          reject(`duplicate TLS hosts ${duplicates.join(", ")}`);
          continue;
        }
        for (const host of hosts) known.add(host);
      }
      const existing = ports.get(portKey);
      if (!existing) {
        ports.set(portKey, {
          port,
          bind: server.bind,
          plaintextHttp: !isTlsServer(server, protocol) && isHttp(protocol),
          servers: [entry],
        });
        if (isHttpServer(server, protocol)) serversByRouteName.set(entry.routeName, [entry]);
        continue;
      }
      const first = existing.servers[0]!;
      const plaintext = !isTlsServer(first.server, first.protocol);
      if (plaintext) {
        // Istio's canMergeProtocols: only HTTP servers join an HTTP port.
        if (!(isHttp(first.protocol) && isHttp(protocol))) {
          reject(`protocol ${server.port.protocol} conflicts with ${first.server.port?.protocol}`);
          continue;
        }
        existing.servers.push(entry);
        serversByRouteName.get(entry.routeName)?.push(entry);
        continue;
      }
      if (!isTlsServer(server, protocol)) {
        reject(`plaintext ${server.port.protocol} server on a TLS port`);
        continue;
      }
      if (isHttpServer(server, protocol)) {
        if (serversByRouteName.has(entry.routeName)) {
          reject(`route name ${entry.routeName} is not unique`);
          continue;
        }
        serversByRouteName.set(entry.routeName, [entry]);
      }
      existing.servers.push(entry);
    }
  }
  return {
    ports: [...ports.values()],
    serversByRouteName,
    gateways: selected.map((config) => config.ref),
    rejected,
  };
}

/** A gateway name as a VirtualService gives it, resolved to `<namespace>/<name>` (Istio's resolveGatewayName). */
export function resolveGatewayName(name: string, namespace: string): string {
  if (name === MESH_GATEWAY) return name;
  const slash = name.indexOf("/");
  if (slash < 0) return `${namespace}/${name}`;
  if (name.startsWith("./")) return `${namespace}/${name.slice(2)}`;
  return name;
}

/**
 * The VirtualServices bound to a gateway (`<namespace>/<name>`) that a
 * router of namespace sees (Istio's VirtualServicesForGateway): exported
 * to it, and naming the gateway in `gateways`.
 */
export function virtualServicesForGateway(
  push: PushContext,
  namespace: string,
  gatewayName: string,
): RoutedVirtualService[] {
  return push.virtualServices.filter(
    (config) =>
      visible(config.spec.exportTo, config.ref.namespace, namespace) &&
      config.spec.gateways.some((name) => resolveGatewayName(name, config.ref.namespace) === gatewayName),
  );
}

/**
 * Istio's host.NamesForNamespace then Intersection: a server's hosts seen
 * from a VirtualService's namespace (`ns/h` only from ns, `*\/h` and `h` from
 * all) intersected with the VirtualService's hosts, the more specific of
 * each matching pair kept, each once.
 */
export function intersectHosts(
  serverHosts: readonly string[],
  namespace: string,
  vsHosts: readonly string[],
): string[] {
  const names: string[] = [];
  for (const host of serverHosts) {
    const slash = host.indexOf("/");
    if (slash < 0) names.push(host);
    else {
      const ns = host.slice(0, slash);
      if (ns === namespace || ns === "*") names.push(host.slice(slash + 1));
    }
  }
  const out = new Set<string>();
  for (const a of names)
    for (const b of vsHosts) {
      if (hostMatches(a, b)) out.add(b);
      else if (hostMatches(b, a)) out.add(a);
    }
  return [...out];
}

/**
 * Istio's pickMatchingGatewayHosts: whether a server's hosts (`ns/h` only for
 * a VirtualService of ns) match any of a VirtualService's hosts.
 */
export function matchesGatewayHosts(serverHosts: readonly string[], config: RoutedVirtualService): boolean {
  return intersectHosts(serverHosts, config.ref.namespace, config.hosts).length > 0;
}
