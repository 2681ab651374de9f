import { isIP } from "node:net";
import { RE2JS } from "re2js";
import { at, type Issues, key } from "../issues.js";

/** A protobuf Duration as ts-proto represents it. */
export interface DurationLike {
  seconds: number;
  nanos: number;
}

// Host labels: Istio accepts upper case in host names (matching is
// case-insensitive downstream); Kubernetes object names do not.
const HOST_LABEL = /^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$/;
const WILDCARD_HOST_LABEL = /^(?:\*|(?:\*|\*-)?[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)$/;
const DNS1123_LABEL = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;

/** Whether `value` is a Kubernetes DNS-1123 label (object namespaces and names). */
export function isDns1123Label(value: string): boolean {
  return value.length <= 63 && DNS1123_LABEL.test(value);
}

/**
 * Whether `value` is a DNS label as Istio's own checks read it: like a
 * DNS-1123 label but in either case. Istio applies this to port names,
 * subset names, exportTo and host namespaces, `sourceNamespace` and gateway
 * names, so `HTTP-Web` is a valid port name there (Kubernetes object names
 * stay lower case).
 */
export function isIstioDnsLabel(value: string): boolean {
  return value.length <= 63 && HOST_LABEL.test(value);
}

/** Whether `value` is a Kubernetes DNS-1123 subdomain (most object names). */
export function isDns1123Subdomain(value: string): boolean {
  return value.length > 0 && value.length <= 253 && value.split(".").every((label) => isDns1123Label(label));
}

/**
 * Why `host` is not a valid host name, or undefined if it is. Like Istio, a
 * wildcard is only allowed in the first label (`*`, `*.example.com`,
 * `*-suffix.example.com`), short names without dots are fine, a trailing dot
 * (`istio.io.`) is allowed, and a dotted name's last label must not be all
 * digits (so `1.2.3.4` is not a host name).
 */
export function hostProblem(host: string): string | undefined {
  if (host.length === 0) return "host must not be empty";
  if (host.length > 255) return `host "${host}" is too long (at most 255 characters)`;
  const [first = "", ...rest] = host.split(".");
  if (first.length > 63 || !WILDCARD_HOST_LABEL.test(first)) {
    return `host "${host}" is invalid: label "${first}" must be alphanumeric with inner dashes, or a leading "*"`;
  }
  if (rest.length === 0) return undefined;
  const last = rest[rest.length - 1] ?? "";
  if (/^\d+$/.test(last)) return `host "${host}" is invalid: its top-level domain "${last}" is all digits`;
  for (const [i, label] of rest.entries()) {
    if (label === "" && i === rest.length - 1) break;
    if (label.length > 63 || !HOST_LABEL.test(label)) {
      return `host "${host}" is invalid: label "${label}" must be 1-63 alphanumeric characters or inner dashes`;
    }
  }
  return undefined;
}

/** Whether `value` is an IPv4 or IPv6 address. */
export function isIpAddress(value: string): boolean {
  return isIP(value) !== 0;
}

/** Why `value` is not an IP address or CIDR block, or undefined if it is. */
export function cidrProblem(value: string): string | undefined {
  const [address = "", prefix, ...extra] = value.split("/");
  const family = isIP(address);
  if (family === 0 || extra.length > 0) return `"${value}" is not an IP address or CIDR block`;
  if (prefix === undefined) return undefined;
  const bits = /^\d+$/.test(prefix) ? Number(prefix) : Number.NaN;
  const max = family === 4 ? 32 : 128;
  if (!(bits >= 0 && bits <= max)) return `"${value}" has an invalid prefix length (0-${max})`;
  return undefined;
}

/** Reports a port number outside 1..65535. */
export function checkPort(issues: Issues, path: string, port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    issues.error(path, `port number ${port} must be between 1 and 65535`);
  }
}

/** The duration in nanoseconds (exact for any duration Istio accepts). */
export function durationNanos(d: DurationLike): number {
  return d.seconds * 1e9 + d.nanos;
}

/**
 * Reports a duration below 1ms or finer than a millisecond, as Istio does
 * for timeouts, delays and other proxy durations.
 */
export function checkDuration(issues: Issues, path: string, d: DurationLike | undefined): void {
  if (d === undefined) return;
  const nanos = durationNanos(d);
  if (nanos < 1e6) {
    issues.error(path, "duration must be at least 1ms");
  } else if (nanos % 1e6 !== 0) {
    issues.error(path, "duration must be a whole number of milliseconds");
  }
}

/** Reports a percentage outside 0..100. */
export function checkPercentage(issues: Issues, path: string, value: number | undefined): void {
  if (value === undefined) return;
  if (!(value >= 0 && value <= 100)) issues.error(path, `percentage ${value} must be between 0 and 100`);
}

/**
 * Istio's longest accepted regex: Envoy caps an RE2 program's size, which is
 * always larger than the pattern's length, so Istio bounds the length.
 */
const MAX_REGEX_LENGTH = 1024;

/**
 * Why `pattern` is not a regex Envoy accepts, or undefined if it is: empty
 * (Envoy's RegexMatcher requires one), longer than Istio's 1024, or not
 * compiled by RE2 (re2js, a port of RE2's parser; JavaScript's RegExp
 * accepts lookarounds and backreferences RE2 refuses).
 */
export function regexProblem(pattern: string): string | undefined {
  if (pattern === "") return "a regex must not be empty";
  if (pattern.length > MAX_REGEX_LENGTH)
    return `regex is too large: ${pattern.length} characters, at most ${MAX_REGEX_LENGTH} allowed`;
  try {
    RE2JS.compile(pattern);
    return undefined;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    return `"${pattern}" is not a valid RE2 regular expression: ${reason}`;
  }
}

/** Reports an invalid RE2 expression. */
export function checkRegex(issues: Issues, path: string, pattern: string): void {
  const problem = regexProblem(pattern);
  if (problem) issues.error(path, problem);
}

const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_PREFIX =
  /^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*$/;

/**
 * Why `k` is not a label key as Istio checks the labels in its specs, or
 * undefined if it is: an optional dotted DNS prefix and `/`, then a name of
 * alphanumerics, `-`, `_` and `.` starting and ending alphanumeric. Istio's
 * check is looser than Kubernetes' for object metadata: either case in the
 * prefix and no 63-character limit.
 */
function labelKeyProblem(k: string): string | undefined {
  const slash = k.indexOf("/");
  const prefix = slash >= 0 ? k.slice(0, slash) : undefined;
  const name = slash >= 0 ? k.slice(slash + 1) : k;
  if (prefix !== undefined && !LABEL_PREFIX.test(prefix)) {
    return `label key "${k}" has an invalid prefix (must be a DNS subdomain)`;
  }
  if (!LABEL_NAME.test(name)) {
    return `label key "${k}" is invalid: alphanumerics, "-", "_" or ".", starting and ending alphanumeric`;
  }
  return undefined;
}

/** Reports invalid label keys and values of a label map (WorkloadEntry, subset and match labels). */
export function checkLabels(issues: Issues, path: string, labels: Record<string, string> | undefined): void {
  for (const [k, v] of Object.entries(labels ?? {})) {
    const keyProblem = labelKeyProblem(k);
    if (keyProblem) issues.error(key(path, k), keyProblem);
    if (v.length > 0 && !LABEL_NAME.test(v)) {
      issues.error(key(path, k), `label value "${v}" is invalid: alphanumerics, "-", "_" or "."`);
    }
  }
}

/**
 * Checks a workload selector's labels as Istio does: no empty key and no
 * `*` in a key or value. Istio does not hold selectors to Kubernetes' label
 * syntax (it does for the labels of WorkloadEntries and subsets, see
 * checkLabels). A selector without labels selects every workload: a warning.
 */
export function checkSelectorLabels(issues: Issues, path: string, labels: Record<string, string>): void {
  const entries = Object.entries(labels);
  if (entries.length === 0) {
    issues.warn(path, "workload selector specified without labels: it selects every workload");
  }
  for (const [k, v] of entries) {
    if (k === "") issues.error(key(path, k), "a selector label key must not be empty");
    else if (k.includes("*") || v.includes("*"))
      issues.error(key(path, k), `wildcard is not supported in a selector: "${k}=${v}"`);
  }
}

/**
 * Checks `exportTo` the way Istio does: each entry is `.` (this namespace),
 * `*` (everyone) or a namespace name; no duplicates; `*` stands alone.
 */
export function checkExportTo(
  issues: Issues,
  path: string,
  exportTo: string[],
  ownNamespace: string | undefined,
  allowNone = false,
): void {
  const seen = new Set<string>();
  exportTo.forEach((entry, i) => {
    const p = at(path, i);
    const normalised = entry === "." && ownNamespace ? ownNamespace : entry;
    if (entry === "~" && !allowNone) {
      issues.error(p, `exportTo "~" (no one) is only allowed on a ServiceEntry`);
      return;
    }
    if (entry !== "." && entry !== "*" && entry !== "~" && !isIstioDnsLabel(entry)) {
      issues.error(p, `"${entry}" is not ".", "*" or a valid namespace name`);
      return;
    }
    if (seen.has(normalised) || seen.has(entry)) {
      issues.error(p, `duplicate exportTo entry "${entry}"`);
      return;
    }
    seen.add(normalised);
    seen.add(entry);
  });
  if (exportTo.includes("*") && exportTo.length > 1) {
    issues.error(path, `"*" exports to every namespace and cannot be combined with other entries`);
  }
  if (allowNone && exportTo.includes("~") && exportTo.length > 1) {
    issues.error(path, `"~" exports to no one and cannot be combined with other entries`);
  }
}

/** Reports an empty required string. */
export function requireString(issues: Issues, path: string, value: string, what: string): boolean {
  if (value.length === 0) {
    issues.error(path, `${what} is required`);
    return false;
  }
  return true;
}

/** The HTTP methods Istio accepts in CORS policies and authorization rules. */
export const HTTP_METHODS = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "DELETE",
  "CONNECT",
  "OPTIONS",
  "TRACE",
  "PATCH",
]);

const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Whether `name` is a valid HTTP header name (an RFC 7230 token). */
export function isHeaderName(name: string): boolean {
  return HEADER_NAME.test(name);
}

/**
 * Port protocols a user may name (case-insensitive): the names Istio's
 * protocol parser knows. "UNSUPPORTED" and "HBONE" are not among them
 * (Istio refuses them in config), HTTP_PROXY is.
 */
const PROTOCOLS = new Set([
  "HTTP",
  "HTTPS",
  "GRPC",
  "GRPC-WEB",
  "HTTP2",
  "HTTP_PROXY",
  "MONGO",
  "MYSQL",
  "REDIS",
  "TCP",
  "TLS",
  "UDP",
]);

/** Whether `protocol` names a protocol Istio knows. */
export function isKnownProtocol(protocol: string): boolean {
  return PROTOCOLS.has(protocol.toUpperCase());
}

/** Protocols carried over HTTP (Istio's IsHTTP). */
const HTTP_PROTOCOLS = new Set(["HTTP", "HTTP2", "HTTP_PROXY", "GRPC", "GRPC-WEB"]);

/** Whether `protocol` is carried over HTTP, as Istio's protocol.IsHTTP reads it. */
export function isHttpProtocol(protocol: string): boolean {
  return HTTP_PROTOCOLS.has(protocol.toUpperCase());
}

/** Whether `protocol` runs over TLS (HTTPS or TLS), as Istio's protocol.IsTLS reads it. */
export function isTlsProtocol(protocol: string): boolean {
  const upper = protocol.toUpperCase();
  return upper === "HTTPS" || upper === "TLS";
}

/**
 * Why the path of a `unix://` address is not a socket Istio accepts, or
 * undefined: an abstract socket (`@name`) or an absolute path to a file (not
 * ending in `/`), as Istio's ValidateUnixAddress.
 */
export function unixAddressProblem(address: string): string | undefined {
  const socket = address.slice(UNIX_PREFIX.length);
  if (socket === "") return "a unix:// address needs a socket path";
  if (socket.startsWith("@")) return undefined;
  if (!socket.startsWith("/") || socket.endsWith("/")) {
    return `"${address}" must name an absolute path to a socket file (or @abstract)`;
  }
  return undefined;
}

/** The scheme that marks a Unix domain socket address. */
export const UNIX_PREFIX = "unix://";
