import { isIP } from "node:net";
import { ROUTE_SEMANTICS_ANNOTATION } from "@sextant/gateway-api";
import { resolveHost } from "@sextant/model";
import { type ConfigRef, packAny, type Service } from "@sextant/proto";
import {
  CorsPolicy,
  HTTPFault,
  PreviousHostsPredicate,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { HeaderValueOption_HeaderAppendAction as AppendAction } from "@sextant/proto/gen/envoy/config/core/v3/base";
import {
  RouteAction_ClusterNotFoundResponseCode as ClusterNotFoundResponseCode,
  RedirectAction_RedirectResponseCode as RedirectCode,
} from "@sextant/proto/gen/envoy/config/route/v3/route_components";
import { FractionalPercent_DenominatorType } from "@sextant/proto/gen/envoy/type/v3/percent";
import type { LoadBalancerSettings_ConsistentHashLB } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import {
  type Destination,
  type Headers_HeaderOperations,
  type HTTPBody,
  type HTTPMatchRequest,
  type HTTPRedirect,
  type HTTPRetry,
  type HTTPRoute,
  type CorsPolicy as IstioCorsPolicy,
  type Percent,
  HTTPRedirect_RedirectPortSelection as RedirectPortSelection,
  type StringMatch,
  CorsPolicy_UnmatchedPreflights as UnmatchedPreflights,
  type VirtualService,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { Protocol, Resolution } from "@sextant/proto/gen/sextant/mesh/v1/service";
import { regexProblem } from "@sextant/validation";
import { routeDependencies } from "../../cache/dependencies.js";
import { sourceLabelsSelection } from "../../cache/selection.js";
import { cacheKey } from "../../cache/xds-cache.js";
import { aliasesByTarget, clusterHost, isAlias } from "../../model/aliases.js";
import { usesAutoAllocatedAddresses } from "../../model/auto-allocation.js";
import type { RoutedVirtualService } from "../../model/delegation.js";
import { resolveGatewayName } from "../../model/gateway.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { selectorMatches } from "../../model/security.js";
import { type SidecarScope, sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource, TypedConfig, WatchedNames } from "../../model/types.js";
import { escapeRegex } from "../common/rbac.js";
import {
  FAULT_FILTER_NAME,
  fraction,
  headerMatcher,
  matchRegexesValid,
  presentIfAnyValue,
  translateFault,
  translateMatch,
} from "../common/routes.js";
import { type GenerationContext, generateByName } from "../generator.js";
import { outboundClusterName } from "../names.js";
import { withAutoAllocatedAddresses } from "./auto-addresses.js";
import { addressesOfProxyFamilies, ipMode, WILDCARD_IPV4 } from "./dual-stack.js";
import { CORS_FILTER_NAME, PASSTHROUGH_CLUSTER } from "./filters.js";

/** A plain object RouteConfiguration.fromPartial turns into a typed message. */
type Plain = Record<string, unknown>;

const ZERO = { seconds: 0, nanos: 0 };

/**
 * Istio's DefaultMaxDirectResponseBodySizeBytes (1 MiB, the body size its
 * validation allows), set on every outbound route configuration: Envoy's own
 * limit is 4 KiB and it rejects a route configuration with a larger body.
 */
export const MAX_DIRECT_RESPONSE_BODY_SIZE_BYTES = 1024 * 1024;

/** Ports Istio serves through an HCM (its Protocol.IsHTTP); every other protocol is TCP. */
export function isHttpProtocol(protocol: Protocol): boolean {
  return (
    protocol === Protocol.PROTOCOL_HTTP ||
    protocol === Protocol.PROTOCOL_HTTP2 ||
    protocol === Protocol.PROTOCOL_GRPC ||
    protocol === Protocol.PROTOCOL_GRPC_WEB
  );
}

/**
 * Istio's Protocol.IsHTTPOrSniffed: the ports an outbound HTTP route
 * configuration serves, HTTP ones and sniffed (unnamed, unknown-protocol)
 * ones, whose listeners have an HTTP chain too.
 */
function carriesHttp(protocol: Protocol): boolean {
  return isHttpProtocol(protocol) || protocol === Protocol.PROTOCOL_UNSPECIFIED;
}

/**
 * Route configurations for Envoy sidecars (RDS), one per name the proxy
 * asks for; the outbound listeners ask for `<port>` (`0.0.0.0_<port>`) and
 * `<hostname>:<port>` (the HTTP chain of a sniffed port on its own address).
 * Cached by the proxy's namespace, the VirtualService source labels that
 * select it, its Sidecar and whether it uses auto-allocated addresses, so
 * that the proxies of a namespace share them; dropped when a
 * VirtualService of one of its hosts changes (cache/dependencies.ts).
 */
export function generateSidecarRoutes(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy } = context;
  const scope = sidecarScope(push, proxy);
  const sidecar = scope.sidecar ? `${scope.sidecar.ref.namespace}/${scope.sidecar.ref.name}` : "";
  const selection = sourceLabelsSelection(push, proxy);
  return generateByName(
    context,
    watched,
    (name) =>
      cacheKey(
        "rds-sidecar",
        proxy.namespace,
        selection,
        sidecar,
        usesAutoAllocatedAddresses(proxy) ? "auto-allocated" : "",
        // Virtual hosts list the cluster IPs of the proxy's IP families.
        ipMode(proxy),
        name,
      ),
    (name) => buildSidecarRouteConfiguration(push, proxy, name),
    (name) => routeDependencies(scope.sidecar !== undefined, routeHosts(scope, name)),
  );
}

/** The hostnames whose virtual hosts a route configuration name can hold: the in-scope services with its port. */
function routeHosts(scope: SidecarScope, name: string): string[] {
  const parsed = parseRouteName(name);
  if (!parsed) return [];
  if (parsed.host !== undefined) return [parsed.host];
  return scope.services
    .filter((service) => service.ports.some((port) => port.number === parsed.port))
    .map((service) => service.hostname);
}

/**
 * What an outbound route configuration name asks for (Istio's
 * extractListenerPort): `<port>`, or `<hostname>:<port>` for one sniffed
 * service; undefined for any other name.
 */
function parseRouteName(name: string): { port: number; host?: string } | undefined {
  const match = /^(?:([^:]+):)?(\d+)$/.exec(name);
  if (!match) return undefined;
  const port = Number(match[2]);
  if (port <= 0 || port > 65535) return undefined;
  return match[1] ? { port, host: match[1] } : { port };
}

/**
 * Istio's outbound route configuration (buildSidecarOutboundHTTPRouteConfig).
 *
 * `<port>` (BuildSidecarOutboundVirtualHosts): one virtual host
 * `<fqdn>:<port>` per service in the proxy's scope whose port of that
 * number is HTTP or sniffed, sorted by name, each with the routes of its
 * VirtualService or the default route, then the catch-all virtual host
 * `allow_any` (to PassthroughCluster) or `block_all` (502) according to the
 * scope's outboundTrafficPolicy.
 *
 * `<hostname>:<port>` (a sniffed port on its own address, VIP or pod IP, whose listener only
 * that service's traffic reaches): that service's virtual host alone, its
 * domains `*`, without a catch-all; no virtual host if the port is not
 * there or not HTTP or sniffed.
 *
 * Both ignore the port in host matching, as Istio's for every proxy but
 * proxyless gRPC: a Host header `reviews:9080` matches the domain `reviews`.
 *
 * Null for a name that is neither.
 */
export function buildSidecarRouteConfiguration(
  push: PushContext,
  proxy: MeshProxy,
  name: string,
): GeneratedResource | null {
  const parsed = parseRouteName(name);
  if (!parsed) return null;
  const { port, host } = parsed;
  const scope = sidecarScope(push, proxy);
  const sources: ConfigRef[] = [];
  const addSource = (ref: ConfigRef) => {
    if (!sources.some((s) => s.kind === ref.kind && s.namespace === ref.namespace && s.name === ref.name))
      sources.push(ref);
  };
  if (scope.sidecar) addSource(scope.sidecar.ref);
  const hasPort = (service: Service) =>
    service.ports.some((p) => p.number === port && carriesHttp(p.protocol));
  const virtualHost = (service: Service, domains: string[], routes?: Plain[]): Plain => ({
    name: `${service.hostname}:${port}`,
    domains,
    routes: routes ?? serviceRoutes(push, proxy, service, port, addSource),
    includeRequestAttemptCount: true,
  });
  const virtualHosts: Plain[] = [];
  if (host !== undefined) {
    // Istio builds the port's virtual hosts and keeps the one with the hostname among its
    // domains: the service's own, whose FQDN no other service's domains can claim.
    const service = scope.servicesByHost.get(host);
    if (service && hasPort(service) && !isAlias(service)) virtualHosts.push(virtualHost(service, ["*"]));
  } else {
    const claimed = new Set<string>();
    const byHostname = (a: Service, b: Service) =>
      a.hostname < b.hostname ? -1 : a.hostname > b.hostname ? 1 : 0;
    // A ServiceEntry host's auto-allocated address is one of its domains for a proxy that uses it.
    const inScope = scope.services
      .filter(hasPort)
      .map((service) => withAutoAllocatedAddresses(push, proxy, service))
      .sort(byHostname);
    const services = inScope.filter((service) => !isAlias(service));
    const knownHosts = new Set(services.map((service) => service.hostname));
    const aliases = aliasesByTarget(push);
    const built: Array<{ service: Service; virtualHost: Plain }> = [];
    // An alias (ExternalName service) has no virtual host of its own, its names are domains of its
    // target's; but Istio builds the virtual hosts of VirtualServices first, and one for an alias's
    // own VirtualService (its routes, never a default route), which so keeps the alias's names.
    for (const alias of inScope.filter(isAlias)) {
      const routes = virtualServiceRoutes(push, proxy, alias, port, addSource);
      if (routes.length === 0) continue;
      const domains = uniqueDomains(virtualHostDomains(alias, proxy, push.domainSuffix), claimed, knownHosts);
      if (domains.length > 0)
        built.push({ service: alias, virtualHost: virtualHost(alias, domains, routes) });
    }
    for (const service of services) {
      const domains = uniqueDomains(
        virtualHostDomains(service, proxy, push.domainSuffix, aliases.get(service.hostname)),
        claimed,
        knownHosts,
      );
      if (domains.length > 0) built.push({ service, virtualHost: virtualHost(service, domains) });
    }
    virtualHosts.push(
      ...built.sort((a, b) => byHostname(a.service, b.service)).map((entry) => entry.virtualHost),
      catchAllVirtualHost(scope.outboundTrafficPolicy),
    );
  }
  const configuration = RouteConfiguration.fromPartial({
    name,
    virtualHosts: virtualHosts as never,
    validateClusters: false,
    maxDirectResponseBodySizeBytes: MAX_DIRECT_RESPONSE_BODY_SIZE_BYTES,
    // The domains carry no port (see virtualHostDomains).
    ignorePortInHostMatching: true,
  });
  return { name, resource: packAny(TypeUrl.RouteConfiguration, RouteConfiguration, configuration), sources };
}

/**
 * A service's routes on a port: those of its VirtualService, else the
 * default route, as well when none of the VirtualService's http routes
 * applies here (Istio builds no virtual host from a VirtualService without
 * routes, so the service keeps its default one): a VirtualService with only
 * tcp routes for a sniffed port leaves its HTTP traffic the default route.
 */
function serviceRoutes(
  push: PushContext,
  proxy: MeshProxy,
  service: Service,
  port: number,
  addSource: (ref: ConfigRef) => void,
): Plain[] {
  const routes = virtualServiceRoutes(push, proxy, service, port, addSource);
  return routes.length > 0 ? routes : [defaultRoute(push, proxy, service, port, addSource)];
}

/** The routes of a service's VirtualService on a port; none without one. */
function virtualServiceRoutes(
  push: PushContext,
  proxy: MeshProxy,
  service: Service,
  port: number,
  addSource: (ref: ConfigRef) => void,
): Plain[] {
  const virtualService = push.virtualServiceFor(service.hostname, proxy.namespace);
  if (!virtualService) return [];
  addSource(virtualService.ref);
  for (const delegate of virtualService.delegates) addSource(delegate);
  return buildHttpRoutes(push, proxy, virtualService, port, addSource);
}

/** Istio's buildCatchAllVirtualHost: `allow_any` to PassthroughCluster, or `block_all` (502) under REGISTRY_ONLY. */
function catchAllVirtualHost(policy: "ALLOW_ANY" | "REGISTRY_ONLY"): Plain {
  if (policy === "REGISTRY_ONLY")
    return {
      name: "block_all",
      domains: ["*"],
      routes: [{ name: "block_all", match: { prefix: "/" }, directResponse: { status: 502 } }],
      includeRequestAttemptCount: true,
    };
  return {
    name: "allow_any",
    domains: ["*"],
    routes: [
      {
        name: "allow_any",
        match: { prefix: "/" },
        route: { cluster: PASSTHROUGH_CLUSTER, timeout: ZERO, maxGrpcTimeout: ZERO },
      },
    ],
    includeRequestAttemptCount: true,
  };
}

/** The domains of a service's virtual host, and which of them are its expanded (alternative) names. */
interface VirtualHostDomains {
  domains: string[];
  /** Istio's altHosts: the absolute FQDN and short names, which yield to another service's own hostname. */
  altHosts: string[];
}

/**
 * Istio's generateVirtualHostDomains for an Envoy sidecar (Istio's
 * SidecarIgnorePort: every proxy but proxyless gRPC), whose route
 * configurations set ignore_port_in_host_matching, so no domain carries a
 * port: the hostname, its alternative names (GenerateAltVirtualHosts: the
 * absolute FQDN `<fqdn>.`, Istio's PILOT_ENABLE_ABSOLUTE_FQDN_VHOST_DOMAIN,
 * on since 1.27; then, for a hostname under the proxy's `.svc.<suffix>`,
 * the short names a client in the proxy's namespace may use: in the same
 * namespace `name`, `name.ns.svc`, `name.ns`; from another one `name.ns`,
 * `name.ns.svc`), then each of the service's aliases (the ExternalName
 * services naming it, Istio's Attributes.Aliases) with its alternative
 * names, for a headless Kubernetes service each of these again
 * with `*.` (a pod's own name, `<pod>.<service>...`, routes to the
 * service), then the service's addresses the proxy can use (see
 * {@link virtualHostAddresses}), an IPv6 one bracketed.
 */
export function virtualHostDomains(
  service: Service,
  proxy: MeshProxy,
  domainSuffix: string,
  aliases: readonly string[] = [],
): VirtualHostDomains {
  const names: string[] = [];
  const altHosts: string[] = [];
  for (const host of [service.hostname, ...aliases]) {
    const alternatives = alternativeHosts(host, proxy.namespace, domainSuffix);
    names.push(bracketIPv6(host), ...alternatives);
    altHosts.push(...alternatives);
  }
  const headless =
    service.registry === "kubernetes" && service.resolution === Resolution.RESOLUTION_PASSTHROUGH;
  const wildcards = headless ? names.map((name) => `*.${name}`) : [];
  const addresses = virtualHostAddresses(service, proxy).map(bracketIPv6);
  return { domains: [...names, ...wildcards, ...addresses], altHosts };
}

/**
 * Istio's GenerateAltVirtualHosts without ports, for a proxy in Kubernetes
 * (its DNS domain `<namespace>.svc.<suffix>`): the absolute FQDN (not for an
 * IP address), then the short names of a hostname `<name>.<ns>.svc.<suffix>`.
 */
export function alternativeHosts(host: string, proxyNamespace: string, domainSuffix: string): string[] {
  const out = isIP(host) === 0 ? [`${host}.`] : [];
  if (!host.endsWith(`.svc.${domainSuffix}`)) return out;
  const svc = host.indexOf(".svc.");
  const dot = host.indexOf(".");
  if (dot < 0 || dot >= svc) return out;
  const short = host.slice(0, dot);
  const withNamespace = host.slice(0, svc);
  const namespace = host.slice(dot + 1, svc);
  if (namespace === proxyNamespace) out.push(short, `${withNamespace}.svc`, withNamespace);
  else out.push(withNamespace, `${withNamespace}.svc`);
  return out;
}

/**
 * The addresses of a service a proxy's virtual host lists (Istio's
 * GetAllAddressesForProxy on the per-port copy of the service it routes
 * by). A Kubernetes service: its cluster IPs of the proxy's IP families,
 * every one for a dual-stack proxy (Sextant's dual-stack rule, Istio with
 * ISTIO_DUAL_STACK), none if no cluster IP is of the proxy's families. A
 * ServiceEntry: its first address, of any family; Istio makes a service
 * per address and keys the port's services by hostname, so one address
 * (whichever its unordered registry lists last) reaches the virtual host,
 * and Sextant binds the first (see listeners.ts). Never `0.0.0.0` (a
 * headless service, a ServiceEntry without addresses).
 */
function virtualHostAddresses(service: Service, proxy: MeshProxy): string[] {
  const usable = (address: string) => address !== "" && address !== WILDCARD_IPV4;
  if (service.registry === "kubernetes")
    return addressesOfProxyFamilies(proxy, service.addresses).filter(usable);
  const first = service.addresses.find(usable);
  return first === undefined ? [] : [first];
}

/** Istio's IPv6Compliant: a name with a colon (an IPv6 address) in brackets, as a Host header carries it. */
function bracketIPv6(name: string): string {
  return name.includes(":") ? `[${name}]` : name;
}

/**
 * Istio's dedupeDomains: a domain (case-insensitively) belongs to the first
 * virtual host that claims it, and an alternative name generated for one
 * service that is another service's own hostname (a ServiceEntry host
 * `reviews.default` beside the Kubernetes service `reviews` of namespace
 * default) is left to that service. Envoy rejects a route configuration
 * with a domain in two virtual hosts. Claims the domains it returns.
 */
function uniqueDomains(
  { domains, altHosts }: VirtualHostDomains,
  claimed: Set<string>,
  knownHosts: ReadonlySet<string>,
): string[] {
  const kept: string[] = [];
  for (const domain of domains) {
    const lower = domain.toLowerCase();
    if (claimed.has(lower)) continue;
    if (altHosts.includes(domain) && knownHosts.has(domain)) continue;
    kept.push(domain);
    claimed.add(lower);
  }
  return kept;
}

/** Istio's BuildDefaultHTTPOutboundRoute: everything to `outbound|<port>||<fqdn>`, the default retry policy. */
function defaultRoute(
  push: PushContext,
  proxy: MeshProxy,
  service: Service,
  port: number,
  addSource: (ref: ConfigRef) => void,
): Plain {
  const hashPolicy = hashPolicyFor(push, proxy, { host: service.hostname, subset: "", port }, addSource);
  return {
    name: "default",
    match: { prefix: "/" },
    route: {
      cluster: outboundClusterName(port, "", service.hostname),
      timeout: ZERO,
      retryPolicy: defaultRetryPolicy(hashPolicy.length > 0),
      maxGrpcTimeout: ZERO,
      ...(hashPolicy.length > 0 ? { hashPolicy } : {}),
    },
    decorator: { operation: `${service.hostname}:${port}/*` },
  };
}

/**
 * Istio's BuildHTTPRoutesForVirtualService for a sidecar: for each HTTP
 * route, one Envoy route per match that applies to this proxy and port
 * (match.port, sourceLabels, sourceNamespace, gateways "mesh"), or one
 * catch-all; translation stops after the first catch-all route, as Istio's.
 */
export function buildHttpRoutes(
  push: PushContext,
  proxy: MeshProxy,
  virtualService: RoutedVirtualService,
  port: number,
  addSource: (ref: ConfigRef) => void,
  /** The gateway the routes are for: "mesh" for a sidecar, `<namespace>/<name>` for a router's server. */
  gateway = "mesh",
  /** The routes serve a gateway server with `tls` (Istio's IsTLS): a redirect's default scheme is https. */
  isTls = false,
): Plain[] {
  const routes: Plain[] = [];
  for (const route of virtualService.spec.http) {
    // A root route whose delegate was not merged has nothing to route to (Istio drops it).
    if (route.delegate || !routeRegexesValid(route)) continue;
    const matches: Array<HTTPMatchRequest | undefined> = route.match.length > 0 ? route.match : [undefined];
    let catchAll = false;
    for (const match of matches) {
      if (match && !matchApplies(match, proxy, port, virtualService.ref.namespace, gateway)) continue;
      if (!matchRegexesValid(match)) continue;
      const translated = translateRoute(push, proxy, virtualService, route, match, port, isTls, addSource);
      if (!translated) break;
      routes.push(translated);
      if (isCatchAll(match)) {
        catchAll = true;
        break;
      }
    }
    if (catchAll) break;
  }
  return routes;
}

/**
 * True if the regexes of a route outside its matches (the uri regex rewrite)
 * are ones Envoy's RE2 compiles; ingest refuses the others, and push never
 * emits one, since Envoy would reject the whole route configuration.
 */
function routeRegexesValid(route: HTTPRoute): boolean {
  const rewrite = route.rewrite?.uriRegexRewrite;
  return !rewrite || regexProblem(rewrite.match) === undefined;
}

function matchApplies(
  match: HTTPMatchRequest,
  proxy: MeshProxy,
  port: number,
  vsNamespace: string,
  gateway: string,
): boolean {
  if (match.port && match.port !== port) return false;
  if (!selectorMatches(match.sourceLabels, proxy.labels)) return false;
  if (match.sourceNamespace && match.sourceNamespace !== proxy.namespace) return false;
  if (
    match.gateways.length > 0 &&
    !match.gateways.some((name) => resolveGatewayName(name, vsNamespace) === gateway)
  )
    return false;
  return true;
}

/** Istio's isCatchAllMatch: no match, or only a uri prefix "/" (or regex "*", ".*"). */
function isCatchAll(match: HTTPMatchRequest | undefined): boolean {
  if (!match) return true;
  const onlyUri =
    !match.scheme &&
    !match.method &&
    !match.authority &&
    Object.keys(match.headers).length === 0 &&
    Object.keys(match.queryParams).length === 0 &&
    Object.keys(match.withoutHeaders).length === 0;
  if (!onlyUri) return false;
  if (!match.uri) return true;
  return match.uri.prefix === "/" || match.uri.regex === "*" || match.uri.regex === ".*";
}

/** Istio's UseGatewaySemantics: a VirtualService made from a Gateway API route. */
function usesGatewaySemantics(virtualService: TypedConfig<VirtualService>): boolean {
  return virtualService.annotations?.[ROUTE_SEMANTICS_ANNOTATION] === "gateway";
}

/**
 * One Envoy route; undefined where Envoy would reject it: forwarding without
 * a cluster (no destination), or a direct response body over the limit.
 */
function translateRoute(
  push: PushContext,
  proxy: MeshProxy,
  virtualService: TypedConfig<VirtualService>,
  route: HTTPRoute,
  match: HTTPMatchRequest | undefined,
  port: number,
  isTls: boolean,
  addSource: (ref: ConfigRef) => void,
): Plain | undefined {
  const vsNamespace = virtualService.ref.namespace;
  const out: Plain = {};
  const name = match?.name ? `${route.name}.${match.name}` : route.name;
  if (name) out.name = name;
  const gatewaySemantics = usesGatewaySemantics(virtualService);
  out.match = envoyMatch(match, gatewaySemantics);
  const perFilter: Record<string, unknown> = {};

  const requestOps = headerOperations(route.headers?.request);
  const responseOps = headerOperations(route.headers?.response);

  if (route.redirect) {
    out.redirect = redirectAction(route.redirect, port, isTls);
  } else if (route.directResponse) {
    const response = route.directResponse;
    const body = response.body;
    // Validation refuses a bigger body; Envoy would reject the route configuration for it.
    if (bodySize(body) > MAX_DIRECT_RESPONSE_BODY_SIZE_BYTES) return undefined;
    out.directResponse = {
      status: response.status,
      ...(body?.string !== undefined
        ? { body: { inlineString: body.string } }
        : body?.bytes !== undefined
          ? { body: { inlineBytes: body.bytes } }
          : {}),
    };
  } else {
    const destinations = route.route.filter((d) => route.route.length === 1 || d.weight > 0);
    // A Gateway API backend istiod could not resolve (not permitted, of an
    // unsupported kind) is an empty destination: its cluster `outbound|<port>||`
    // never exists, so its share gets the route's 500. Elsewhere Envoy needs a host.
    const unresolved = destinations.some((d) => !d.destination?.host);
    if (destinations.length === 0 || (unresolved && !gatewaySemantics)) return undefined;
    const clusterOf = (destination: Destination | undefined) =>
      destination?.host
        ? destinationCluster(push, destination, vsNamespace, port)
        : outboundClusterName(port, "", "");
    const action: Plain = {};
    let destinationAuthority = "";
    if (destinations.length === 1) {
      const only = destinations[0]!;
      action.cluster = clusterOf(only.destination);
      // A single destination's header operations join the route's, as in Istio.
      const request = headerOperations(only.headers?.request);
      const response = headerOperations(only.headers?.response);
      requestOps.add.push(...request.add);
      requestOps.remove.push(...request.remove);
      responseOps.add.push(...response.add);
      responseOps.remove.push(...response.remove);
      // Its authority applies only where the route sets none (Istio's processDestination).
      destinationAuthority = request.authority;
    } else {
      action.weightedClusters = {
        clusters: destinations.map((destination) => {
          const request = headerOperations(destination.headers?.request);
          const response = headerOperations(destination.headers?.response);
          return {
            name: clusterOf(destination.destination),
            weight: destination.weight,
            ...(request.add.length > 0 ? { requestHeadersToAdd: request.add } : {}),
            ...(request.remove.length > 0 ? { requestHeadersToRemove: request.remove } : {}),
            ...(response.add.length > 0 ? { responseHeadersToAdd: response.add } : {}),
            ...(response.remove.length > 0 ? { responseHeadersToRemove: response.remove } : {}),
            ...(request.authority ? { hostRewriteLiteral: request.authority } : {}),
          };
        }),
      };
    }
    if (gatewaySemantics && route.rewrite?.uri === "/") {
      // The Gateway API's ReplacePrefixMatch "/" strips the matched prefix
      // and its separator, keeping a "/" when nothing is left (Istio's regex).
      const prefix = (out.match as Plain).pathSeparatedPrefix;
      action.regexRewrite = {
        pattern: { regex: `^${escapeRegex(typeof prefix === "string" ? prefix : "")}(/?)(.*)` },
        substitution: "/\\2",
      };
    } else if (route.rewrite?.uri) action.prefixRewrite = route.rewrite.uri;
    if (route.rewrite?.uriRegexRewrite) {
      action.regexRewrite = {
        pattern: { regex: route.rewrite.uriRegexRewrite.match },
        substitution: route.rewrite.uriRegexRewrite.rewrite,
      };
    }
    // Istio: rewrite.authority, else a `host`/`:authority` header set on the route, else on its one destination.
    const authority = route.rewrite?.authority || requestOps.authority || destinationAuthority;
    if (authority) action.hostRewriteLiteral = authority;
    // Istio's setTimeout: the VirtualService's timeout or 0s (none), and the
    // same as max_grpc_timeout so a gRPC request's grpc-timeout header is
    // bounded by it (0s: the header alone decides).
    action.timeout = route.timeout ?? ZERO;
    action.maxGrpcTimeout = action.timeout;
    const hashPolicy =
      destinations.length === 1 && destinations[0]?.destination?.host
        ? hashPolicyFor(
            push,
            proxy,
            destinationKey(push, destinations[0].destination, vsNamespace, port),
            addSource,
          )
        : [];
    const retry = retryPolicy(route.retries, hashPolicy.length > 0);
    if (retry) action.retryPolicy = retry;
    const mirrors = mirrorPolicies(push, route, vsNamespace, port);
    if (mirrors.length > 0) action.requestMirrorPolicies = mirrors;
    if (hashPolicy.length > 0) action.hashPolicy = hashPolicy;
    // A backend the Gateway API route names but the mesh lacks answers 500, as the API requires.
    if (gatewaySemantics)
      action.clusterNotFoundResponseCode = ClusterNotFoundResponseCode.INTERNAL_SERVER_ERROR;
    out.route = action;
    const fault = route.fault ? translateFault(route.fault) : undefined;
    if (fault) perFilter[FAULT_FILTER_NAME] = packAny(TypeUrl.HTTPFault, HTTPFault, fault);
  }
  if (route.corsPolicy) {
    const cors = translateCors(route.corsPolicy);
    if (cors) perFilter[CORS_FILTER_NAME] = packAny(TypeUrl.CorsPolicy, CorsPolicy, cors);
  }
  out.decorator = { operation: routeOperation(out, virtualService.ref.name, port) };
  if (requestOps.add.length > 0) out.requestHeadersToAdd = requestOps.add;
  if (requestOps.remove.length > 0) out.requestHeadersToRemove = requestOps.remove;
  if (responseOps.add.length > 0) out.responseHeadersToAdd = responseOps.add;
  if (responseOps.remove.length > 0) out.responseHeadersToRemove = responseOps.remove;
  if (Object.keys(perFilter).length > 0) out.typedPerFilterConfig = perFilter;
  return out;
}

function bodySize(body: HTTPBody | undefined): number {
  if (body?.string !== undefined) return Buffer.byteLength(body.string);
  return body?.bytes?.length ?? 0;
}

/**
 * Istio's TranslateRouteMatch: the uri, headers and withoutHeaders as every
 * client runs them (shared with gRPC), then `:method`, `:authority` and
 * `:scheme` header matches and the query parameters, each sorted by name.
 */
function envoyMatch(match: HTTPMatchRequest | undefined, gatewaySemantics: boolean): Plain {
  const out = translateMatch(match);
  // A Gateway API PathPrefix matches whole path segments: /foo is /foo and /foo/…, not /foobar.
  if (gatewaySemantics && typeof out.prefix === "string" && out.prefix !== "/") {
    out.pathSeparatedPrefix = out.prefix.replace(/\/$/, "");
    delete out.prefix;
  }
  if (!match) return out;
  const headers = [...((out.headers as unknown[]) ?? [])];
  if (match.method) headers.push(headerMatcher(":method", presentIfAnyValue(match.method), false));
  if (match.authority) headers.push(headerMatcher(":authority", presentIfAnyValue(match.authority), false));
  if (match.scheme) headers.push(headerMatcher(":scheme", presentIfAnyValue(match.scheme), false));
  if (headers.length > 0) out.headers = headers;
  const queryParameters = Object.entries(match.queryParams)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => queryParameterMatcher(name, value));
  if (queryParameters.length > 0) out.queryParameters = queryParameters;
  return out;
}

/**
 * Istio's translateQueryParamMatch: a present match for "any value" (see
 * presentIfAnyValue), else the exact, prefix or regex string match. An empty
 * exact stays a string match (the parameter with an empty value), as Istio
 * since 1.5; only Envoy's deprecated `value` field read "" as "present".
 */
function queryParameterMatcher(name: string, value: StringMatch): Plain {
  const any = presentIfAnyValue(value);
  if (any.exact !== undefined) return { name, stringMatch: { exact: any.exact, ignoreCase: false } };
  if (any.prefix !== undefined) return { name, stringMatch: { prefix: any.prefix, ignoreCase: false } };
  if (any.regex !== undefined)
    return { name, stringMatch: { safeRegex: { regex: any.regex }, ignoreCase: false } };
  return { name, presentMatch: true };
}

/** Istio's GetDestinationCluster: the destination's port, else its service's only port, else the listener's. */
function destinationKey(
  push: PushContext,
  destination: Destination,
  vsNamespace: string,
  listenerPort: number,
): { host: string; subset: string; port: number } {
  const host = resolveHost(destination.host, vsNamespace, push.domainSuffix);
  const ports = push.servicesByHost.get(host)?.ports ?? [];
  const port = destination.port?.number || (ports.length === 1 ? ports[0]!.number : listenerPort);
  return { host, subset: destination.subset, port };
}

function destinationCluster(
  push: PushContext,
  destination: Destination | undefined,
  vsNamespace: string,
  listenerPort: number,
): string {
  if (!destination) return "";
  const key = destinationKey(push, destination, vsNamespace, listenerPort);
  // A destination that is an alias goes to the cluster of the name it stands for (the port stays the alias's).
  return outboundClusterName(key.port, key.subset, clusterHost(push, key.host));
}

/** Istio's getRouteOperation: `<host>:<port><path>` for one cluster, else `<vs name>:<port><path>`. */
function routeOperation(route: Plain, vsName: string, port: number): string {
  const match = route.match as Plain;
  let path = "/*";
  if (typeof match.prefix === "string") path = `${match.prefix}*`;
  else if (typeof match.path === "string") path = match.path;
  else if (match.safeRegex) path = (match.safeRegex as { regex: string }).regex;
  const cluster = (route.route as Plain | undefined)?.cluster;
  if (typeof cluster === "string") {
    const parts = cluster.split("|");
    if (parts.length === 4 && parts[3]) return `${parts[3]}:${parts[1]}${path}`;
  }
  return `${vsName}:${port}${path}`;
}

/**
 * Istio's TranslateHeadersOperations: `set` overwrites (or adds), `add`
 * appends; each sorted by name; `remove` as given. Envoy refuses to modify
 * `:`-prefixed pseudo-headers and Host (it rejects the whole route
 * configuration), so those keys are never emitted: a `host` or `:authority`
 * value (case-insensitive; `set` over `add`) is returned as the authority,
 * which becomes the route's host rewrite; other pseudo-headers are dropped
 * (validation refuses them). Response operations go through the same
 * function; their authority is ignored.
 */
function headerOperations(ops: Headers_HeaderOperations | undefined): {
  add: Plain[];
  remove: string[];
  authority: string;
} {
  const sorted = (map: Record<string, string>) =>
    Object.entries(map)
      .filter(([key]) => !isInternalHeader(key))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const authorityIn = (map: Record<string, string>) =>
    Object.entries(map).findLast(([key]) => isAuthorityHeader(key))?.[1] ?? "";
  const add: Plain[] = [
    ...sorted(ops?.set ?? {}).map(([key, value]) => ({
      header: { key, value },
      appendAction: AppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    })),
    ...sorted(ops?.add ?? {}).map(([key, value]) => ({
      header: { key, value },
      appendAction: AppendAction.APPEND_IF_EXISTS_OR_ADD,
    })),
  ];
  return {
    add,
    remove: (ops?.remove ?? []).filter((key) => !isInternalHeader(key)),
    authority: authorityIn(ops?.set ?? {}) || authorityIn(ops?.add ?? {}),
  };
}

/** Istio's isInternalHeader: headers Envoy does not let a route modify. */
function isInternalHeader(key: string): boolean {
  return key.startsWith(":") || key.toLowerCase() === "host";
}

/** Istio's isAuthorityHeader. */
function isAuthorityHeader(key: string): boolean {
  const lower = key.toLowerCase();
  return lower === ":authority" || lower === "host";
}

/**
 * Istio's ApplyRedirect for a VirtualService (not Gateway API semantics, so
 * no `%PREFIX()%` prefix rewrite): path, host and scheme as given; the port
 * as given, or with `derivePort: FROM_REQUEST_PORT` the port the routes are
 * built for (Envoy cannot derive it per request); a port that is the
 * scheme's default (80 for http, 443 for https, the scheme defaulting to
 * the listener's) is left out, so the Location carries none.
 */
function redirectAction(redirect: HTTPRedirect, port: number, isTls: boolean): Plain {
  const action: Plain = { responseCode: redirectCode(redirect.redirectCode) };
  if (redirect.uri) action.pathRedirect = redirect.uri;
  else if (redirect.prefixRewrite) action.prefixRewrite = redirect.prefixRewrite;
  if (redirect.authority) action.hostRedirect = redirect.authority;
  if (redirect.scheme) action.schemeRedirect = redirect.scheme;
  const portSet = redirect.port !== undefined || redirect.derivePort !== undefined;
  if (!portSet) return action;
  let target = redirect.port ?? (redirect.derivePort === RedirectPortSelection.FROM_REQUEST_PORT ? port : 0);
  const scheme = redirect.scheme || (isTls ? "https" : "http");
  if ((target === 80 && scheme === "http") || (target === 443 && scheme === "https")) target = 0;
  if (target) action.portRedirect = target;
  return action;
}

function redirectCode(code: number): RedirectCode {
  switch (code) {
    case 302:
      return RedirectCode.FOUND;
    case 303:
      return RedirectCode.SEE_OTHER;
    case 307:
      return RedirectCode.TEMPORARY_REDIRECT;
    case 308:
      return RedirectCode.PERMANENT_REDIRECT;
    default:
      return RedirectCode.MOVED_PERMANENTLY;
  }
}

/**
 * Istio's retry.DefaultPolicy for sidecars (without the previous-hosts
 * predicate under consistent hashing). Since Istio 1.24 it lists no
 * retriable status codes: "retriable-status-codes" stays in retryOn but,
 * with no codes, retries no HTTP status (a 503 is not retried by default).
 */
export function defaultRetryPolicy(consistentHash: boolean): Plain {
  return {
    retryOn: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
    numRetries: 2,
    ...(consistentHash
      ? {}
      : {
          retryHostPredicate: [
            {
              name: "envoy.retry_host_predicates.previous_hosts",
              typedConfig: packAny(
                TypeUrl.PreviousHostsPredicate,
                PreviousHostsPredicate,
                PreviousHostsPredicate.fromPartial({}),
              ),
            },
          ],
        }),
    hostSelectionRetryMaxAttempts: 5,
  };
}

/**
 * Istio's retry.ConvertPolicy: no `retries` is the default policy; attempts
 * 0 disables retries; otherwise the default with the attempts, the retryOn
 * conditions (numbers become retriable status codes), perTryTimeout,
 * backoff, and retryIgnorePreviousHosts: false dropping the predicate.
 */
function retryPolicy(retries: HTTPRetry | undefined, consistentHash: boolean): Plain | undefined {
  const out = defaultRetryPolicy(consistentHash);
  if (!retries) return out;
  if (retries.attempts <= 0) return undefined;
  out.numRetries = retries.attempts;
  if (retries.retryOn) {
    const conditions: string[] = [];
    const codes: number[] = [];
    for (const raw of retries.retryOn.split(",")) {
      const condition = raw.trim();
      if (!condition) continue;
      if (/^\d+$/.test(condition)) codes.push(Number(condition));
      else conditions.push(condition);
    }
    if (codes.length > 0 && !conditions.includes("retriable-status-codes"))
      conditions.push("retriable-status-codes");
    out.retryOn = conditions.join(",");
    if (codes.length > 0) out.retriableStatusCodes = codes;
  }
  if (retries.perTryTimeout) out.perTryTimeout = retries.perTryTimeout;
  if (retries.retryIgnorePreviousHosts === false) delete out.retryHostPredicate;
  if (retries.backoff) out.retryBackOff = { baseInterval: retries.backoff };
  return out;
}

/** Istio's mirror policies: `mirror` with mirrorPercentage (100 % when unset, none at 0), then `mirrors`. */
function mirrorPolicies(push: PushContext, route: HTTPRoute, vsNamespace: string, port: number): Plain[] {
  const policies: Plain[] = [];
  const policy = (destination: Destination, fractionOf: Plain | undefined) =>
    fractionOf
      ? {
          cluster: destinationCluster(push, destination, vsNamespace, port),
          runtimeFraction: { defaultValue: fractionOf, runtimeKey: "" },
          traceSampled: false,
        }
      : undefined;
  const percentOf = (percentage: Percent | undefined, percent: number | undefined): Plain | undefined => {
    if (percentage) return percentage.value > 0 ? fraction(percentage.value) : undefined;
    if (percent !== undefined)
      return percent > 0
        ? { numerator: percent, denominator: FractionalPercent_DenominatorType.HUNDRED }
        : undefined;
    return { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED };
  };
  if (route.mirror) {
    const mirror = policy(route.mirror, percentOf(route.mirrorPercentage, route.mirrorPercent));
    if (mirror) policies.push(mirror);
  }
  for (const entry of route.mirrors) {
    if (!entry.destination) continue;
    const mirror = policy(entry.destination, percentOf(entry.percentage, undefined));
    if (mirror) policies.push(mirror);
  }
  return policies;
}

/**
 * Istio's hash policy for a destination: the DestinationRule's consistentHash
 * (subset over port level over top level) as a header, cookie, source IP or
 * query parameter hash.
 */
function hashPolicyFor(
  push: PushContext,
  proxy: MeshProxy,
  destination: { host: string; subset: string; port: number },
  addSource: (ref: ConfigRef) => void,
): Plain[] {
  const rule = push.destinationRuleFor(destination.host, proxy.namespace);
  if (!rule) return [];
  const subset = rule.spec.subsets.find((s) => s.name === destination.subset);
  const portLevel = (policy: typeof rule.spec.trafficPolicy) =>
    policy?.portLevelSettings.find((setting) => setting.port?.number === destination.port)?.loadBalancer
      ?.consistentHash;
  const hash: LoadBalancerSettings_ConsistentHashLB | undefined =
    (destination.subset
      ? (portLevel(subset?.trafficPolicy) ?? subset?.trafficPolicy?.loadBalancer?.consistentHash)
      : undefined) ??
    portLevel(rule.spec.trafficPolicy) ??
    rule.spec.trafficPolicy?.loadBalancer?.consistentHash;
  if (!hash) return [];
  addSource(rule.ref);
  if (hash.httpHeaderName) return [{ header: { headerName: hash.httpHeaderName } }];
  if (hash.httpCookie)
    return [
      {
        cookie: {
          name: hash.httpCookie.name,
          path: hash.httpCookie.path,
          ...(hash.httpCookie.ttl ? { ttl: hash.httpCookie.ttl } : {}),
          // Envoy adds them to a cookie it generates (e.g. SameSite).
          ...(hash.httpCookie.attributes.length > 0
            ? { attributes: hash.httpCookie.attributes.map(({ name, value }) => ({ name, value })) }
            : {}),
        },
      },
    ];
  if (hash.useSourceIp) return [{ connectionProperties: { sourceIp: true } }];
  if (hash.httpQueryParameterName) return [{ queryParameter: { name: hash.httpQueryParameterName } }];
  return [];
}

/** Istio's translateCORSPolicy (per-route CorsPolicy of the CORS filter). */
function translateCors(policy: IstioCorsPolicy): CorsPolicy | undefined {
  const origins: Plain[] = [];
  for (const origin of policy.allowOrigins) {
    if (origin.exact !== undefined) origins.push({ exact: origin.exact, ignoreCase: false });
    else if (origin.prefix !== undefined) origins.push({ prefix: origin.prefix, ignoreCase: false });
    // An origin regex RE2 does not compile (validation refuses it) would make Envoy reject the route configuration.
    else if (origin.regex !== undefined && regexProblem(origin.regex) === undefined)
      origins.push({ safeRegex: { regex: origin.regex }, ignoreCase: false });
  }
  // The deprecated allowOrigin: exact strings.
  for (const origin of policy.allowOrigin) origins.push({ exact: origin, ignoreCase: false });
  return CorsPolicy.fromPartial({
    allowOriginStringMatch: origins as never,
    allowMethods: policy.allowMethods.join(","),
    allowHeaders: policy.allowHeaders.join(","),
    exposeHeaders: policy.exposeHeaders.join(","),
    ...(policy.maxAge ? { maxAge: String(policy.maxAge.seconds) } : {}),
    ...(policy.allowCredentials !== undefined ? { allowCredentials: policy.allowCredentials } : {}),
    filterEnabled: {
      defaultValue: { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
      runtimeKey: "",
    },
    // Istio always sets it: preflights no origin matches go on upstream (Envoy's behaviour before 1.30)
    // unless unmatchedPreflights is IGNORE.
    forwardNotMatchingPreflights: policy.unmatchedPreflights !== UnmatchedPreflights.IGNORE,
  });
}
