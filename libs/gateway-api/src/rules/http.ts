// HTTPRoute and GRPCRoute rules as Istio HTTP routes (conversion.go's
// convertHTTPRoute and convertGRPCRoute).
import type { ConfigResource } from "@sextant/proto";
import {
  HTTPDirectResponse,
  type HTTPMatchRequest,
  HTTPRetry,
  HTTPRoute,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { parseDuration } from "@sextant/validation";
import { type BackendRef, httpDestinations, type Referrer, weightSum } from "./backends.js";
import { cors, headerOperations, mirror, redirect, rewrite } from "./filters.js";
import { type GrpcRouteMatch, grpcMatch, type HttpRouteMatch, httpMatch } from "./matches.js";
import type { RuleContext, RuleError, RuleResult, RuleTarget } from "./types.js";

interface Filter {
  type?: string;
  [config: string]: unknown;
}

interface HttpRule {
  name?: string;
  matches?: HttpRouteMatch[];
  filters?: Filter[];
  backendRefs?: BackendRef[];
  timeouts?: { request?: string; backendRequest?: string };
  retry?: { attempts?: number; backoff?: string; codes?: number[] };
}

interface GrpcRule {
  name?: string;
  matches?: GrpcRouteMatch[];
  filters?: Filter[];
  backendRefs?: BackendRef[];
}

/** "a; b" as Istio joins a backend error and a mirror's. */
function joinErrors(a: RuleError | undefined, b: RuleError | undefined): RuleError | undefined {
  if (!a || !b) return a ?? b;
  return { reason: a.reason, message: `${a.message}; ${b.message}` };
}

/** The rule's own name, else `namespace.name.index` (unique within the route; every match of a rule shares it). */
function routeName(rule: { name?: string }, route: ConfigResource, index: number): string {
  return rule.name ?? `${route.namespace}.${route.name}.${index}`;
}

/** Header modifiers, shared by the HTTPRoute and GRPCRoute filters. */
function applyHeaderFilter(out: HTTPRoute, filter: Filter): RuleError | undefined {
  const request = filter.type === "RequestHeaderModifier";
  const operations = headerOperations(request ? filter.requestHeaderModifier : filter.responseHeaderModifier);
  if ("error" in operations) return operations.error;
  if (!operations.value) return undefined;
  out.headers ??= { request: undefined, response: undefined };
  out.headers[request ? "request" : "response"] = operations.value;
  return undefined;
}

const unsupportedFilter = (filter: Filter): RuleError => ({
  reason: "InvalidFilter",
  message: `unsupported filter type "${filter.type}"`,
});

/** Nonzero durations only: "0s" means no timeout, as the field's absence does. */
function duration(text: string | undefined) {
  const value = text === undefined ? undefined : parseDuration(text);
  return value && (value.seconds !== 0 || value.nanos !== 0) ? value : undefined;
}

/**
 * The retry policy: connection failures always retry ("Implementations
 * SHOULD retry on connection errors"), plus the listed status codes;
 * attempts default to 2, Istio's default. With 0 attempts no retryOn.
 */
function retries(retry: NonNullable<HttpRule["retry"]>): HTTPRetry {
  const attempts = retry.attempts ?? 2;
  const retryOn = [
    "connect-failure",
    "refused-stream",
    "unavailable",
    "cancelled",
    ...(retry.codes ?? []).map(String),
  ];
  const backoff = retry.backoff === undefined ? undefined : parseDuration(retry.backoff);
  return HTTPRetry.fromPartial({ attempts, retryOn: attempts === 0 ? "" : retryOn.join(","), backoff });
}

/** One HTTPRoute rule with at most one match. */
function convertHttpRule(
  rule: HttpRule,
  match: HTTPMatchRequest | undefined,
  name: string,
  referrer: Referrer,
  ctx: RuleContext,
): RuleResult<HTTPRoute> {
  const out: HTTPRoute = { ...HTTPRoute.fromPartial({ name }), match: match ? [match] : [] };
  let mirrorError: RuleError | undefined;
  for (const filter of rule.filters ?? []) {
    switch (filter.type) {
      case "RequestHeaderModifier":
      case "ResponseHeaderModifier": {
        const error = applyHeaderFilter(out, filter);
        if (error) return { error };
        break;
      }
      case "RequestRedirect":
        out.redirect = redirect(filter.requestRedirect as Parameters<typeof redirect>[0]);
        break;
      case "RequestMirror": {
        // An unusable mirror is dropped and reported; the route still serves.
        const result = mirror(filter.requestMirror as Parameters<typeof mirror>[0], referrer, ctx);
        if ("error" in result) mirrorError = result.error;
        else out.mirrors.push(result.value);
        break;
      }
      case "URLRewrite":
        out.rewrite = rewrite(filter.urlRewrite as Parameters<typeof rewrite>[0]);
        break;
      case "CORS":
        out.corsPolicy = cors(filter.cors as Parameters<typeof cors>[0]);
        break;
      default:
        return { error: unsupportedFilter(filter) };
    }
  }
  if (rule.retry) out.retries = retries(rule.retry);
  const request = duration(rule.timeouts?.request);
  if (request) out.timeout = request;
  const backendRequest = duration(rule.timeouts?.backendRequest);
  if (backendRequest) {
    if (out.retries) out.retries.perTryTimeout = backendRequest;
    else out.timeout = backendRequest;
  }
  if (weightSum(rule.backendRefs) === 0 && !out.redirect) {
    // "If there are no backendRefs with a nonzero weight … a 500."
    out.directResponse = HTTPDirectResponse.fromPartial({ status: 500 });
    return { route: out, ...(mirrorError ? { error: mirrorError } : {}) };
  }
  const { destinations, error } = httpDestinations(rule.backendRefs ?? [], referrer, ctx);
  if (!destinations) return error ? { error } : {};
  out.route = destinations;
  const joined = joinErrors(error, mirrorError);
  return { route: out, ...(joined ? { error: joined } : {}) };
}

/** One GRPCRoute rule with at most one match: header filters and mirrors only; an unusable mirror fails the route. */
function convertGrpcRule(
  rule: GrpcRule,
  match: HTTPMatchRequest | undefined,
  name: string,
  referrer: Referrer,
  ctx: RuleContext,
): RuleResult<HTTPRoute> {
  const out: HTTPRoute = { ...HTTPRoute.fromPartial({ name }), match: match ? [match] : [] };
  for (const filter of rule.filters ?? []) {
    switch (filter.type) {
      case "RequestHeaderModifier":
      case "ResponseHeaderModifier": {
        const error = applyHeaderFilter(out, filter);
        if (error) return { error };
        break;
      }
      case "RequestMirror": {
        const result = mirror(filter.requestMirror as Parameters<typeof mirror>[0], referrer, ctx);
        if ("error" in result) return { error: result.error };
        out.mirrors.push(result.value);
        break;
      }
      default:
        return { error: unsupportedFilter(filter) };
    }
  }
  if (weightSum(rule.backendRefs) === 0) {
    out.directResponse = HTTPDirectResponse.fromPartial({ status: 500 });
    return { route: out };
  }
  const { destinations, error } = httpDestinations(rule.backendRefs ?? [], referrer, ctx);
  if (!destinations) return error ? { error } : {};
  out.route = destinations;
  return { route: out, ...(error ? { error } : {}) };
}

/**
 * Each rule, split per match (Istio gives every route at most one match so
 * routes of several rules and resources can be ordered together).
 */
export function* httpRules(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget,
): Generator<RuleResult<HTTPRoute>> {
  const referrer: Referrer = { kind: route.kind, namespace: route.namespace, target };
  // The API server defaults a rule's matches to one PathPrefix "/".
  const rules = ((route.spec as { rules?: HttpRule[] }).rules ?? []) as HttpRule[];
  for (const [index, rule] of rules.entries()) {
    const matches = rule.matches?.length ? rule.matches : [{}];
    for (const written of matches) {
      const match = httpMatch(written);
      if ("error" in match) {
        yield { error: match.error };
        continue;
      }
      yield convertHttpRule(rule, match.value, routeName(rule, route, index), referrer, ctx);
    }
  }
}

export function* grpcRules(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget,
): Generator<RuleResult<HTTPRoute>> {
  const referrer: Referrer = { kind: route.kind, namespace: route.namespace, target };
  const rules = ((route.spec as { rules?: GrpcRule[] }).rules ?? []) as GrpcRule[];
  for (const [index, rule] of rules.entries()) {
    const matches: Array<GrpcRouteMatch | undefined> = rule.matches?.length ? rule.matches : [undefined];
    for (const written of matches) {
      const match = written === undefined ? undefined : grpcMatch(written);
      if (match && "error" in match) {
        yield { error: match.error };
        continue;
      }
      yield convertGrpcRule(rule, match?.value, routeName(rule, route, index), referrer, ctx);
    }
  }
}

/** Exact 3, PathPrefix 2, RegularExpression 1, no path -1 (Istio's getURIRank). */
function uriRank(match: HTTPMatchRequest): number {
  const uri = match.uri;
  if (uri?.exact !== undefined) return 3;
  if (uri?.prefix !== undefined) return 2;
  if (uri?.regex !== undefined) return 1;
  return -1;
}

const uriLength = (match: HTTPMatchRequest) =>
  (match.uri?.exact ?? match.uri?.prefix ?? match.uri?.regex ?? "").length;

/** Negative when a goes first. */
function precedence(a: HTTPRoute, b: HTTPRoute): number {
  const [ma, mb] = [a.match[0], b.match[0]];
  if (!ma || !mb) return ma ? -1 : mb ? 1 : 0;
  if (uriRank(ma) !== uriRank(mb)) return uriRank(mb) - uriRank(ma);
  if (uriLength(ma) !== uriLength(mb)) return uriLength(mb) - uriLength(ma);
  if ((ma.method === undefined) !== (mb.method === undefined)) return ma.method ? -1 : 1;
  const headers = Object.keys(mb.headers).length - Object.keys(ma.headers).length;
  if (headers !== 0) return headers;
  return Object.keys(mb.queryParams).length - Object.keys(ma.queryParams).length;
}

/**
 * Orders the routes of one VirtualService as the Gateway API requires
 * (Istio's sortHTTPRoutes): Exact before PathPrefix before RegularExpression,
 * longer paths first, then a method match, more header matches, more query
 * matches; routes without a match last. Stable: ties keep their order.
 */
export function sortHttpRoutes(routes: HTTPRoute[]): void {
  routes.sort(precedence);
}
