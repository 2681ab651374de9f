import { resolveHost } from "@sextant/model";
import { type ConfigRef, packAny } from "@sextant/proto";
import { RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import { HTTPFault } from "@sextant/proto/gen/envoy/extensions/filters/http/fault/v3/fault";
import type {
  HTTPRetry,
  HTTPRoute,
  HTTPRouteDestination,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { cacheKey } from "../../cache/xds-cache.js";
import { aliasTarget, clusterHost, isAlias } from "../../model/aliases.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import {
  FAULT_FILTER_NAME,
  fraction,
  matchRegexesValid,
  millis,
  translateFault,
  translateMatch,
} from "../common/routes.js";
import { type GenerationContext, generateByName } from "../generator.js";
import { outboundClusterName, parseHostPort, resolveClientHost } from "../names.js";

/** The retry conditions gRPC clients understand (gRFC A44), from Istio's retryOn list. */
const GRPC_RETRY_ON = new Set([
  "cancelled",
  "deadline-exceeded",
  "internal",
  "resource-exhausted",
  "unavailable",
]);

/**
 * Route configurations for proxyless gRPC clients, one per requested
 * `<host>:<port>`: a single virtual host whose domains are the requested name
 * and the host's other spellings, with the routes of the VirtualService that
 * owns the host (or one default route to `outbound|<port>||<host>`).
 */
export function generateGrpcRoutes(context: GenerationContext, watched: WatchedNames): GeneratedResource[] {
  const { push, proxy } = context;
  return generateByName(
    context,
    watched,
    (name) => cacheKey("rds-grpc", proxy.namespace, name, push.configVersion),
    (name) => buildRouteConfiguration(push, proxy.namespace, name),
  );
}

/**
 * The route configuration `name` (`<host>:<port>`) as seen from namespace;
 * null if no such service port. For an alias (an ExternalName service)
 * without http routes of its own VirtualService it is the virtual host of
 * the service the alias leads to, the alias's names among its domains, when
 * that is a service of the mesh visible from the namespace with the port;
 * else a route configuration without virtual hosts (Istio's grpcgen keeps,
 * of the port's virtual hosts, those whose domains hold the requested host;
 * an alias has one only for its own VirtualService).
 */
export function buildRouteConfiguration(
  push: PushContext,
  namespace: string,
  name: string,
): GeneratedResource | null {
  const target = parseHostPort(name);
  if (!target) return null;
  const requestedHost = resolveClientHost(target.host, namespace, push.domainSuffix);
  const requested = push.serviceFor(requestedHost, namespace);
  if (!requested?.ports.some((port) => port.number === target.port)) return null;
  const ownRoutes = Boolean(push.virtualServiceFor(requestedHost, namespace)?.spec.http.length);
  const alias = isAlias(requested) && !ownRoutes ? requestedHost : undefined;
  const host = alias === undefined ? requestedHost : (aliasTarget(push, alias) ?? "");
  const service = alias === undefined ? requested : push.serviceFor(host, namespace);
  if (!service?.ports.some((port) => port.number === target.port)) {
    const empty = RouteConfiguration.fromPartial({ name, virtualHosts: [] });
    return { name, resource: packAny(TypeUrl.RouteConfiguration, RouteConfiguration, empty), sources: [] };
  }

  const virtualService = push.virtualServiceFor(host, namespace);
  const sources: ConfigRef[] = [];
  let routes: PartialRoute[];
  if (virtualService) {
    sources.push(virtualService.ref, ...virtualService.delegates);
    const onlyPort = service.ports.length === 1 ? service.ports[0]?.number : undefined;
    const hostCluster = outboundClusterName(target.port, "", host);
    routes = virtualService.spec.http.flatMap((route, index) =>
      translateHttpRoute(
        push,
        route,
        index,
        virtualService.ref.namespace,
        namespace,
        target.port,
        onlyPort,
        hostCluster,
        sources,
      ),
    );
  } else {
    routes = [
      {
        name: "default",
        match: { prefix: "/" },
        route: { cluster: outboundClusterName(target.port, "", host) },
      },
    ];
  }
  const shortName = host.split(".")[0] ?? host;
  const domains = [
    ...new Set([
      name,
      ...(alias === undefined ? [] : [`${alias}:${target.port}`, alias]),
      `${host}:${target.port}`,
      host,
      `${shortName}:${target.port}`,
      `${shortName}.${service.namespace}:${target.port}`,
    ]),
  ];
  const configuration = RouteConfiguration.fromPartial({
    name,
    virtualHosts: [{ name: `${host}:${target.port}`, domains, routes: routes as RouteInput[] }],
  });
  return { name, resource: packAny(TypeUrl.RouteConfiguration, RouteConfiguration, configuration), sources };
}

/** A route as a plain object; RouteConfiguration.fromPartial fills in the rest. */
type PartialRoute = Record<string, unknown>;
type RouteInput = NonNullable<
  NonNullable<Parameters<typeof RouteConfiguration.fromPartial>[0]["virtualHosts"]>[number]["routes"]
>[number];

/**
 * One Istio HTTPRoute becomes one Envoy route per match (matches are ORed),
 * or one catch-all. None for a root route whose delegate was not merged, a
 * route with a destination without a host, or a match with a regex RE2 does
 * not compile: the client would reject the whole route configuration.
 *
 * A route that answers instead of forwarding (a direct response, as Istio's
 * Gateway API conversion makes of a rule without backends, or a redirect)
 * fails the calls it matches with its HTTP status, mapped to a gRPC status as
 * gRPC maps it (500: UNKNOWN, 503: UNAVAILABLE…), as an Envoy sidecar's
 * answer would reach a gRPC client. gRPC clients have no such actions
 * (grpc-js-xds NACKs the whole route configuration, C-core fails the calls
 * UNAVAILABLE): the route goes to the host's own cluster and aborts every
 * call with the fault filter, which both run, before any reaches it. Left
 * out, its calls would fall through to the routes after it.
 */
function translateHttpRoute(
  push: PushContext,
  route: HTTPRoute,
  index: number,
  vsNamespace: string,
  proxyNamespace: string,
  listenerPort: number,
  onlyServicePort: number | undefined,
  hostCluster: string,
  sources: ConfigRef[],
): PartialRoute[] {
  if (route.delegate) return [];
  const answer = route.directResponse?.status ?? (route.redirect ? route.redirect.redirectCode || 301 : 0);
  const weighted = route.route.filter((destination) => route.route.length === 1 || destination.weight > 0);
  if (!answer && (weighted.length === 0 || weighted.some((destination) => !destination.destination?.host)))
    return [];
  const matches = route.match.length > 0 ? route.match : [undefined];
  const applicable = matches.filter(
    (match) => (!match?.port || match.port === listenerPort) && matchRegexesValid(match),
  );
  const action = answer
    ? { cluster: hostCluster }
    : buildAction(push, route, vsNamespace, proxyNamespace, listenerPort, onlyServicePort, sources);
  const fault = answer
    ? HTTPFault.fromPartial({ abort: { httpStatus: answer, percentage: fraction(100) } })
    : route.fault
      ? translateFault(route.fault)
      : undefined;
  const typedPerFilterConfig = fault
    ? { [FAULT_FILTER_NAME]: packAny(TypeUrl.HTTPFault, HTTPFault, fault) }
    : {};
  return applicable.map((match, matchIndex) => ({
    name: route.name || `route-${index}${matches.length > 1 ? `-${matchIndex}` : ""}`,
    // The header-matcher form every gRPC version parses (see HeaderMatcherForm).
    match: translateMatch(match, "legacy"),
    route: action,
    typedPerFilterConfig,
  }));
}

function buildAction(
  push: PushContext,
  route: HTTPRoute,
  vsNamespace: string,
  proxyNamespace: string,
  listenerPort: number,
  onlyServicePort: number | undefined,
  sources: ConfigRef[],
) {
  const clusterOf = (destination: HTTPRouteDestination) => {
    const host = resolveHost(destination.destination?.host ?? "", vsNamespace, push.domainSuffix);
    const port =
      destination.destination?.port?.number ||
      onlyServicePortOf(push, host) ||
      onlyServicePort ||
      listenerPort;
    return outboundClusterName(port, destination.destination?.subset ?? "", clusterHost(push, host));
  };
  const weighted = route.route.filter((destination) => route.route.length === 1 || destination.weight > 0);
  const action: Record<string, unknown> =
    weighted.length === 1
      ? { cluster: clusterOf(weighted[0]!) }
      : {
          weightedClusters: {
            clusters: weighted.map((destination) => ({
              name: clusterOf(destination),
              weight: destination.weight,
            })),
            // Istio's weights need not add up to 100, and older gRPC C-core (1.51 among them)
            // NACKs weights whose sum differs from total_weight, 100 when unset. grpc-js-xds
            // and later gRPC releases ignore the field and add the weights up themselves.
            totalWeight: weighted.reduce((sum, destination) => sum + destination.weight, 0),
          },
        };
  if (route.timeout) {
    // gRPC clients take the route timeout as a stream deadline (gRFC A31).
    action.maxStreamDuration = { maxStreamDuration: route.timeout, grpcTimeoutHeaderMax: route.timeout };
  }
  if (route.retries && route.retries.attempts > 0) action.retryPolicy = translateRetries(route.retries);
  const hashPolicy = hashPolicyFor(push, weighted, vsNamespace, proxyNamespace, sources);
  if (hashPolicy.length > 0) action.hashPolicy = hashPolicy;
  return action;
}

/**
 * A RING_HASH cluster only hashes what the route tells it to: the header of
 * the destinations' DestinationRule `consistentHash.httpHeaderName` (subset
 * level over top level). gRPC clients hash headers; Istio's cookie, source
 * IP and query-parameter keys have no gRPC equivalent and are left out.
 */
function hashPolicyFor(
  push: PushContext,
  destinations: readonly HTTPRouteDestination[],
  vsNamespace: string,
  proxyNamespace: string,
  sources: ConfigRef[],
): Array<Record<string, unknown>> {
  const headers = new Set<string>();
  for (const destination of destinations) {
    const host = resolveHost(destination.destination?.host ?? "", vsNamespace, push.domainSuffix);
    const rule = push.destinationRuleFor(host, proxyNamespace);
    if (!rule) continue;
    const subset = rule.spec.subsets.find((s) => s.name === destination.destination?.subset);
    const consistentHash =
      subset?.trafficPolicy?.loadBalancer?.consistentHash ??
      rule.spec.trafficPolicy?.loadBalancer?.consistentHash;
    if (!consistentHash?.httpHeaderName) continue;
    headers.add(consistentHash.httpHeaderName);
    if (
      !sources.some(
        (ref) =>
          ref.kind === rule.ref.kind && ref.namespace === rule.ref.namespace && ref.name === rule.ref.name,
      )
    ) {
      sources.push(rule.ref);
    }
  }
  return [...headers].sort().map((headerName) => ({ header: { headerName } }));
}

function onlyServicePortOf(push: PushContext, host: string): number | undefined {
  const ports = push.servicesByHost.get(host)?.ports ?? [];
  return ports.length === 1 ? ports[0]?.number : undefined;
}

function translateRetries(retries: HTTPRetry): Record<string, unknown> {
  const retryOn = retries.retryOn
    .split(",")
    .map((condition) => condition.trim())
    .filter((condition) => GRPC_RETRY_ON.has(condition));
  return {
    numRetries: retries.attempts,
    retryOn: (retryOn.length > 0 ? retryOn : ["unavailable"]).join(","),
    // gRPC requires a backoff; these are Envoy's defaults.
    retryBackOff: { baseInterval: millis(25), maxInterval: millis(250) },
    ...(retries.perTryTimeout ? { perTryTimeout: retries.perTryTimeout } : {}),
  };
}
