// The rules beyond protoc-gen-validate by which a real Envoy rejects (NACKs)
// a resource, read from Envoy's source (router/config_impl.cc,
// router/header_parser.cc, http/header_utility.cc,
// listener_manager/filter_chain_manager_impl.cc, listener_impl.cc), and the
// rules Istio's own tests hold every generated resource to
// (pilot/test/xdstest/validate.go). Each check takes one resource decoded by
// `decodeAny` (snake_case fields, Anys unpacked) and returns violations whose
// path names the field, in the style of the validate-rule checker.
import { RE2JS } from "re2js";
import { type Decoded, MESSAGE_TYPE, type Violation } from "./envoy-validate.js";

type Node = Decoded | undefined;

const TYPE_PREFIX = "type.googleapis.com/";
const HCM_TYPE = `${TYPE_PREFIX}envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`;
const ROUTER_TYPE = `${TYPE_PREFIX}envoy.extensions.filters.http.router.v3.Router`;
const TLS_INSPECTOR = "envoy.filters.listener.tls_inspector";
const HTTP_INSPECTOR = "envoy.filters.listener.http_inspector";

/** Envoy's default for a route configuration's max_direct_response_body_size_bytes (config_impl.cc). */
export const ENVOY_MAX_DIRECT_RESPONSE_BODY_BYTES = 4096;
/** What Istio sets max_direct_response_body_size_bytes to on every route configuration (route.DefaultMaxDirectResponseBodySizeBytes). */
export const ISTIO_MAX_DIRECT_RESPONSE_BODY_BYTES = 1024 * 1024;

/**
 * Network filters Envoy's factories declare terminal (must be last) and not
 * terminal (may not be last), by typed_config type; a filter of a type in
 * neither list is not judged.
 */
const TERMINAL_NETWORK_FILTERS = new Set(
  [
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
    "envoy.extensions.filters.network.direct_response.v3.Config",
    "envoy.extensions.filters.network.echo.v3.Echo",
    "envoy.extensions.filters.network.redis_proxy.v3.RedisProxy",
    "envoy.extensions.filters.network.thrift_proxy.v3.ThriftProxy",
  ].map((name) => TYPE_PREFIX + name),
);
const NON_TERMINAL_NETWORK_FILTERS = new Set(
  [
    "envoy.extensions.filters.network.rbac.v3.RBAC",
    "envoy.extensions.filters.network.ext_authz.v3.ExtAuthz",
    "envoy.extensions.filters.network.local_ratelimit.v3.LocalRateLimit",
    "envoy.extensions.filters.network.ratelimit.v3.RateLimit",
    "envoy.extensions.filters.network.connection_limit.v3.ConnectionLimit",
    "envoy.extensions.filters.network.sni_cluster.v3.SniCluster",
  ].map((name) => TYPE_PREFIX + name),
);

// ---------------------------------------------------------------------------
// Reading decoded resources.

const isNode = (value: unknown): value is Decoded =>
  value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Uint8Array);
const obj = (node: Node, key: string): Node => {
  const value = node?.[key];
  return isNode(value) ? value : undefined;
};
const list = (node: Node, key: string): Decoded[] => {
  const value = node?.[key];
  return Array.isArray(value) ? (value.filter(isNode) as Decoded[]) : [];
};
const strings = (node: Node, key: string): string[] => {
  const value = node?.[key];
  return Array.isArray(value) ? value.map(String) : [];
};
const str = (node: Node, key: string): string => {
  const value = node?.[key];
  return typeof value === "string" ? value : "";
};
const num = (node: Node, key: string): number => {
  const value = node?.[key];
  return typeof value === "number" ? value : 0;
};
/** A wrapper field's value (`{value}`), its default when the wrapper is set empty, undefined when not set. */
function wrapped<V>(node: Node, key: string, empty: V): V | undefined {
  const wrapper = obj(node, key);
  if (!wrapper) return undefined;
  return (wrapper.value as V | undefined) ?? empty;
}
const join = (path: string, key: string) => (path ? `${path}.${key}` : key);
const typeOf = (any: Node) => str(any, "@type");
const shortType = (typeUrl: string) => typeUrl.slice(typeUrl.lastIndexOf(".") + 1);
/** The path of an Any's unpacked value, as the validate-rule checker names it: `typed_config(HttpConnectionManager)`. */
const anyPath = (path: string, any: Node) => `${path}(${shortType(typeOf(any))})`;

/** Calls visit on every decoded message under node (node included), with its path. */
function walk(node: unknown, path: string, visit: (node: Decoded, path: string) => void): void {
  if (Array.isArray(node)) {
    node.forEach((item, i) => {
      walk(item, `${path}[${i}]`, visit);
    });
    return;
  }
  if (!isNode(node)) return;
  visit(node, path);
  for (const [key, value] of Object.entries(node)) {
    if (key === "@type") continue;
    if (isNode(value) && typeof value["@type"] === "string")
      walk(value, anyPath(join(path, key), value), visit);
    else walk(value, join(path, key), visit);
  }
}

// ---------------------------------------------------------------------------
// Rules shared by every resource type.

const regexErrors = new Map<string, string | null>();
/** The messages that hold an RE2 pattern in their `regex` field: Envoy's and the xDS matcher API's. */
const REGEX_MATCHERS = new Set(["envoy.type.matcher.v3.RegexMatcher", "xds.type.matcher.v3.RegexMatcher"]);

/** Why RE2 (the engine of Envoy's safe_regex) refuses a pattern, or null when it compiles. */
export function re2Error(pattern: string): string | null {
  let error = regexErrors.get(pattern);
  if (error === undefined) {
    try {
      RE2JS.compile(pattern);
      error = null;
    } catch (e) {
      error = (e as Error).message;
    }
    regexErrors.set(pattern, error);
  }
  return error;
}

/**
 * Every RegexMatcher (safe_regex, regex_rewrite.pattern, …) anywhere in the
 * resource must compile as RE2: Envoy compiles each when it loads the
 * resource and rejects it otherwise.
 */
export function regexViolations(resource: Decoded): Violation[] {
  const out: Violation[] = [];
  walk(resource, "", (node, path) => {
    if (!REGEX_MATCHERS.has(node[MESSAGE_TYPE] ?? "")) return;
    const error = re2Error(str(node, "regex"));
    if (error !== null) out.push({ path: join(path, "regex"), rule: `RE2 does not compile it: ${error}` });
  });
  return out;
}

/** protobuf's bound on a Duration's seconds (TimeUtil::kDurationMaxSeconds, 10,000 years). */
const DURATION_MAX_SECONDS = 315_576_000_000;

/**
 * Every Duration anywhere in the resource must be one Envoy can read:
 * DurationUtil rejects a negative one ("Expected positive duration") and one
 * out of protobuf's range ("Duration out-of-range").
 */
export function durationViolations(resource: Decoded): Violation[] {
  const out: Violation[] = [];
  walk(resource, "", (node, path) => {
    if (node[MESSAGE_TYPE] !== "google.protobuf.Duration") return;
    const seconds = num(node, "seconds");
    const nanos = num(node, "nanos");
    if (seconds < 0 || nanos < 0)
      out.push({ path, rule: `Expected positive duration (got ${seconds}s ${nanos}ns)` });
    else if (nanos > 999_999_999 || seconds > DURATION_MAX_SECONDS) {
      out.push({ path, rule: `Duration out-of-range (got ${seconds}s ${nanos}ns)` });
    }
  });
  return out;
}

// ---------------------------------------------------------------------------
// Route configurations.

/** Options of the checks that differ by proxy. */
export interface RuleOptions {
  /**
   * Hold resources to Istio's rules for Envoy proxies too (validate.go: listener
   * inspectors, transport protocols, TLS termination, the max direct response
   * body size); not for proxyless gRPC, which has no listener filters.
   */
  readonly istioSidecar: boolean;
}

/** Envoy's header_parser.cc: headers_to_add/headers_to_remove at any level. */
function headerMutationViolations(node: Node, path: string, out: Violation[]): void {
  for (const key of ["request_headers_to_add", "response_headers_to_add"]) {
    list(node, key).forEach((option, i) => {
      const at = `${join(path, key)}[${i}]`;
      const name = str(obj(option, "header"), "key");
      if (!isModifiableHeader(name)) {
        out.push({
          path: `${at}.header.key`,
          rule: `:-prefixed or host headers may not be modified (got ${JSON.stringify(name)})`,
        });
      }
      const action = option.append_action;
      if (obj(option, "append") && action !== undefined && action !== "APPEND_IF_EXISTS_OR_ADD") {
        out.push({ path: at, rule: "Both append and append_action are set and it's not allowed" });
      }
      const formatError = substitutionFormatError(str(obj(option, "header"), "value"));
      if (formatError) out.push({ path: `${at}.header.value`, rule: formatError });
    });
  }
  for (const key of ["request_headers_to_remove", "response_headers_to_remove"]) {
    strings(node, key).forEach((name, i) => {
      if (!isModifiableHeader(name)) {
        out.push({
          path: `${join(path, key)}[${i}]`,
          rule: `:-prefixed or host headers may not be removed (got ${JSON.stringify(name)})`,
        });
      }
    });
  }
}

/** Envoy's HeaderUtility::isModifiableHeader (and isRemovableHeader, the same test). */
const isModifiableHeader = (name: string) => !name.startsWith(":") && name.toLowerCase() !== "host";

/**
 * A header value is a substitution format string: every `%` is either `%%`
 * or opens a `%COMMAND%`, `%COMMAND(args)%` or `%COMMAND(args):N%`; Envoy
 * rejects anything else ("Couldn't find valid command at position …").
 */
function substitutionFormatError(value: string): string | undefined {
  const command = /^%[A-Z0-9_]+(\([^)]*\))?(:[0-9]+)?%/;
  for (let i = 0; i < value.length; i++) {
    if (value[i] !== "%") continue;
    if (value[i + 1] === "%") {
      i++;
      continue;
    }
    const match = command.exec(value.slice(i));
    if (!match) return `no valid %COMMAND% at position ${i} (a literal % is written %%)`;
    i += match[0].length - 1;
  }
  return undefined;
}

/** Envoy's ShadowPolicyImpl: a mirror policy names exactly one of cluster and cluster_header. */
function mirrorViolations(node: Node, path: string, out: Violation[]): void {
  list(node, "request_mirror_policies").forEach((policy, i) => {
    const hasCluster = str(policy, "cluster") !== "";
    const hasHeader = str(policy, "cluster_header") !== "";
    if (hasCluster === hasHeader) {
      out.push({
        path: `${join(path, "request_mirror_policies")}[${i}]`,
        rule: "exactly one of cluster or cluster_header in request mirror policy need to be specified",
      });
    }
  });
}

/** Envoy's RetryPolicyImpl: max_interval below base_interval (each at least 1ms) is rejected. */
function retryViolations(policy: Node, path: string, out: Violation[]): void {
  const backOff = obj(policy, "retry_back_off");
  if (!backOff) return;
  const millis = (duration: Node) =>
    Math.max(1, Math.floor(num(duration, "seconds") * 1000 + num(duration, "nanos") / 1e6));
  const base = millis(obj(backOff, "base_interval"));
  const max = obj(backOff, "max_interval");
  if (max && millis(max) < base) {
    out.push({
      path: join(path, "retry_back_off.max_interval"),
      rule: "retry_policy.max_interval must greater than or equal to the base_interval",
    });
  }
}

/** The checks of one route (config_impl.cc RouteEntryImplBase and friends). */
function routeViolations(route: Decoded, path: string, maxBody: number, config: Decoded, out: Violation[]) {
  headerMutationViolations(route, path, out);
  const action = obj(route, "route");
  if (action) {
    const at = join(path, "route");
    const weighted = obj(action, "weighted_clusters");
    const plugin = str(action, "cluster_specifier_plugin");
    const names =
      str(action, "cluster") !== "" ||
      str(action, "cluster_header") !== "" ||
      plugin !== "" ||
      obj(action, "inline_cluster_specifier_plugin") !== undefined ||
      list(weighted, "clusters").length > 0;
    if (!names) {
      out.push({
        path: at,
        rule: "a route action names no cluster (cluster, weighted_clusters, cluster_header or cluster_specifier_plugin)",
      });
    }
    if (plugin !== "") {
      const defined = list(config, "cluster_specifier_plugins").some(
        (p) => str(obj(p, "extension"), "name") === plugin,
      );
      if (!defined) {
        out.push({
          path: join(at, "cluster_specifier_plugin"),
          rule: `Unknown cluster specifier plugin name: ${plugin} is used in the route`,
        });
      }
    }
    if (weighted) {
      let total = 0;
      list(weighted, "clusters").forEach((cluster, i) => {
        const cat = `${join(at, "weighted_clusters.clusters")}[${i}]`;
        const hasName = str(cluster, "name") !== "";
        const hasHeader = str(cluster, "cluster_header") !== "";
        if (hasName && hasHeader)
          out.push({ path: cat, rule: "Only one of name or cluster_header can be specified" });
        if (!hasName && !hasHeader) {
          out.push({ path: cat, rule: "At least one of name or cluster_header need to be specified" });
        }
        const weight = wrapped<number>(cluster, "weight", 0);
        if (weight === undefined)
          out.push({ path: join(cat, "weight"), rule: "a weighted cluster needs a weight" });
        total += weight ?? 0;
        headerMutationViolations(cluster, cat, out);
      });
      if (total === 0) {
        out.push({
          path: join(at, "weighted_clusters"),
          rule: "Sum of weights in the weighted_cluster must be greater than 0",
        });
      }
    }
    mirrorViolations(action, at, out);
    retryViolations(obj(action, "retry_policy"), join(at, "retry_policy"), out);
    const upgrades = new Set<string>();
    list(action, "upgrade_configs").forEach((upgrade, i) => {
      const type = str(upgrade, "upgrade_type");
      const uat = `${join(at, "upgrade_configs")}[${i}]`;
      if (upgrades.has(type.toLowerCase())) out.push({ path: uat, rule: `Duplicate upgrade ${type}` });
      upgrades.add(type.toLowerCase());
      if (type !== "CONNECT" && obj(upgrade, "connect_config")) {
        out.push({ path: uat, rule: `Non-CONNECT upgrade type ${type} has ConnectConfig` });
      }
    });
    const rewrites = ["prefix_rewrite", "regex_rewrite", "path_rewrite_policy"].filter((key) =>
      key === "prefix_rewrite" ? str(action, key) !== "" : obj(action, key) !== undefined,
    );
    if (rewrites.length > 1) {
      out.push({
        path: at,
        rule: `Specify only one of prefix_rewrite, regex_rewrite or path_rewrite_policy (got ${rewrites.join(", ")})`,
      });
    }
  }
  const direct = obj(route, "direct_response");
  const body = obj(direct, "body");
  if (body) {
    const size =
      typeof body.inline_string === "string"
        ? Buffer.byteLength(body.inline_string, "utf8")
        : body.inline_bytes instanceof Uint8Array
          ? body.inline_bytes.length
          : 0;
    if (size > maxBody) {
      out.push({
        path: join(path, "direct_response.body"),
        rule: `response body size is ${size} bytes; maximum is ${maxBody}`,
      });
    }
  }
}

/**
 * The checks of a route configuration (RDS, or inline in an HCM): Envoy's
 * domain uniqueness, header mutations, route actions, direct response
 * sizes, mirror and retry policies; Istio's unique virtual host names (and,
 * for sidecars, its max direct response body size).
 */
export function routeConfigurationViolations(
  config: Decoded,
  path: string,
  options: RuleOptions,
  /** Inline in an HCM: Istio's size convention holds for the route configurations it serves over RDS. */
  inline = false,
): Violation[] {
  const out: Violation[] = [];
  const maxBody =
    wrapped<number>(config, "max_direct_response_body_size_bytes", 0) ?? ENVOY_MAX_DIRECT_RESPONSE_BODY_BYTES;
  if (options.istioSidecar && !inline && maxBody !== ISTIO_MAX_DIRECT_RESPONSE_BODY_BYTES) {
    out.push({
      path: join(path, "max_direct_response_body_size_bytes"),
      rule: `Istio sets ${ISTIO_MAX_DIRECT_RESPONSE_BODY_BYTES} on every route configuration (got ${wrapped<number>(config, "max_direct_response_body_size_bytes", 0) ?? "unset"})`,
    });
  }
  headerMutationViolations(config, path, out);
  mirrorViolations(config, path, out);
  const name = str(config, "name");
  const vhostNames = new Set<string>();
  const domains = new Map<string, string>();
  let wildcard: string | undefined;
  list(config, "virtual_hosts").forEach((vhost, v) => {
    const vat = `${join(path, "virtual_hosts")}[${v}]`;
    const vname = str(vhost, "name");
    if (vhostNames.has(vname)) out.push({ path: join(vat, "name"), rule: `duplicate virtual host ${vname}` });
    vhostNames.add(vname);
    strings(vhost, "domains").forEach((domain, d) => {
      const lower = domain.toLowerCase();
      const at = `${join(vat, "domains")}[${d}]`;
      if (lower === "*") {
        if (wildcard !== undefined) {
          out.push({
            path: at,
            rule: `Only a single wildcard domain is permitted in route ${name} (also in ${wildcard})`,
          });
        } else wildcard = vname;
        return;
      }
      // Envoy keys suffix wildcards by their suffix, prefix wildcards by their prefix, others as they are.
      const key = lower.startsWith("*")
        ? `suffix:${lower.slice(1)}`
        : lower.endsWith("*")
          ? `prefix:${lower.slice(0, -1)}`
          : `exact:${lower}`;
      const other = domains.get(key);
      if (other !== undefined) {
        out.push({
          path: at,
          rule: `Only unique values for domains are permitted. Duplicate entry of domain ${lower} in route ${name} (also in ${other})`,
        });
      } else domains.set(key, vname);
    });
    headerMutationViolations(vhost, vat, out);
    mirrorViolations(vhost, vat, out);
    retryViolations(obj(vhost, "retry_policy"), join(vat, "retry_policy"), out);
    if (obj(vhost, "matcher") && list(vhost, "routes").length > 0) {
      out.push({ path: vat, rule: "cannot set both matcher and routes on virtual host" });
    }
    list(vhost, "virtual_clusters").forEach((cluster, i) => {
      if (list(cluster, "headers").length === 0) {
        out.push({
          path: `${join(vat, "virtual_clusters")}[${i}]`,
          rule: "virtual clusters must define 'headers'",
        });
      }
    });
    list(vhost, "routes").forEach((route, r) => {
      routeViolations(route, `${join(vat, "routes")}[${r}]`, maxBody, config, out);
    });
  });
  return out;
}

// ---------------------------------------------------------------------------
// Listeners.

/** The IP prefix a CidrRange covers, normalized as Envoy's CidrRange does (address masked to the length). */
function cidrKey(range: Decoded): string {
  const address = str(range, "address_prefix");
  const length = wrapped<number>(range, "prefix_len", 0) ?? 0;
  if (address.includes(":")) {
    const [head = "", tail = ""] = address.split("::");
    const part = (s: string) => (s ? s.split(":") : []);
    const groups = [...part(head)];
    const rest = part(tail);
    if (address.includes("::")) while (groups.length + rest.length < 8) groups.push("0");
    groups.push(...rest);
    let bits = 0n;
    for (const group of groups) bits = (bits << 16n) | BigInt(Number.parseInt(group || "0", 16));
    const kept = BigInt(Math.min(length, 128));
    const masked = kept === 0n ? 0n : (bits >> (128n - kept)) << (128n - kept);
    return `${masked.toString(16)}/${length}`;
  }
  const octets = address.split(".").map(Number);
  const bits = octets.reduce((acc, octet) => acc * 256 + (octet || 0), 0);
  const kept = Math.min(length, 32);
  const masked = kept === 0 ? 0 : Math.floor(bits / 2 ** (32 - kept)) * 2 ** (32 - kept);
  return `${masked}/${length}`;
}

/** Every leaf of Envoy's filter chain match trie a FilterChainMatch fills (filter_chain_manager_impl.cc). */
function matchLeaves(match: Node): string[] {
  const orEmpty = (values: string[]) => (values.length > 0 ? values : [""]);
  const port = String(wrapped<number>(match, "destination_port", 0) ?? 0);
  const destinations = orEmpty(list(match, "prefix_ranges").map(cidrKey));
  const serverNames = orEmpty(
    strings(match, "server_names").map((n) => {
      const lower = n.toLowerCase();
      return lower.startsWith("*.") ? lower.slice(1) : lower;
    }),
  );
  const transport = str(match, "transport_protocol");
  const applications = orEmpty(strings(match, "application_protocols"));
  const directSources = orEmpty(list(match, "direct_source_prefix_ranges").map(cidrKey));
  const sourceType = String(match?.source_type ?? "ANY");
  const sources = orEmpty(list(match, "source_prefix_ranges").map(cidrKey));
  const sourcePorts = orEmpty(strings(match, "source_ports"));
  const leaves: string[] = [];
  for (const d of destinations)
    for (const s of serverNames)
      for (const a of applications)
        for (const ds of directSources)
          for (const src of sources)
            for (const sp of sourcePorts)
              leaves.push(
                JSON.stringify([port, d, s, transport, a, ds, sourceType, src, sp === "" ? "0" : sp]),
              );
  return leaves;
}

/** A FilterChainMatch as a canonical string, for "the same matching rules". */
const canonical = (value: unknown): string =>
  JSON.stringify(value ?? {}, (_key, v) =>
    isNode(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );

/** A filter chain's HTTP connection managers, with their paths. */
function connectionManagers(chain: Decoded, path: string): Array<[Decoded, string]> {
  const found: Array<[Decoded, string]> = [];
  list(chain, "filters").forEach((filter, i) => {
    const config = obj(filter, "typed_config");
    if (typeOf(config) === HCM_TYPE)
      found.push([config!, anyPath(`${join(path, "filters")}[${i}].typed_config`, config)]);
  });
  return found;
}

/** The checks of one HTTP connection manager (HCM config.cc), its inline route configuration included. */
function connectionManagerViolations(
  hcm: Decoded,
  path: string,
  listener: Decoded | undefined,
  options: RuleOptions,
  out: Violation[],
): void {
  const filters = list(hcm, "http_filters");
  const isRouter = (filter: Decoded) =>
    typeOf(obj(filter, "typed_config")) === ROUTER_TYPE ||
    (obj(filter, "typed_config") === undefined && str(filter, "name") === "envoy.filters.http.router");
  filters.forEach((filter, i) => {
    if (isRouter(filter) && i !== filters.length - 1) {
      out.push({
        path: `${join(path, "http_filters")}[${i}]`,
        rule: `terminal filter named ${str(filter, "name")} must be the last filter in a http filter chain`,
      });
    }
  });
  const last = filters.at(-1);
  if (!last || !isRouter(last)) {
    out.push({
      path: join(path, "http_filters"),
      rule: last
        ? `the last HTTP filter must be the router (terminal), got ${str(last, "name")}`
        : "no HTTP filters: the router must end the chain",
    });
  }
  const upgrades = new Set<string>();
  list(hcm, "upgrade_configs").forEach((upgrade, i) => {
    const type = str(upgrade, "upgrade_type").toLowerCase();
    if (upgrades.has(type)) {
      out.push({
        path: `${join(path, "upgrade_configs")}[${i}]`,
        rule: `multiple upgrade configs with the same name: '${str(upgrade, "upgrade_type")}'`,
      });
    }
    upgrades.add(type);
  });
  // A QUIC listener is a UDP one with quic_options; HTTP/3 runs on it, and only HTTP/3 does.
  const quic =
    str(obj(obj(listener, "address"), "socket_address"), "protocol") === "UDP" &&
    obj(obj(listener, "udp_listener_config"), "quic_options") !== undefined;
  if (listener && hcm.codec_type === "HTTP3" && !quic) {
    out.push({ path: join(path, "codec_type"), rule: "HTTP/3 codec configured on non-QUIC listener" });
  }
  if (listener && hcm.codec_type !== "HTTP3" && quic) {
    out.push({ path: join(path, "codec_type"), rule: "Non-HTTP/3 codec configured on QUIC listener" });
  }
  const inline = obj(hcm, "route_config");
  if (inline) out.push(...routeConfigurationViolations(inline, join(path, "route_config"), options, true));
}

/** Envoy's terminal-filter rule for a network filter chain. */
function networkFilterViolations(chain: Decoded, path: string, out: Violation[]): void {
  const filters = list(chain, "filters");
  filters.forEach((filter, i) => {
    const type = typeOf(obj(filter, "typed_config"));
    const at = `${join(path, "filters")}[${i}]`;
    if (TERMINAL_NETWORK_FILTERS.has(type) && i !== filters.length - 1) {
      out.push({
        path: at,
        rule: `terminal filter named ${str(filter, "name")} must be the last filter in a network filter chain`,
      });
    }
    if (NON_TERMINAL_NETWORK_FILTERS.has(type) && i === filters.length - 1) {
      out.push({
        path: at,
        rule: `non-terminal filter named ${str(filter, "name")} is the last filter in a network filter chain`,
      });
    }
  });
}

/**
 * The checks of one listener: Envoy's filter chain manager (overlapping or
 * equal matches, partial wildcard server names, unimplemented fields,
 * chain names under a matcher), terminal filters, HCM rules; and Istio's
 * validate.go listener rules (inspectors, TLS termination, transport
 * protocol on inbound chains and per destination port, duplicate listener
 * filters).
 */
export function listenerViolations(listener: Decoded, options: RuleOptions): Violation[] {
  const out: Violation[] = [];
  const chains = list(listener, "filter_chains");
  const hasMatcher = obj(listener, "filter_chain_matcher") !== undefined;
  const socket = obj(obj(listener, "address"), "socket_address");

  if (
    obj(listener, "address") &&
    !obj(listener, "api_listener") &&
    chains.length === 0 &&
    !obj(listener, "default_filter_chain")
  ) {
    out.push({ path: "filter_chains", rule: "no filter chains specified" });
  }

  // Istio: a listener filter twice is always a bug.
  const listenerFilters = new Set<string>();
  list(listener, "listener_filters").forEach((filter, i) => {
    const name = str(filter, "name");
    if (listenerFilters.has(name))
      out.push({ path: `listener_filters[${i}].name`, rule: `duplicate listener filter ${name}` });
    listenerFilters.add(name);
  });
  const hasTlsInspector = listenerFilters.has(TLS_INSPECTOR);
  const hasHttpInspector = listenerFilters.has(HTTP_INSPECTOR);

  // Envoy: equal matches, then overlapping ones (the trie's leaves). Istio's validate.go checks
  // equal matches only, and skips chains of inbound_ HCMs outside virtualInbound (listeners it
  // builds before merging them into virtualInbound); no such listener is ever sent, so every chain
  // is held to Envoy's rule here.
  const equal = new Map<string, number>();
  const leaves = new Map<string, number>();
  const names = new Set<string>();
  chains.forEach((chain, i) => {
    const at = `filter_chains[${i}]`;
    const match = obj(chain, "filter_chain_match");
    if (str(match, "address_suffix") !== "" || obj(match, "suffix_len")) {
      out.push({
        path: join(at, "filter_chain_match"),
        rule: "contains unimplemented fields (address_suffix, suffix_len)",
      });
    }
    if (hasMatcher) {
      const name = str(chain, "name");
      if (name === "")
        out.push({ path: join(at, "name"), rule: '"name" field is required when using a listener matcher' });
      else if (names.has(name))
        out.push({ path: join(at, "name"), rule: `"name" field is duplicated with value '${name}'` });
      names.add(name);
    } else {
      const key = canonical(match);
      const same = equal.get(key);
      if (same !== undefined) {
        out.push({
          path: join(at, "filter_chain_match"),
          rule: `multiple filter chains with the same matching rules are defined (filter_chains[${same}])`,
        });
      } else {
        equal.set(key, i);
        let overlap: number | undefined;
        for (const leaf of matchLeaves(match)) {
          const other = leaves.get(leaf);
          if (other !== undefined && other !== i) overlap ??= other;
          else leaves.set(leaf, i);
        }
        if (overlap !== undefined) {
          out.push({
            path: join(at, "filter_chain_match"),
            rule: `multiple filter chains with overlapping matching rules are defined (filter_chains[${overlap}])`,
          });
        }
      }
      strings(match, "server_names").forEach((name, n) => {
        if (name.includes("*") && !name.startsWith("*.")) {
          out.push({
            path: `${join(at, "filter_chain_match.server_names")}[${n}]`,
            rule: `partial wildcards are not supported in "server_names" (got ${JSON.stringify(name)})`,
          });
        }
      });
    }

    // Istio: matching TLS needs the TLS inspector; ALPN needs it or the HTTP inspector.
    if (options.istioSidecar && match && !hasTlsInspector) {
      const transport = str(match, "transport_protocol");
      if (transport === "tls")
        out.push({
          path: join(at, "filter_chain_match.transport_protocol"),
          rule: "transport protocol set, but missing tls inspector",
        });
      if (transport === "" && strings(match, "server_names").length > 0) {
        out.push({
          path: join(at, "filter_chain_match.server_names"),
          rule: "server names set, but missing tls inspector",
        });
      }
      if (transport === "" && strings(match, "application_protocols").length > 0 && !hasHttpInspector) {
        out.push({
          path: join(at, "filter_chain_match.application_protocols"),
          rule: "application protocol set, but missing tls inspector or http inspector",
        });
      }
    }
    // Istio: TLS matched and served over HTTP must be terminated.
    const hcms = connectionManagers(chain, at);
    if (
      options.istioSidecar &&
      str(match, "transport_protocol") === "tls" &&
      !obj(chain, "transport_socket") &&
      hcms.length > 0
    ) {
      out.push({
        path: join(at, "transport_socket"),
        rule: "tls traffic may not be terminated: TLS is matched and HTTP served without a transport socket",
      });
    }
    networkFilterViolations(chain, at, out);
    for (const [hcm, path] of hcms) connectionManagerViolations(hcm, path, listener, options, out);
  });
  const defaultChain = obj(listener, "default_filter_chain");
  if (defaultChain) {
    networkFilterViolations(defaultChain, "default_filter_chain", out);
    for (const [hcm, path] of connectionManagers(defaultChain, "default_filter_chain"))
      connectionManagerViolations(hcm, path, listener, options, out);
  }
  const api = obj(obj(listener, "api_listener"), "api_listener");
  if (typeOf(api) === HCM_TYPE)
    connectionManagerViolations(api!, anyPath("api_listener.api_listener", api), listener, options, out);

  // Istio: an unset field is a wildcard only when no other chain sets it, so once a chain of a
  // destination port matches a transport protocol, every chain of that port must.
  const portsWithTransport = new Set<number>();
  for (const chain of options.istioSidecar ? chains : []) {
    const match = obj(chain, "filter_chain_match");
    const port = wrapped<number>(match, "destination_port", 0);
    if (port !== undefined && str(match, "transport_protocol") !== "") portsWithTransport.add(port);
  }
  chains.forEach((chain, i) => {
    const match = obj(chain, "filter_chain_match");
    const port = wrapped<number>(match, "destination_port", 0);
    if (port !== undefined && portsWithTransport.has(port) && str(match, "transport_protocol") === "") {
      out.push({
        path: `filter_chains[${i}].filter_chain_match.transport_protocol`,
        rule: `filter chain should have transport protocol set for port ${port}`,
      });
    }
  });

  // Istio: the inbound listener's chains each match, and on a transport protocol (but the 15006 blocker).
  if (
    options.istioSidecar &&
    num(socket, "port_value") === 15006 &&
    listener.traffic_direction === "INBOUND"
  ) {
    chains.forEach((chain, i) => {
      const match = obj(chain, "filter_chain_match");
      if (!match)
        out.push({
          path: `filter_chains[${i}].filter_chain_match`,
          rule: "inbound filter chain without a match",
        });
      else if (
        str(match, "transport_protocol") === "" &&
        wrapped<number>(match, "destination_port", 0) !== 15006
      ) {
        out.push({
          path: `filter_chains[${i}].filter_chain_match.transport_protocol`,
          rule: "inbound filter chain had no transport protocol set",
        });
      }
    });
  }
  return out;
}

// ---------------------------------------------------------------------------
// Clusters.

/**
 * The checks of one cluster: Istio's (not both transport_socket and
 * transport_socket_matches) and Envoy's cluster factory rules for
 * ORIGINAL_DST, LOGICAL_DNS and ring hash.
 */
export function clusterViolations(cluster: Decoded): Violation[] {
  const out: Violation[] = [];
  if (obj(cluster, "transport_socket") && list(cluster, "transport_socket_matches").length > 0) {
    out.push({
      path: "transport_socket_matches",
      rule: "both transport_socket and transport_socket_matches set",
    });
  }
  const type = String(cluster.type ?? "STATIC");
  const lbPolicy = String(cluster.lb_policy ?? "ROUND_ROBIN");
  const hasType = cluster.type !== undefined || !obj(cluster, "cluster_type");
  if (hasType && type === "ORIGINAL_DST" && lbPolicy !== "CLUSTER_PROVIDED") {
    out.push({
      path: "lb_policy",
      rule: `LB policy ${lbPolicy} is not valid for Cluster type ORIGINAL_DST. Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'`,
    });
  }
  if (hasType && type !== "ORIGINAL_DST" && lbPolicy === "CLUSTER_PROVIDED") {
    out.push({
      path: "lb_policy",
      rule: `LB policy CLUSTER_PROVIDED is not valid for Cluster type ${type}. 'CLUSTER_PROVIDED' is allowed only with cluster type 'ORIGINAL_DST'`,
    });
  }
  if (hasType && type === "ORIGINAL_DST" && list(obj(cluster, "load_assignment"), "endpoints").length > 0) {
    out.push({
      path: "load_assignment",
      rule: "ORIGINAL_DST clusters must have no load assignment configured",
    });
  }
  if (hasType && type === "LOGICAL_DNS") {
    const localities = list(obj(cluster, "load_assignment"), "endpoints");
    if (localities.length !== 1 || list(localities[0], "lb_endpoints").length !== 1) {
      out.push({
        path: "load_assignment.endpoints",
        rule: "LOGICAL_DNS clusters must have a single locality_lb_endpoint and a single lb_endpoint",
      });
    }
  }
  const ring = obj(cluster, "ring_hash_lb_config");
  const min = wrapped<number>(ring, "minimum_ring_size", 0);
  const max = wrapped<number>(ring, "maximum_ring_size", 0);
  if (min !== undefined && max !== undefined && min > max) {
    out.push({
      path: "ring_hash_lb_config",
      rule: `minimum_ring_size (${min}) > maximum_ring_size (${max})`,
    });
  }
  return out;
}
