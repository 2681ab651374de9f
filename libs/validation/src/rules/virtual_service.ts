import type {
  CorsPolicy,
  Destination,
  Headers,
  HTTPFaultInjection,
  HTTPMatchRequest,
  HTTPRetry,
  HTTPRoute,
  L4MatchAttributes,
  StringMatch,
  TLSMatchAttributes,
  VirtualService,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { at, type Issues, key } from "../issues.js";
import {
  checkDuration,
  checkExportTo,
  checkLabels,
  checkPercentage,
  checkPort,
  checkRegex,
  cidrProblem,
  HTTP_METHODS,
  hostProblem,
  isHeaderName,
  isIpAddress,
  isIstioDnsLabel,
} from "./common.js";
import type { RuleContext } from "./context.js";
import { headerNameProblem, headerValueProblem, isJwtClaimRoute, matchHeaderNameProblem } from "./headers.js";

/** Envoy retry conditions (HTTP and gRPC) that Istio accepts in retryOn. */
export const RETRY_ON_POLICIES = new Set([
  "5xx",
  "gateway-error",
  "reset",
  "reset-before-request",
  "connect-failure",
  "envoy-ratelimited",
  "retriable-4xx",
  "refused-stream",
  "retriable-status-codes",
  "retriable-headers",
  "http3-post-connect-failure",
  "cancelled",
  "deadline-exceeded",
  "internal",
  "resource-exhausted",
  "unavailable",
]);

/** gRPC status names accepted by fault.abort.grpcStatus. */
export const GRPC_STATUS_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/** Istio's VirtualService rules. */
export function validateVirtualService(vs: VirtualService, ctx: RuleContext): void {
  const { issues, path } = ctx;
  const isDelegate = vs.hosts.length === 0;
  const appliesToMesh = vs.gateways.length === 0 || vs.gateways.includes("mesh");

  if (isDelegate && vs.gateways.length > 0) {
    issues.error(`${path}.gateways`, "a delegate VirtualService (one without hosts) must not set gateways");
  }
  // Only HTTP routes are delegated (Istio merges nothing else into the root).
  if (isDelegate && vs.tcp.length > 0) {
    issues.error(`${path}.tcp`, "a delegate VirtualService (one without hosts) must not set tcp routes");
  }
  if (isDelegate && vs.tls.length > 0) {
    issues.error(`${path}.tls`, "a delegate VirtualService (one without hosts) must not set tls routes");
  }
  vs.hosts.forEach((host, i) => {
    const p = at(`${path}.hosts`, i);
    if (host === "*") {
      if (appliesToMesh) {
        issues.error(
          p,
          'wildcard host "*" is only allowed when the VirtualService is bound to gateways (not "mesh")',
        );
      }
      return;
    }
    if (isIpAddress(host)) return;
    const problem = hostProblem(host);
    if (problem) issues.error(p, problem);
  });
  // Istio skips the overlap check when a host is invalid ("*" on the mesh included).
  if (!(appliesToMesh && vs.hosts.includes("*"))) checkDuplicateHosts(issues, `${path}.hosts`, vs.hosts);
  checkGatewayNames(issues, `${path}.gateways`, vs.gateways);
  if (appliesToMesh) checkNoClaimRouting(issues, `${path}.http`, vs.http);

  if (vs.http.length === 0 && vs.tcp.length === 0 && vs.tls.length === 0) {
    issues.error(path, "at least one of http, tcp or tls routes is required");
  }
  checkExportTo(issues, `${path}.exportTo`, vs.exportTo, ctx.namespace);

  vs.http.forEach((route, i) => {
    validateHttpRoute(issues, at(`${path}.http`, i), route, isDelegate);
  });
  vs.tcp.forEach((route, i) => {
    const p = at(`${path}.tcp`, i);
    route.match.forEach((m, j) => {
      checkL4Match(issues, at(`${p}.match`, j), m);
    });
    if (route.route.length === 0) issues.error(`${p}.route`, "a TCP route needs at least one destination");
    checkWeightedDestinations(issues, `${p}.route`, route.route);
  });
  vs.tls.forEach((route, i) => {
    const p = at(`${path}.tls`, i);
    if (route.match.length === 0)
      issues.error(`${p}.match`, "a TLS route needs at least one match with sniHosts");
    route.match.forEach((m, j) => {
      checkTlsMatch(issues, at(`${p}.match`, j), m, vs.hosts, !appliesToMesh);
    });
    if (route.route.length === 0) issues.error(`${p}.route`, "a TLS route needs at least one destination");
    checkWeightedDestinations(issues, `${p}.route`, route.route);
  });
}

/**
 * Two hosts of one VirtualService must not overlap (Istio's host.Name
 * Matches): `a.com` twice, or `*.com` beside `a.com` or `*.a.com`, or `*`
 * beside anything. Checked only when every host is valid, as Istio.
 */
/**
 * Whether two VirtualService hosts overlap as Istio's host.Name Matches reads
 * them (plain text, no namespace completion): equal, or a wildcard whose
 * suffix the other ends with (`*` overlaps everything).
 */
export function hostsOverlap(a: string, b: string): boolean {
  const aWild = a.startsWith("*");
  const bWild = b.startsWith("*");
  if (aWild && bWild)
    return a.length < b.length ? b.slice(1).endsWith(a.slice(1)) : a.slice(1).endsWith(b.slice(1));
  if (aWild) return b.endsWith(a.slice(1));
  if (bWild) return a.endsWith(b.slice(1));
  return a === b;
}

function checkDuplicateHosts(issues: Issues, path: string, hosts: string[]): void {
  if (hosts.some((h) => h !== "*" && !isIpAddress(h) && hostProblem(h))) return;
  hosts.forEach((host, j) => {
    const i = hosts.findIndex((other, k) => k < j && hostsOverlap(other, host));
    if (i >= 0)
      issues.error(at(path, j), `hosts "${hosts[i]}" and "${host}" overlap: each host may appear once`);
  });
}

/**
 * JWT claim routing (`@request.auth.claims...` header matches) works only on
 * gateways, where the JWT filter runs before routing; Istio refuses it on a
 * VirtualService that applies to the mesh.
 */
function checkNoClaimRouting(issues: Issues, path: string, routes: HTTPRoute[]): void {
  routes.forEach((route, i) => {
    route.match.forEach((m, j) => {
      for (const field of ["headers", "withoutHeaders"] as const) {
        for (const name of Object.keys(m[field])) {
          if (!isJwtClaimRoute(name)) continue;
          issues.error(
            key(`${at(`${at(path, i)}.match`, j)}.${field}`, name),
            `JWT claim routing ("${name}") is only supported on gateways, and this VirtualService applies to the mesh`,
          );
        }
      }
    });
  });
}

/**
 * Checks `gateways` entries as Istio: `mesh`; `namespace/name`, both DNS
 * labels (either case); or a bare name, a DNS name, where a dotted one is
 * Istio's legacy `name.namespace` form and gets a warning.
 */
export function checkGatewayNames(issues: Issues, path: string, gateways: string[]): void {
  gateways.forEach((gw, i) => {
    if (gw === "mesh") return;
    const p = at(path, i);
    const slash = gw.indexOf("/");
    if (slash < 0) {
      const problem = hostProblem(gw);
      if (problem || gw.includes("*")) issues.error(p, `gateway "${gw}" is not a valid gateway name`);
      else if (gw.includes(".")) {
        const [name, ns] = gw.split(".");
        issues.warn(p, `"${gw}" is the legacy gateway name format; prefer namespace/name: "${ns}/${name}"`);
      }
      return;
    }
    const ns = gw.slice(0, slash);
    const name = gw.slice(slash + 1);
    if (!isIstioDnsLabel(ns)) issues.error(p, `gateway "${gw}" has an invalid namespace "${ns}"`);
    if (!isIstioDnsLabel(name)) issues.error(p, `gateway "${gw}" has an invalid name "${name}"`);
  });
}

function validateHttpRoute(issues: Issues, p: string, http: HTTPRoute, isDelegateVs: boolean): void {
  const routeCount = http.route.length;
  if (http.delegate) {
    if (isDelegateVs) issues.error(`${p}.delegate`, "a delegate VirtualService cannot delegate again");
    if (http.redirect) issues.error(`${p}.redirect`, "a route with delegate must not set redirect");
    if (routeCount > 0) issues.error(`${p}.route`, "a route with delegate must not set route");
    if (http.directResponse)
      issues.error(`${p}.directResponse`, "a route with delegate must not set directResponse");
    // Istio checks neither the delegate's name nor its namespace here: a
    // wrong reference only leaves the route without a delegate.
    if (!http.delegate.name) issues.error(`${p}.delegate.name`, "delegate name is required");
  } else if (http.redirect) {
    if (routeCount > 0) issues.error(`${p}.redirect`, "a route cannot set both route and redirect");
    if (http.fault) issues.error(`${p}.fault`, "a route cannot set both fault and redirect");
    if (http.rewrite) issues.error(`${p}.rewrite`, "a route cannot set both rewrite and redirect");
    if (http.directResponse)
      issues.error(`${p}.directResponse`, "a route cannot set both redirect and directResponse");
  } else if (http.directResponse) {
    if (routeCount > 0)
      issues.error(`${p}.directResponse`, "a route cannot set both route and directResponse");
    if (http.fault) issues.error(`${p}.fault`, "a route cannot set both fault and directResponse");
    if (http.rewrite) issues.error(`${p}.rewrite`, "a route cannot set both rewrite and directResponse");
  } else if (routeCount === 0) {
    issues.error(p, "one of route, redirect, directResponse or delegate is required");
  }

  http.match.forEach((m, i) => {
    checkHttpMatch(issues, at(`${p}.match`, i), m);
  });
  checkHeaderOperations(issues, `${p}.headers`, http.headers);
  checkCors(issues, `${p}.corsPolicy`, http.corsPolicy);
  checkFault(issues, `${p}.fault`, http.fault);

  if (http.mirror && http.mirrors.length > 0) {
    issues.error(`${p}.mirrors`, "mirror and mirrors cannot both be set");
  }
  if (http.mirrorPercent !== undefined) {
    if (http.mirrorPercent > 100) issues.error(`${p}.mirrorPercent`, "mirrorPercent must be at most 100");
    issues.warn(
      `${p}.mirrorPercent`,
      'using deprecated setting "mirrorPercent", use "mirrorPercentage" instead',
    );
  }
  checkPercentage(issues, `${p}.mirrorPercentage.value`, http.mirrorPercentage?.value);
  if (http.mirror) checkDestination(issues, `${p}.mirror`, http.mirror);
  http.mirrors.forEach((mirror, i) => {
    const mp = at(`${p}.mirrors`, i);
    if (!mirror.destination) issues.error(`${mp}.destination`, "destination is required");
    else checkDestination(issues, `${mp}.destination`, mirror.destination);
    checkPercentage(issues, `${mp}.percentage.value`, mirror.percentage?.value);
  });

  if (http.redirect) {
    const r = http.redirect;
    if (
      !r.uri &&
      !r.prefixRewrite &&
      !r.authority &&
      !r.scheme &&
      r.port === undefined &&
      r.derivePort === undefined
    ) {
      issues.error(`${p}.redirect`, "redirect must change at least one of uri, authority, scheme or port");
    }
    if (r.uri && r.prefixRewrite) {
      issues.error(`${p}.redirect`, "redirect may only specify one of uri or prefixRewrite");
    }
    // The prefix to replace is the one the route matched: every uri match must be a prefix.
    if (r.prefixRewrite && http.match.some((match) => match.uri && match.uri.prefix === undefined)) {
      issues.error(
        `${p}.redirect.prefixRewrite`,
        "redirect prefixRewrite requires every uri match to be a prefix match",
      );
    }
    if (r.redirectCode !== 0 && (r.redirectCode < 300 || r.redirectCode > 399)) {
      issues.error(`${p}.redirect.redirectCode`, `redirect code ${r.redirectCode} must be a 3xx status`);
    }
    if (r.port !== undefined) checkPort(issues, `${p}.redirect.port`, r.port);
  }
  if (http.directResponse) {
    const status = http.directResponse.status;
    if (status < 200 || status > 599) {
      issues.error(`${p}.directResponse.status`, `status ${status} must be between 200 and 599`);
    }
    const body = http.directResponse.body;
    const size =
      body?.string !== undefined ? new TextEncoder().encode(body.string).length : (body?.bytes?.length ?? 0);
    if (size > MAX_DIRECT_RESPONSE_BODY_BYTES) {
      issues.error(
        `${p}.directResponse.body`,
        `a direct response body must be at most 1 MiB (it has ${size} bytes)`,
      );
    } else if (size > LARGE_DIRECT_RESPONSE_BODY_BYTES) {
      issues.warn(`${p}.directResponse.body`, "a direct response body over 100 KiB burdens every proxy");
    }
  }
  checkRetries(issues, `${p}.retries`, http.retries);
  if (http.rewrite) {
    const rw = http.rewrite;
    if (rw.uri && rw.uriRegexRewrite) {
      issues.error(`${p}.rewrite`, "rewrite may set only one of uri and uriRegexRewrite");
    }
    if (rw.uriRegexRewrite)
      checkRegex(issues, `${p}.rewrite.uriRegexRewrite.match`, rw.uriRegexRewrite.match);
  }
  checkAuthorityRewrite(issues, p, http);
  http.route.forEach((dest, i) => {
    checkHeaderOperations(issues, `${at(`${p}.route`, i)}.headers`, dest.headers);
  });
  checkWeightedDestinations(issues, `${p}.route`, http.route);
  checkDuration(issues, `${p}.timeout`, http.timeout);
}

function checkAuthorityRewrite(issues: Issues, p: string, http: HTTPRoute): void {
  const request = http.headers?.request;
  const setters = [
    ...Object.keys(request?.set ?? {}).map((k) => ({ k, op: "set" })),
    ...Object.keys(request?.add ?? {}).map((k) => ({ k, op: "add" })),
  ].filter(({ k }) => k.toLowerCase() === "host" || k.toLowerCase() === ":authority");
  const count = setters.length + (http.rewrite?.authority ? 1 : 0);
  if (count > 1) {
    const last = setters[setters.length - 1]!;
    issues.error(
      key(`${p}.headers.request.${last.op}`, last.k),
      "the authority header may be rewritten only once",
    );
  }
}

/**
 * Which empty values a StringMatch may hold. `uri`: any (a RouteMatch prefix or
 * path may be empty). `value` (header, withoutHeaders and query parameter
 * values): an empty exact but no empty prefix, as Istio's validateStringMatch,
 * since Envoy's StringMatcher needs a prefix of at least one character.
 * `nonEmpty` (scheme, method, authority, CORS origins): neither.
 */
type EmptyValues = "uri" | "value" | "nonEmpty";

function checkStringMatch(
  issues: Issues,
  p: string,
  match: StringMatch | undefined,
  empty: EmptyValues,
): void {
  if (!match) return;
  if (match.regex !== undefined) {
    checkRegex(issues, `${p}.regex`, match.regex);
  } else if (match.prefix === "" && empty !== "uri") {
    issues.error(
      `${p}.prefix`,
      "prefix match must not be empty (Envoy needs at least one character); an empty match {} matches any value",
    );
  } else if (match.exact === "" && empty === "nonEmpty") {
    issues.error(`${p}.exact`, "exact match must not be empty");
  }
}

function checkHttpMatch(issues: Issues, p: string, m: HTTPMatchRequest): void {
  checkStringMatch(issues, `${p}.uri`, m.uri, "uri");
  checkStringMatch(issues, `${p}.scheme`, m.scheme, "nonEmpty");
  checkStringMatch(issues, `${p}.method`, m.method, "nonEmpty");
  checkStringMatch(issues, `${p}.authority`, m.authority, "nonEmpty");
  for (const [name, match] of Object.entries(m.headers)) {
    const hp = key(`${p}.headers`, name);
    const problem = matchHeaderNameProblem(name);
    if (problem) issues.error(hp, problem);
    checkStringMatch(issues, hp, match, "value");
  }
  for (const [name, match] of Object.entries(m.withoutHeaders)) {
    const hp = key(`${p}.withoutHeaders`, name);
    const problem = matchHeaderNameProblem(name);
    if (problem) issues.error(hp, problem);
    // A bare "*" regex means "header present" in Istio, not an RE2 pattern.
    if (match.regex !== "*") checkStringMatch(issues, hp, match, "value");
  }
  for (const [name, match] of Object.entries(m.queryParams)) {
    checkStringMatch(issues, key(`${p}.queryParams`, name), match, "value");
  }
  if (m.port !== 0) checkPort(issues, `${p}.port`, m.port);
  checkLabels(issues, `${p}.sourceLabels`, m.sourceLabels);
  checkGatewayNames(issues, `${p}.gateways`, m.gateways);
  if (m.sourceNamespace && !isIstioDnsLabel(m.sourceNamespace)) {
    issues.error(`${p}.sourceNamespace`, `"${m.sourceNamespace}" is not a valid namespace name`);
  }
}

function checkHeaderOperations(issues: Issues, p: string, headers: Headers | undefined): void {
  if (!headers) return;
  for (const [side, ops] of [
    ["request", headers.request],
    ["response", headers.response],
  ] as const) {
    if (!ops) continue;
    const base = `${p}.${side}`;
    for (const op of ["set", "add"] as const) {
      for (const [name, value] of Object.entries(ops[op])) {
        // A request's Host (or :authority) is set as the route's host rewrite, as in Istio.
        const authority =
          side === "request" && (name.toLowerCase() === "host" || name.toLowerCase() === ":authority");
        // Istio checks every value, the host rewrite's too: Envoy refuses the same
        // control characters in host_rewrite_literal.
        const problem = (authority ? undefined : headerOperationProblem(name)) ?? headerValueProblem(value);
        if (problem) issues.error(key(`${base}.${op}`, name), problem);
      }
    }
    ops.remove.forEach((name, i) => {
      const problem = headerOperationProblem(name);
      if (problem) issues.error(at(`${base}.remove`, i), problem);
    });
  }
}

/**
 * Why a route may not modify header `name` (Istio's
 * ValidateHTTPHeaderOperationName), or undefined if it may. Envoy refuses to
 * modify pseudo-headers (":path") and Host, and rejects the whole route
 * configuration that tries.
 */
function headerOperationProblem(name: string): string | undefined {
  if (name.startsWith(":"))
    return `header "${name}" cannot be modified: ":"-prefixed pseudo-headers are the proxy's (only a request's ":authority" or "host" may be set or added, as the host rewrite)`;
  if (name.toLowerCase() === "host")
    return `header "${name}" cannot be modified here (only a request's "host" may be set or added, as the host rewrite)`;
  return headerNameProblem(name);
}

/** Istio's limit of a direct response body: bigger ones burden the control plane and every proxy. */
const MAX_DIRECT_RESPONSE_BODY_BYTES = 1024 * 1024;
/** Istio warns above this size. */
const LARGE_DIRECT_RESPONSE_BODY_BYTES = 100 * 1024;

function checkCors(issues: Issues, p: string, cors: CorsPolicy | undefined): void {
  if (!cors) return;
  cors.allowOrigins.forEach((origin, i) => {
    checkStringMatch(issues, at(`${p}.allowOrigins`, i), origin, "nonEmpty");
  });
  if (cors.allowOrigin.length > 0)
    issues.warn(`${p}.allowOrigin`, "allowOrigin is deprecated; use allowOrigins");
  cors.allowMethods.forEach((method, i) => {
    if (!HTTP_METHODS.has(method))
      issues.error(at(`${p}.allowMethods`, i), `"${method}" is not a valid HTTP method`);
  });
  for (const field of ["allowHeaders", "exposeHeaders"] as const) {
    cors[field].forEach((name, i) => {
      if (name !== "*" && !isHeaderName(name)) {
        issues.error(at(`${p}.${field}`, i), `"${name}" is not a valid header name`);
      }
    });
  }
  if (cors.maxAge) {
    if (cors.maxAge.nanos !== 0) issues.error(`${p}.maxAge`, "maxAge must be a whole number of seconds");
    else if (cors.maxAge.seconds < 0) issues.error(`${p}.maxAge`, "maxAge must not be negative");
  }
}

function checkFault(issues: Issues, p: string, fault: HTTPFaultInjection | undefined): void {
  if (!fault) return;
  if (!fault.abort && !fault.delay) {
    issues.error(p, "fault injection needs an abort, a delay or both");
  }
  if (fault.delay) {
    const d = fault.delay;
    const dp = `${p}.delay`;
    if (d.percent !== 0) {
      checkPercentage(issues, `${dp}.percent`, d.percent);
      issues.warn(`${dp}.percent`, "percent is deprecated; use percentage");
    }
    checkPercentage(issues, `${dp}.percentage.value`, d.percentage?.value);
    // A delay without fixedDelay is accepted, as in Istio; it delays nothing.
    if (d.exponentialDelay) {
      issues.error(`${dp}.exponentialDelay`, "exponentialDelay is not supported; use fixedDelay");
    } else {
      checkDuration(issues, `${dp}.fixedDelay`, d.fixedDelay);
    }
  }
  if (fault.abort) {
    const a = fault.abort;
    const ap = `${p}.abort`;
    checkPercentage(issues, `${ap}.percentage.value`, a.percentage?.value);
    if (a.http2Error !== undefined) {
      issues.error(`${ap}.http2Error`, "HTTP/2 error aborts are not supported");
    } else if (a.grpcStatus !== undefined) {
      // Istio takes gRPC status names only, not numbers.
      if (!GRPC_STATUS_NAMES.includes(a.grpcStatus)) {
        issues.error(`${ap}.grpcStatus`, `"${a.grpcStatus}" is not a gRPC status name (e.g. UNAVAILABLE)`);
      }
    } else if (a.httpStatus !== undefined) {
      // Istio lets 600 through, but Envoy's fault filter takes 200..599 and
      // would reject the whole RouteConfiguration.
      if (a.httpStatus < 200 || a.httpStatus > 599) {
        issues.error(`${ap}.httpStatus`, `HTTP status ${a.httpStatus} must be between 200 and 599`);
      }
    } else {
      issues.warn(
        ap,
        "abort configured, but its error type (httpStatus or grpcStatus) is not set: it aborts nothing",
      );
    }
  }
}

function checkRetries(issues: Issues, p: string, retries: HTTPRetry | undefined): void {
  if (!retries) return;
  if (retries.attempts < 0) issues.error(`${p}.attempts`, "attempts must not be negative");
  if (
    retries.attempts === 0 &&
    (retries.perTryTimeout !== undefined ||
      retries.retryOn !== "" ||
      retries.retryRemoteLocalities !== undefined)
  ) {
    issues.error(`${p}.attempts`, "retry settings are given but attempts is 0 (retries disabled)");
  }
  checkDuration(issues, `${p}.perTryTimeout`, retries.perTryTimeout);
  checkDuration(issues, `${p}.backoff`, retries.backoff);
  if (retries.retryOn) {
    for (const raw of retries.retryOn.split(",")) {
      const policy = raw.trim();
      if (policy === "") continue;
      if (/^\d+$/.test(policy)) {
        const code = Number(policy);
        if (code < 100 || code > 599) {
          issues.error(`${p}.retryOn`, `retryOn status code ${policy} must be between 100 and 599`);
        }
      } else if (!RETRY_ON_POLICIES.has(policy)) {
        issues.error(`${p}.retryOn`, `"${policy}" is not a retry condition Envoy supports`);
      }
    }
  }
}

/** Checks a destination: host (no bare `*`), subset name and port. */
export function checkDestination(issues: Issues, p: string, dest: Destination): void {
  if (dest.host === "") {
    issues.error(`${p}.host`, "destination host is required");
  } else if (dest.host === "*") {
    issues.error(`${p}.host`, 'destination host cannot be "*"');
  } else {
    const problem = hostProblem(dest.host);
    if (problem) issues.error(`${p}.host`, problem);
  }
  if (dest.subset && !isIstioDnsLabel(dest.subset)) {
    issues.error(`${p}.subset`, `subset name "${dest.subset}" must be a DNS-1123 label`);
  }
  if (dest.port) checkPort(issues, `${p}.port.number`, dest.port.number);
}

/**
 * Istio's weight rules: each weight is non-negative and, when there are
 * several destinations, they cannot all be 0. Weights need not add up to
 * 100; Istio scales them.
 */
function checkWeightedDestinations(
  issues: Issues,
  p: string,
  routes: Array<{ destination?: Destination | undefined; weight: number }>,
): void {
  let total = 0;
  routes.forEach((r, i) => {
    const rp = at(p, i);
    if (!r.destination) issues.error(`${rp}.destination`, "destination is required");
    else checkDestination(issues, `${rp}.destination`, r.destination);
    if (r.weight < 0) issues.error(`${rp}.weight`, `weight ${r.weight} must not be negative`);
    else total += r.weight;
  });
  if (routes.length > 1 && total === 0) {
    issues.error(p, "destination weights add up to 0: at least one must be positive");
  }
}

function checkL4Match(issues: Issues, p: string, m: L4MatchAttributes): void {
  m.destinationSubnets.forEach((subnet, i) => {
    const problem = cidrProblem(subnet);
    if (problem) issues.error(at(`${p}.destinationSubnets`, i), problem);
  });
  if (m.sourceSubnet) {
    const problem = cidrProblem(m.sourceSubnet);
    if (problem) issues.error(`${p}.sourceSubnet`, problem);
  }
  if (m.port !== 0) checkPort(issues, `${p}.port`, m.port);
  checkLabels(issues, `${p}.sourceLabels`, m.sourceLabels);
  checkGatewayNames(issues, `${p}.gateways`, m.gateways);
  if (m.sourceNamespace && !isIstioDnsLabel(m.sourceNamespace)) {
    issues.error(`${p}.sourceNamespace`, `"${m.sourceNamespace}" is not a valid namespace name`);
  }
}

/**
 * Whether `sni` is the SNI Istio generates for AUTO_PASSTHROUGH gateways,
 * `outbound_.<port>_.<subset>_.<host>`, which a gateway-bound VirtualService
 * may match although it is not a DNS name.
 */
function isAutoPassthroughSni(sni: string): boolean {
  const parts = sni.split("_");
  if (parts.length < 4 || parts[0] !== "outbound") return false;
  const port = (parts[1] ?? "").replace(/^\.+|\.+$/g, "");
  const host = (parts[3] ?? "").replace(/^\.+|\.+$/g, "");
  return /[0-9]/.test(port) && /[a-zA-Z]/.test(host);
}

function checkTlsMatch(
  issues: Issues,
  p: string,
  m: TLSMatchAttributes,
  vsHosts: string[],
  boundToGateways: boolean,
): void {
  if (m.sniHosts.length === 0) issues.error(`${p}.sniHosts`, "at least one SNI host is required");
  m.sniHosts.forEach((sni, i) => {
    const sp = at(`${p}.sniHosts`, i);
    if (isIpAddress(sni)) {
      // Istio accepts an IP here with a warning and does not match it to the hosts.
      issues.warn(
        sp,
        `SNI host "${sni}" is an IP address: this goes against the SNI spec and most clients do not send it`,
      );
      return;
    }
    const generated = boundToGateways && sni.startsWith("outbound_");
    const problem =
      sni === "*"
        ? undefined
        : generated
          ? isAutoPassthroughSni(sni)
            ? undefined
            : `"${sni}" does not follow outbound_.<port>_.<subset>_.<host>`
          : hostProblem(sni);
    if (problem) {
      issues.error(sp, problem);
      return;
    }
    if (vsHosts.length > 0 && !vsHosts.some((host) => hostCovers(host, sni))) {
      issues.error(
        sp,
        `SNI host "${sni}" is not one of the VirtualService's hosts (or within a wildcard host)`,
      );
    }
  });
  m.destinationSubnets.forEach((subnet, i) => {
    const problem = cidrProblem(subnet);
    if (problem) issues.error(at(`${p}.destinationSubnets`, i), problem);
  });
  if (m.port !== 0) checkPort(issues, `${p}.port`, m.port);
  checkLabels(issues, `${p}.sourceLabels`, m.sourceLabels);
  checkGatewayNames(issues, `${p}.gateways`, m.gateways);
}

/** Whether the (possibly wildcard) host `outer` includes `inner`. */
export function hostCovers(outer: string, inner: string): boolean {
  const a = outer.toLowerCase();
  const b = inner.toLowerCase();
  if (a === "*" || a === b) return true;
  if (a.startsWith("*")) {
    const suffix = a.slice(1);
    if (b.startsWith("*")) return b.slice(1).endsWith(suffix);
    return b.endsWith(suffix);
  }
  return false;
}
