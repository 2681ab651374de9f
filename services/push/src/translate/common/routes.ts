import type { HeaderMatcher } from "@sextant/proto/gen/envoy/config/route/v3/route_components";
import { HTTPFault } from "@sextant/proto/gen/envoy/extensions/filters/http/fault/v3/fault";
import { FractionalPercent_DenominatorType } from "@sextant/proto/gen/envoy/type/v3/percent";
import type { Duration } from "@sextant/proto/gen/google/protobuf/duration";
import type {
  HTTPFaultInjection,
  HTTPMatchRequest,
  StringMatch,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { regexProblem } from "@sextant/validation";

/** The fault filter's name in the HCM; routes override its config under this key. */
export const FAULT_FILTER_NAME = "envoy.filters.http.fault";

/** gRPC status codes by name, for Istio's `abort.grpcStatus: "UNAVAILABLE"`. */
export const GRPC_STATUS: Record<string, number> = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
};

/**
 * Istio's TranslateRouteMatch for the parts every client runs: the uri (exact as `path`, prefix,
 * regex as `safe_regex`; ignoreUriCase), then headers and withoutHeaders (inverted), each sorted by name.
 */
export function translateMatch(
  match: HTTPMatchRequest | undefined,
  headerForm: HeaderMatcherForm = "string_match",
): Record<string, unknown> {
  const result: Record<string, unknown> = { prefix: "/" };
  if (match?.uri) {
    delete result.prefix;
    if (match.uri.exact !== undefined) result.path = match.uri.exact;
    else if (match.uri.prefix !== undefined) result.prefix = match.uri.prefix;
    else if (match.uri.regex !== undefined) result.safeRegex = { regex: match.uri.regex };
    if (match.ignoreUriCase) result.caseSensitive = false;
  }
  const headers: Partial<HeaderMatcher>[] = [];
  for (const [name, value] of Object.entries(match?.headers ?? {}).sort(([a], [b]) => a.localeCompare(b))) {
    headers.push(headerMatcher(name, presentIfAnyValue(value), false, headerForm));
  }
  for (const [name, value] of Object.entries(match?.withoutHeaders ?? {}).sort(([a], [b]) =>
    a.localeCompare(b),
  )) {
    headers.push(headerMatcher(name, presentIfAnyValue(value), true, headerForm));
  }
  if (headers.length > 0) result.headers = headers;
  return result;
}

/**
 * The StringMatch a header or query parameter matcher is built from, with
 * "any value" spelled as the empty StringMatch that becomes a present match.
 * A regex of exactly "*" is Istio's canBeConvertedToPresentMatch: not an
 * RE2 pattern but "present". An empty prefix is push's own: Istio's
 * validation refuses it outside the uri (as @sextant/validation does) and
 * Envoy's StringMatcher and gRPC's legacy prefix_match reject it (min_len
 * 1), which would lose the whole RouteConfiguration; "starts with nothing"
 * is what a present match tests, so push keeps the match's meaning.
 */
export function presentIfAnyValue(value: StringMatch): StringMatch {
  return value.regex === "*" || value.prefix === "" ? {} : value;
}

/**
 * True if every regex an HTTPMatchRequest carries is one Envoy's RE2 compiles
 * (after the present-match conversion). Ingest's validation refuses the
 * others; push checks again so one bad pattern never makes Envoy reject the
 * whole RouteConfiguration it would sit in.
 */
export function matchRegexesValid(match: HTTPMatchRequest | undefined): boolean {
  if (!match) return true;
  const patterns: Array<string | undefined> = [match.uri?.regex];
  for (const value of [match.scheme, match.method, match.authority]) {
    if (value) patterns.push(presentIfAnyValue(value).regex);
  }
  for (const values of [match.headers, match.withoutHeaders, match.queryParams]) {
    for (const value of Object.values(values)) patterns.push(presentIfAnyValue(value).regex);
  }
  return patterns.every((pattern) => pattern === undefined || regexProblem(pattern) === undefined);
}

/**
 * How a HeaderMatcher carries its value. `string_match` is Istio's form
 * (Envoy's current field), kept for sidecars. `legacy` uses the older
 * exact_match / prefix_match / safe_regex_match fields, which every gRPC
 * xDS client parses: they are the fields gRFC A28 defined header matching
 * on, so C-core before 1.56 and grpc-java/grpc-go of that era know only
 * them (C-core 1.51 rejects the whole RouteConfiguration with "Invalid route
 * header matcher specified" on a string_match), while later clients (gRFC
 * A63, and @grpc/grpc-js-xds 1.14) parse both. Istio's header StringMatch
 * has no ignoreCase, so the legacy fields lose nothing; one form for every
 * proxyless client is simpler and safer than guessing the parser from the
 * node's user agent.
 */
export type HeaderMatcherForm = "string_match" | "legacy";

/** An empty StringMatch means "header present", as in Istio. */
export function headerMatcher(
  name: string,
  value: StringMatch,
  invert: boolean,
  form: HeaderMatcherForm = "string_match",
): Partial<HeaderMatcher> {
  const matcher: Partial<HeaderMatcher> = { name, invertMatch: invert };
  if (form === "legacy") {
    if (value.exact !== undefined) matcher.exactMatch = value.exact;
    else if (value.prefix !== undefined) matcher.prefixMatch = value.prefix;
    else if (value.regex !== undefined)
      matcher.safeRegexMatch = { regex: value.regex } as HeaderMatcher["safeRegexMatch"];
    else matcher.presentMatch = true;
    return matcher;
  }
  if (value.exact !== undefined)
    matcher.stringMatch = { exact: value.exact, ignoreCase: false } as HeaderMatcher["stringMatch"];
  else if (value.prefix !== undefined)
    matcher.stringMatch = { prefix: value.prefix, ignoreCase: false } as HeaderMatcher["stringMatch"];
  else if (value.regex !== undefined)
    matcher.stringMatch = {
      safeRegex: { regex: value.regex },
      ignoreCase: false,
    } as HeaderMatcher["stringMatch"];
  else matcher.presentMatch = true;
  return matcher;
}

/**
 * Istio's TranslateFault as the fault filter's per-route config. A delay
 * needs fixedDelay (exponential delays are not supported) and takes its
 * percentage, else the deprecated integer `percent` (0 when unset: no
 * delay). An abort needs an HTTP or gRPC status and takes its percentage,
 * else none (Envoy then aborts no request). Undefined when neither is left.
 */
export function translateFault(fault: HTTPFaultInjection): HTTPFault | undefined {
  const partial: Record<string, unknown> = {};
  const delay = fault.delay;
  if (delay?.fixedDelay) {
    partial.delay = {
      fixedDelay: delay.fixedDelay,
      percentage: delay.percentage
        ? fraction(delay.percentage.value)
        : { numerator: delay.percent, denominator: FractionalPercent_DenominatorType.HUNDRED },
    };
  }
  const abort = fault.abort;
  if (abort && (abort.grpcStatus !== undefined || abort.httpStatus !== undefined)) {
    const out: Record<string, unknown> = {};
    if (abort.percentage) out.percentage = fraction(abort.percentage.value);
    if (abort.grpcStatus !== undefined) {
      const code = /^\d+$/.test(abort.grpcStatus) ? Number(abort.grpcStatus) : GRPC_STATUS[abort.grpcStatus];
      out.grpcStatus = code ?? GRPC_STATUS.UNKNOWN;
    } else {
      out.httpStatus = abort.httpStatus;
    }
    partial.abort = out;
  }
  if (!partial.delay && !partial.abort) return undefined;
  return HTTPFault.fromPartial(partial);
}

/** A percentage (0-100, fractional) as Envoy's FractionalPercent per million. */
export function fraction(percent: number) {
  return { numerator: Math.round(percent * 10_000), denominator: FractionalPercent_DenominatorType.MILLION };
}
/** A duration of ms milliseconds. */
export function millis(ms: number): Duration {
  return { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 };
}
