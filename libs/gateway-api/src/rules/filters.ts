// HTTPRoute and GRPCRoute filters as Istio writes them into a route:
// header modifiers, redirects, rewrites, mirrors and CORS (conversion.go's
// create*Filter).
import {
  CorsPolicy,
  CorsPolicy_UnmatchedPreflights,
  type Headers_HeaderOperations,
  HTTPMirrorPolicy,
  HTTPRedirect,
  HTTPRedirect_RedirectPortSelection,
  HTTPRewrite,
  type StringMatch,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import type { ObjectRef } from "../references.js";
import { type Referrer, resolveBackend } from "./backends.js";
import type { RuleContext, RuleError } from "./types.js";

interface HeaderFilter {
  set?: Array<{ name: string; value: string }>;
  add?: Array<{ name: string; value: string }>;
  remove?: string[];
}

/** HTAB, or a visible character or obs-text (RFC 9110's field-value), as Istio checks a set/add value. */
function validHeaderValue(value: string): boolean {
  for (const byte of Buffer.from(value)) {
    if (byte !== 0x09 && (byte < 0x20 || byte === 0x7f)) return false;
  }
  return true;
}

/** Lower-cased names; of equal names the first wins ("subsequent entries … MUST be ignored"). */
function headerMap(headers: HeaderFilter["set"]): { [key: string]: string } {
  const map: { [key: string]: string } = {};
  for (const { name, value } of headers ?? []) {
    const key = name.toLowerCase();
    if (!(key in map)) map[key] = value;
  }
  return map;
}

/** A RequestHeaderModifier or ResponseHeaderModifier; absent: nothing to do. */
export function headerOperations(
  filter: unknown,
): { value: Headers_HeaderOperations | undefined } | { error: RuleError } {
  if (!filter) return { value: undefined };
  const headers = filter as HeaderFilter;
  for (const { name, value } of [...(headers.set ?? []), ...(headers.add ?? [])]) {
    if (!validHeaderValue(value)) {
      return {
        error: { reason: "InvalidFilter", message: `header "${name}" value contains invalid characters` },
      };
    }
  }
  return {
    value: { set: headerMap(headers.set), add: headerMap(headers.add), remove: headers.remove ?? [] },
  };
}

interface PathModifier {
  type?: string;
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}

interface RedirectFilter {
  scheme?: string;
  hostname?: string;
  path?: PathModifier;
  port?: number;
  statusCode?: number;
}

/**
 * A RequestRedirect. Without a port, the Gateway API keeps the request's
 * port unless the scheme changes (then the scheme's default port), unlike
 * a VirtualService redirect's default. ReplaceFullPath is the new path,
 * ReplacePrefixMatch the redirect's prefix rewrite (kept as written).
 */
export function redirect(filter: RedirectFilter | undefined): HTTPRedirect {
  const value = HTTPRedirect.fromPartial({
    redirectCode: filter?.statusCode ?? 0,
    authority: filter?.hostname ?? "",
    scheme: filter?.scheme ?? "",
  });
  if (filter?.port !== undefined) value.port = filter.port;
  else
    value.derivePort =
      filter?.scheme !== undefined
        ? HTTPRedirect_RedirectPortSelection.FROM_PROTOCOL_DEFAULT
        : HTTPRedirect_RedirectPortSelection.FROM_REQUEST_PORT;
  if (filter?.path?.type === "ReplaceFullPath") value.uri = filter.path.replaceFullPath ?? "";
  if (filter?.path?.type === "ReplacePrefixMatch") value.prefixRewrite = filter.path.replacePrefixMatch ?? "";
  return value;
}

/** A URLRewrite: a prefix replacement (a trailing "/" dropped; "/" strips the prefix), a full path (a regex over the whole path), a hostname. */
export function rewrite(
  filter: { hostname?: string; path?: PathModifier } | undefined,
): HTTPRewrite | undefined {
  const value = HTTPRewrite.fromPartial({ authority: filter?.hostname ?? "" });
  if (filter?.path?.type === "ReplacePrefixMatch") {
    const prefix = filter.path.replacePrefixMatch ?? "";
    value.uri = prefix.endsWith("/") ? prefix.slice(0, -1) : prefix;
    if (value.uri === "") value.uri = "/";
  } else if (filter?.path?.type === "ReplaceFullPath") {
    value.uriRegexRewrite = { match: "/.*", rewrite: filter.path.replaceFullPath ?? "" };
  }
  return value.uri === "" && value.uriRegexRewrite === undefined && value.authority === ""
    ? undefined
    : value;
}

interface MirrorFilter {
  backendRef: ObjectRef;
  percent?: number;
  fraction?: { numerator: number; denominator?: number };
}

/** A RequestMirror: its backend resolved like a backendRef; the share from fraction (denominator 100 by default) or percent, else all. */
export function mirror(
  filter: MirrorFilter,
  referrer: Referrer,
  ctx: RuleContext,
): { value: HTTPMirrorPolicy } | { error: RuleError } {
  const { destination, error } = resolveBackend(filter.backendRef, referrer, ctx);
  if (error || !destination)
    return { error: error ?? { reason: "InvalidDestination", message: "no destination" } };
  const percentage =
    filter.fraction !== undefined
      ? { value: (100 * filter.fraction.numerator) / (filter.fraction.denominator ?? 100) }
      : filter.percent !== undefined
        ? { value: filter.percent }
        : undefined;
  return { value: HTTPMirrorPolicy.fromPartial({ destination, percentage }) };
}

interface CorsFilter {
  allowOrigins?: string[];
  allowCredentials?: boolean;
  allowMethods?: string[];
  allowHeaders?: string[];
  exposeHeaders?: string[];
  maxAge?: number;
}

/** Regex metacharacters escaped, as Go's regexp.QuoteMeta does. */
const quoteMeta = (text: string) => text.replace(/[\\.+*?()|[\]{}^$]/g, "\\$&");

/**
 * An origin as a string match: "*" any well-formed origin, no wildcard
 * exact, one trailing wildcard a prefix, other wildcards a regex.
 */
function originMatch(origin: string): StringMatch {
  if (origin === "*") return { regex: "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\\s?#]+$" };
  if (!origin.includes("*")) return { exact: origin };
  if (origin.indexOf("*") === origin.length - 1) return { prefix: origin.slice(0, -1) };
  return { regex: `^${quoteMeta(origin).replaceAll("\\*", ".*")}$` };
}

/** A CORS filter; preflights that match no policy go on to the backend (IGNORE), as Istio sets it. */
export function cors(filter: CorsFilter | undefined): CorsPolicy {
  // The API server defaults maxAge to 5 seconds.
  const maxAge = filter?.maxAge ?? 5;
  const policy = CorsPolicy.fromPartial({
    ...(filter?.allowCredentials ? { allowCredentials: true } : {}),
    allowMethods: filter?.allowMethods ?? [],
    allowHeaders: filter?.allowHeaders ?? [],
    exposeHeaders: filter?.exposeHeaders ?? [],
    ...(maxAge > 0 ? { maxAge: { seconds: maxAge, nanos: 0 } } : {}),
    unmatchedPreflights: CorsPolicy_UnmatchedPreflights.IGNORE,
  });
  policy.allowOrigins = (filter?.allowOrigins ?? []).filter((origin) => origin !== "").map(originMatch);
  return policy;
}
