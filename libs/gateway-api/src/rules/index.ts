// A Gateway API route's rules converted to Istio's HTTP, TLS and TCP routes,
// as istiod's convertHTTPRoute/convertGRPCRoute/convertTCPRoute/convertTLSRoute
// (pilot/pkg/config/kube/gateway/conversion.go) do. Independent of the
// route's parents: the Gateway conversion (convert.ts) and the mesh parents
// (mesh.ts) bind the result to their hosts and gateways.
import type { ConfigResource } from "@sextant/proto";
import type {
  HTTPRoute,
  TCPRoute,
  TLSRoute,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import type { GatewayApiCondition } from "../types.js";
import { grpcRules, httpRules } from "./http.js";
import { tcpRules, tlsRules } from "./l4.js";
import type { RuleContext, RuleConversion, RuleError, RuleResult, RuleTarget } from "./types.js";

export { sortHttpRoutes } from "./http.js";

/**
 * The annotation Istio puts on every VirtualService it makes from a Gateway
 * API route (value "gateway"): the proxies' translation then applies the
 * Gateway API's semantics (path-separated prefixes, a 500 for a backend
 * without a cluster, a prefix rewrite to "/" that strips the prefix).
 */
export const ROUTE_SEMANTICS_ANNOTATION = "internal.istio.io/route-semantics";
/** The annotation naming the Gateway API resources a VirtualService was made from: `Kind/name.namespace`, comma-separated. */
export const PARENTS_ANNOTATION = "internal.istio.io/parents";
export type { RuleContext, RuleConversion, RuleError, RuleTarget } from "./types.js";

/** The ResolvedRefs condition every parent of the route reports (Istio reports any route error there). */
export function resolvedRefsCondition(error: RuleError | undefined, generation: number): GatewayApiCondition {
  return error
    ? {
        type: "ResolvedRefs",
        status: "False",
        reason: error.reason,
        message: error.message,
        observedGeneration: generation,
      }
    : {
        type: "ResolvedRefs",
        status: "True",
        reason: "ResolvedRefs",
        message: "All references resolved",
        observedGeneration: generation,
      };
}

/**
 * Collects the rules as istiod's computeRoute does: a rule that yields no
 * route drops every route of the resource; otherwise the last error seen is
 * the route's error.
 */
function collect<T>(route: ConfigResource, results: Iterable<RuleResult<T>>): RuleConversion<T> {
  const routes: T[] = [];
  let error: RuleError | undefined;
  for (const result of results) {
    if (result.route === undefined) {
      return {
        routes: [],
        ...(result.error ? { error: result.error } : {}),
        fatal: true,
        resolvedRefs: resolvedRefsCondition(result.error, route.generation),
      };
    }
    if (result.error) error = result.error;
    routes.push(result.route);
  }
  return {
    routes,
    ...(error ? { error } : {}),
    fatal: false,
    resolvedRefs: resolvedRefsCondition(error, route.generation),
  };
}

export function convertHttpRoute(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget = "gateway",
): RuleConversion<HTTPRoute> {
  return collect(route, httpRules(route, ctx, target));
}

export function convertGrpcRoute(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget = "gateway",
): RuleConversion<HTTPRoute> {
  return collect(route, grpcRules(route, ctx, target));
}

export function convertTcpRoute(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget = "gateway",
): RuleConversion<TCPRoute> {
  return collect(route, tcpRules(route, ctx, target));
}

export function convertTlsRoute(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget = "gateway",
): RuleConversion<TLSRoute> {
  return collect(route, tlsRules(route, ctx, target));
}
