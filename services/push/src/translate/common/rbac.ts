import { isIP } from "node:net";
import type { CidrRange } from "@sextant/proto/gen/envoy/config/core/v3/address";
import {
  type Permission,
  type Policy,
  type Principal,
  RBAC_Action,
  RBAC as RbacRules,
} from "@sextant/proto/gen/envoy/config/rbac/v3/rbac";
import type { HeaderMatcher } from "@sextant/proto/gen/envoy/config/route/v3/route_components";
import type { StringMatcher } from "@sextant/proto/gen/envoy/type/matcher/v3/string";
import type { AuthorizationPolicy, Rule } from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import type { TypedConfig } from "../../model/types.js";

/** The name of the ALLOW RBAC filter (istiod's grpcgen RBACHTTPFilterName). */
export const RBAC_FILTER_NAME = "envoy.filters.http.rbac";
/** The name of the DENY RBAC filter, which runs first (istiod's grpcgen RBACHTTPFilterNameDeny). */
export const RBAC_DENY_FILTER_NAME = "envoy.filters.http.rbac.DENY";

const SPIFFE_PREFIX = "spiffe://";

/** A value gRPC cannot evaluate (a JWT claim, a path template, a bad CIDR): handled like Istio's generator errors. */
class Unsupported {
  constructor(readonly reason: string) {}
}

type Generated<T> = T | Unsupported;

/**
 * The RBAC rules of one action for a workload, as istiod's grpcgen buildRBAC
 * builds them: one policy per rule of each AuthorizationPolicy, named
 * `<namespace>-<name>-<index>`, each the output of Istio's authz model
 * (principals from `from` and the principal-side `when` conditions,
 * permissions from `to` and the permission-side ones; values ORed, keys
 * ANDed, `not*` values negated).
 *
 * What gRPC cannot evaluate (request principals and other JWT attributes,
 * SNI, Envoy metadata, path templates, invalid addresses) is handled as
 * Istio handles a generator error: it makes an ALLOW rule match nothing,
 * and is dropped from a DENY rule, which then denies more. A rule with an
 * attribute Istio does not know is skipped, as istiod skips it.
 */
export function buildRbac(
  action: "ALLOW" | "DENY" | "AUDIT",
  policies: readonly TypedConfig<AuthorizationPolicy>[],
  options: RbacOptions = {},
): RbacRules {
  const rbacAction =
    action === "ALLOW" ? RBAC_Action.ALLOW : action === "DENY" ? RBAC_Action.DENY : RBAC_Action.LOG;
  const nameOf = options.policyName ?? ((namespace, name, index) => `${namespace}-${name}-${index}`);
  const rules: Record<string, Policy> = {};
  for (const policy of policies) {
    policy.spec.rules.forEach((rule, index) => {
      // AUDIT rules are built like DENY rules: a rule that cannot be built logs more, never less.
      const generated = generatePolicy(
        rule,
        policy.ref.namespace,
        action === "ALLOW" ? "ALLOW" : "DENY",
        options,
      );
      if (generated === undefined) return;
      rules[nameOf(policy.ref.namespace, policy.ref.name, index)] = generated;
    });
  }
  return RbacRules.fromPartial({ action: rbacAction, policies: rules });
}

/** How {@link buildRbac} differs between generator families. */
export interface RbacOptions {
  /** The name of the RBAC policy of one rule; gRPC's `<namespace>-<name>-<index>` if not given. */
  readonly policyName?: (namespace: string, name: string, index: number) => string;
  /**
   * For a network (TCP) RBAC filter: HTTP-only attributes (paths, methods,
   * hosts, request headers, JWT claims) cannot be evaluated, and are handled
   * as Istio's TCP generator handles them (an ALLOW rule with one matches
   * nothing, a DENY rule drops it and denies more).
   */
  readonly tcp?: boolean;
  /** Why an attribute cannot be evaluated by this kind of proxy, if it cannot; gRPC's reasons if not given. */
  readonly unsupported?: (attribute: string) => string | undefined;
}

interface RuleEntry<T> {
  values: readonly string[];
  notValues: readonly string[];
  generate: (value: string) => Generated<T>;
}

/** Istio's authz model.New + Generate for one rule; undefined when Istio would skip the rule. */
function generatePolicy(
  rule: Rule,
  policyNamespace: string,
  action: "ALLOW" | "DENY",
  options: RbacOptions,
): Policy | undefined {
  // Envoy sidecars evaluate JWT claims, SNI and filter metadata; only the TCP filter lacks HTTP attributes.
  const envoy = options.policyName !== undefined;
  // The TCP filter sees no HTTP request: what needs one is unsupported there.
  const http = <T>(attribute: string, generate: (value: string) => Generated<T>) =>
    options.tcp
      ? () => new Unsupported(`${attribute}: an HTTP attribute, not available to a TCP filter`)
      : generate;
  const basePrincipals: RuleEntry<Principal>[] = [];
  const basePermissions: RuleEntry<Permission>[] = [];
  for (const condition of rule.when) {
    const entry = { values: condition.values, notValues: condition.notValues };
    const key = condition.key;
    const permission = permissionForCondition(key, envoy);
    const principalOf = principalForCondition(key, policyNamespace, envoy);
    const principal = principalOf && (key.startsWith("request.") ? http(key, principalOf) : principalOf);
    if (permission) basePermissions.push({ ...entry, generate: permission });
    else if (principal) basePrincipals.push({ ...entry, generate: principal });
    else return undefined;
  }

  const principalLists: RuleEntry<Principal>[][] = [];
  for (const { source } of rule.from) {
    const list = [...basePrincipals];
    if (source) {
      // Istio inserts each at the front in this order, so the last inserted comes first.
      const front: Array<[readonly string[], readonly string[], (value: string) => Generated<Principal>]> = [
        [source.ipBlocks, source.notIpBlocks, (v) => cidrPrincipal(v, "directRemoteIp")],
        [source.remoteIpBlocks, source.notRemoteIpBlocks, (v) => cidrPrincipal(v, "remoteIp")],
        [source.namespaces, source.notNamespaces, namespacePrincipal],
        [source.trustDomains, source.notTrustDomains, trustDomainPrincipal],
        [
          source.serviceAccounts,
          source.notServiceAccounts,
          (v) => serviceAccountPrincipal(policyNamespace, v),
        ],
        [
          source.requestPrincipals,
          source.notRequestPrincipals,
          envoy ? http("requestPrincipals", requestPrincipal) : () => jwtOnly("requestPrincipals"),
        ],
        [source.principals, source.notPrincipals, sourcePrincipal],
      ];
      for (const [values, notValues, generate] of front)
        if (values.length + notValues.length > 0) list.unshift({ values, notValues, generate });
    }
    principalLists.push(list);
  }
  if (rule.from.length === 0) principalLists.push(basePrincipals);

  const permissionLists: RuleEntry<Permission>[][] = [];
  for (const { operation } of rule.to) {
    const list = [...basePermissions];
    if (operation) {
      const front: Array<[readonly string[], readonly string[], (value: string) => Generated<Permission>]> = [
        [operation.ports, operation.notPorts, portPermission],
        [operation.paths, operation.notPaths, http("paths", pathPermission)],
        [
          operation.methods,
          operation.notMethods,
          http("methods", (v) => ({ header: headerMatcher(":method", v, false, envoy) }) as Permission),
        ],
        [
          operation.hosts,
          operation.notHosts,
          http("hosts", (v) => ({ header: headerMatcher(":authority", v, true, envoy) }) as Permission),
        ],
      ];
      for (const [values, notValues, generate] of front)
        if (values.length + notValues.length > 0) list.unshift({ values, notValues, generate });
    }
    permissionLists.push(list);
  }
  if (rule.to.length === 0) permissionLists.push(basePermissions);

  const permissions: Permission[] = [];
  for (const list of permissionLists) {
    const and = combine(
      list,
      action,
      (rules) => ({ orRules: { rules } }),
      (rule) => ({ notRule: rule }),
    );
    // Istio's sidecar builder leaves such a rule out, which for ALLOW is the same as a policy that
    // matches nothing; gRPC keeps the policy in that form.
    if (and instanceof Unsupported) return envoy ? undefined : matchNothing();
    permissions.push({ andRules: { rules: and.length > 0 ? and : [{ any: true }] } } as Permission);
  }
  const principals: Principal[] = [];
  for (const list of principalLists) {
    const and = combine(
      list,
      action,
      (ids) => ({ orIds: { ids } }),
      (id) => ({ notId: id }),
    );
    if (and instanceof Unsupported) return envoy ? undefined : matchNothing();
    principals.push({ andIds: { ids: and.length > 0 ? and : [{ any: true }] } } as Principal);
  }
  return { permissions, principals } as Policy;
}

/** A policy no request matches, valid under Envoy's rules (which require permissions and principals). */
function matchNothing(): Policy {
  return { permissions: [{ any: true }], principals: [{ notId: { any: true } }] } as Policy;
}

/**
 * The AND-ed items of one list: for each key, the OR of its values and the
 * NOT of the OR of its notValues. An unsupported value fails an ALLOW rule
 * (Istio returns the generator's error) and is left out of a DENY rule.
 */
function combine<T>(
  entries: readonly RuleEntry<T>[],
  action: "ALLOW" | "DENY",
  or: (items: T[]) => T,
  not: (item: T) => T,
): T[] | Unsupported {
  const and: T[] = [];
  for (const entry of entries) {
    for (const [values, negate] of [
      [entry.values, false],
      [entry.notValues, true],
    ] as const) {
      const items: T[] = [];
      for (const value of values) {
        const item = entry.generate(value);
        if (item instanceof Unsupported) {
          if (action === "ALLOW") return item;
          continue;
        }
        items.push(item);
      }
      if (items.length > 0) and.push(negate ? not(or(items)) : or(items));
    }
  }
  return and;
}

/** `when` keys on the permission side, as Istio's model sorts them; undefined for the others. */
function permissionForCondition(
  key: string,
  envoy: boolean,
): ((value: string) => Generated<Permission>) | undefined {
  if (key === "destination.ip") return (v) => cidrPermission(v);
  if (key === "destination.port") return portPermission;
  if (key === "connection.sni")
    return envoy
      ? (v) => ({ requestedServerName: stringMatcherWithPrefix(v, "") }) as Permission
      : () => new Unsupported("connection.sni: gRPC servers see no SNI");
  if (key.startsWith("experimental.envoy.filters."))
    return () => new Unsupported(`${key}: gRPC has no Envoy filter metadata`);
  return undefined;
}

/** `when` keys on the principal side; undefined for a key Istio does not know (the rule is skipped). */
function principalForCondition(
  key: string,
  policyNamespace: string,
  envoy: boolean,
): ((value: string) => Generated<Principal>) | undefined {
  if (envoy && key === "request.auth.principal") return requestPrincipal;
  if (key === "source.ip") return (v) => cidrPrincipal(v, "directRemoteIp");
  if (key === "remote.ip") return (v) => cidrPrincipal(v, "remoteIp");
  if (key === "source.namespace") return namespacePrincipal;
  if (key === "source.trustDomain") return trustDomainPrincipal;
  if (key === "source.principal") return sourcePrincipal;
  if (key === "source.serviceAccount") return (v) => serviceAccountPrincipal(policyNamespace, v);
  const header = /^request\.headers\[(.+)\]$/.exec(key);
  if (header) return (v) => ({ header: headerMatcher(header[1]!, v, false, envoy) }) as Principal;
  if (
    key === "request.auth.principal" ||
    key === "request.auth.audiences" ||
    key === "request.auth.presenter" ||
    key.startsWith("request.auth.claims[")
  )
    return () => jwtOnly(key);
  return undefined;
}

/**
 * Istio's request.auth.principal on Envoy: the `istio_authn` filter metadata
 * the JWT filter writes (`<iss>/<sub>`); without a RequestAuthentication,
 * nothing writes it, and it never matches.
 */
function requestPrincipal(value: string): Principal {
  return {
    metadata: {
      filter: "istio_authn",
      path: [{ key: "request.auth.principal" }],
      value: { stringMatch: stringMatcherWithPrefix(value, "") },
      invert: false,
    },
  } as unknown as Principal;
}

function jwtOnly(attribute: string): Unsupported {
  return new Unsupported(`${attribute}: gRPC servers do not validate JWTs (no RequestAuthentication)`);
}

/** Istio's source.principal: the peer's SPIFFE URI, "spiffe://" prepended, "*" as a prefix or suffix wildcard. */
function sourcePrincipal(value: string): Principal {
  return { authenticated: { principalName: stringMatcherWithPrefix(value, SPIFFE_PREFIX) } } as Principal;
}

/** Istio's source.namespace: a regex on the principal, ".*" + "/ns/<ns>/" + ".*" ("*" in the value becomes ".*"). */
function namespacePrincipal(value: string): Principal {
  return {
    authenticated: {
      principalName: { safeRegex: { regex: `.*/ns/${value.replaceAll("*", ".*")}/.*` }, ignoreCase: false },
    },
  } as Principal;
}

/**
 * Istio's source.trustDomain: the authority of the peer's SPIFFE URI. "*" is
 * any SPIFFE identity; a name without "*" is the prefix `spiffe://<td>/`; one
 * "*" (prefix or suffix wildcard) matches within the authority only ([^/]*).
 */
function trustDomainPrincipal(value: string): Principal {
  let principalName: StringMatcher;
  if (value === "*") principalName = { prefix: SPIFFE_PREFIX, ignoreCase: false } as StringMatcher;
  else if (!value.includes("*"))
    principalName = { prefix: `${SPIFFE_PREFIX}${value}/`, ignoreCase: false } as StringMatcher;
  else {
    const star = value.indexOf("*");
    const pattern = `${escapeRegex(value.slice(0, star))}[^/]*${escapeRegex(value.slice(star + 1))}`;
    principalName = { safeRegex: { regex: `spiffe://${pattern}/.*` }, ignoreCase: false } as StringMatcher;
  }
  return { authenticated: { principalName } } as Principal;
}

/** Istio's source.serviceAccount: `<sa>` (in the policy's namespace) or `<ns>/<sa>`, as a principal regex. */
function serviceAccountPrincipal(policyNamespace: string, value: string): Principal {
  const slash = value.indexOf("/");
  const [namespace, account] =
    slash < 0 ? [policyNamespace, value] : [value.slice(0, slash), value.slice(slash + 1)];
  return {
    authenticated: {
      principalName: {
        safeRegex: { regex: `spiffe://.+/ns/${namespace}/(.+/|)sa/${account}(/.+)?` },
        ignoreCase: false,
      },
    },
  } as Principal;
}

function cidrPrincipal(value: string, field: "directRemoteIp" | "remoteIp"): Generated<Principal> {
  const range = cidrRange(value);
  return range instanceof Unsupported ? range : ({ [field]: range } as Principal);
}

function cidrPermission(value: string): Generated<Permission> {
  const range = cidrRange(value);
  return range instanceof Unsupported ? range : ({ destinationIp: range } as Permission);
}

/** Istio's AddrStrToCidrRange: an address (a /32 or /128) or a CIDR. */
function cidrRange(value: string): Generated<CidrRange> {
  const [address = "", length] = value.split("/");
  const family = isIP(address);
  if (family === 0) return new Unsupported(`invalid IP address ${JSON.stringify(value)}`);
  const max = family === 4 ? 32 : 128;
  const prefixLen = length === undefined ? max : Number(length);
  if (!Number.isInteger(prefixLen) || prefixLen < 0 || prefixLen > max || (length ?? "0") === "")
    return new Unsupported(`invalid CIDR ${JSON.stringify(value)}`);
  return { addressPrefix: address, prefixLen };
}

function portPermission(value: string): Generated<Permission> {
  const port = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!(port >= 0 && port <= 65535)) return new Unsupported(`invalid port ${JSON.stringify(value)}`);
  return { destinationPort: port } as Permission;
}

/** Istio's path matcher: the URL path with "*" as a prefix or suffix wildcard; path templates gRPC cannot run. */
function pathPermission(value: string): Generated<Permission> {
  if (value.includes("{*}") || value.includes("{**}"))
    return new Unsupported(`path template ${JSON.stringify(value)}: gRPC has no uri_template matcher`);
  return { urlPath: { path: stringMatcherWithPrefix(value, "") } } as Permission;
}

/** Istio's StringMatcherWithPrefix: "*" is any non-empty value, "*x" a suffix, "x*" a prefix, else exact. */
function stringMatcherWithPrefix(value: string, prefix: string): StringMatcher {
  if (value === "*") return { safeRegex: { regex: ".+" }, ignoreCase: false } as StringMatcher;
  if (value.startsWith("*")) {
    if (!prefix) return { suffix: value.slice(1), ignoreCase: false } as StringMatcher;
    return {
      safeRegex: { regex: `${escapeRegex(prefix)}.*${escapeRegex(value.slice(1))}` },
    } as StringMatcher;
  }
  if (value.endsWith("*")) return { prefix: prefix + value.slice(0, -1), ignoreCase: false } as StringMatcher;
  return { exact: prefix + value, ignoreCase: false } as StringMatcher;
}

/**
 * Istio's HeaderMatcher ("*": present; "*x": suffix; "x*": prefix; else exact), HostMatcher when ignoreCase.
 * gRPC gets the older header_match_specifier fields, which every gRPC version's RBAC filter parses
 * (C-core 1.51 rejects string_match: see HeaderMatcherForm in routes.ts); they have no ignoreCase, so
 * a caseless match is a `(?i)` RE2 regex there (both C-core and grpc-js-xds use RE2).
 */
function headerMatcher(name: string, value: string, ignoreCase: boolean, envoy: boolean): HeaderMatcher {
  if (value === "*") return { name, presentMatch: true, invertMatch: false } as HeaderMatcher;
  const kind = value.startsWith("*") ? "suffix" : value.endsWith("*") ? "prefix" : "exact";
  const text = kind === "suffix" ? value.slice(1) : kind === "prefix" ? value.slice(0, -1) : value;
  if (!envoy) {
    if (ignoreCase) {
      const regex = `(?i)${kind === "suffix" ? ".*" : ""}${escapeRegex(text)}${kind === "prefix" ? ".*" : ""}`;
      return { name, safeRegexMatch: { regex }, invertMatch: false } as HeaderMatcher;
    }
    const field = { exact: "exactMatch", prefix: "prefixMatch", suffix: "suffixMatch" }[kind];
    return { name, [field]: text, invertMatch: false } as unknown as HeaderMatcher;
  }
  const stringMatch = { [kind]: text, ignoreCase } as StringMatcher;
  return { name, stringMatch, invertMatch: false } as HeaderMatcher;
}

export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
