import {
  type AuthorizationPolicy,
  AuthorizationPolicy_Action,
  type Condition,
  type Operation,
  type Rule,
  type Source,
} from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import type { PeerAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/peer_authentication";
import type { RequestAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/request_authentication";
import type { PolicyTargetReference, WorkloadSelector } from "@sextant/proto/gen/istio/type/v1beta1/selector";
import { at, type Issues, key } from "../issues.js";
import { checkDuration, checkSelectorLabels, cidrProblem } from "./common.js";
import type { RuleContext } from "./context.js";
import { checkSpaceDelimitedClaims } from "./new-fields.js";

/** The kinds a policy's targetRef may name, by group (`""` is the core group). */
const TARGET_KINDS: ReadonlyArray<{ group: string; kind: string }> = [
  { group: "", kind: "Service" },
  { group: "networking.istio.io", kind: "ServiceEntry" },
  { group: "gateway.networking.k8s.io", kind: "Gateway" },
  { group: "gateway.networking.k8s.io", kind: "GatewayClass" },
];

/**
 * A policy picks its workloads by one of selector, targetRef or targetRefs.
 * Each reference names a Service, ServiceEntry, Gateway or GatewayClass (the
 * group is checked with the kind; an empty group is the core group) in the
 * policy's own namespace: Istio refuses cross-namespace references.
 */
export function checkSelector(
  issues: Issues,
  path: string,
  selector: WorkloadSelector | undefined,
  targetRef: PolicyTargetReference | undefined,
  targetRefs: PolicyTargetReference[],
): void {
  if (selector) checkSelectorLabels(issues, `${path}.selector.matchLabels`, selector.matchLabels);
  if (targetRef && targetRefs.length > 0)
    issues.error(`${path}.targetRefs`, "targetRef and targetRefs cannot both be set");
  if (selector && (targetRef || targetRefs.length > 0)) {
    issues.error(`${path}.selector`, "selector cannot be combined with targetRef or targetRefs");
  }
  const refs = targetRef ? [{ ref: targetRef, p: `${path}.targetRef` }] : [];
  targetRefs.forEach((ref, i) => {
    refs.push({ ref, p: at(`${path}.targetRefs`, i) });
  });
  for (const { ref, p } of refs) {
    if (!ref.name) issues.error(`${p}.name`, "targetRef name is required");
    if (ref.namespace)
      issues.error(
        `${p}.namespace`,
        "targetRef namespace must not be set: cross-namespace references are not supported",
      );
    const group = ref.group === "core" ? "" : ref.group;
    if (!TARGET_KINDS.some((t) => t.group === group && t.kind === ref.kind)) {
      const allowed = TARGET_KINDS.map((t) => `${t.group || "core"}/${t.kind}`).join(", ");
      issues.error(`${p}.kind`, `targetRef must name one of ${allowed}, not "${ref.group}/${ref.kind}"`);
    }
  }
}

/** The raw (undecoded) value of a spec field given under its JSON or proto name. */
function rawField(spec: unknown, jsonName: string, protoName: string): unknown {
  if (typeof spec !== "object" || spec === null) return undefined;
  const record = spec as Record<string, unknown>;
  return record[jsonName] ?? record[protoName];
}

/** Istio's PeerAuthentication rules. */
export function validatePeerAuthentication(pa: PeerAuthentication, ctx: RuleContext): void {
  const { issues, path } = ctx;
  checkSelector(issues, path, pa.selector, undefined, []);
  const hasSelector = pa.selector !== undefined && Object.keys(pa.selector.matchLabels).length > 0;
  const ports = Object.keys(pa.portLevelMtls);
  if (ports.length > 0 && !hasSelector) {
    issues.error(`${path}.portLevelMtls`, "portLevelMtls needs a workload selector with matchLabels");
  }
  // The decoded map cannot tell `portLevelMtls: {}` from no field; Istio
  // refuses the former, so look at what was written.
  const raw = rawField(ctx.spec, "portLevelMtls", "port_level_mtls");
  if (ports.length === 0 && typeof raw === "object" && raw !== null) {
    issues.error(`${path}.portLevelMtls`, "portLevelMtls, when given, needs at least one port");
  }
  for (const port of ports) {
    const n = Number(port);
    if (!(n >= 1 && n <= 65535))
      issues.error(key(`${path}.portLevelMtls`, port), `port ${port} must be between 1 and 65535`);
  }
}

// Istio's strict header-name rule for claim-to-header outputs.
const STRICT_HEADER_NAME = /^[-_A-Za-z0-9]+$/;

/** Istio's RequestAuthentication rules. */
export function validateRequestAuthentication(ra: RequestAuthentication, ctx: RuleContext): void {
  const { issues, path } = ctx;
  checkSelector(issues, path, ra.selector, ra.targetRef, ra.targetRefs);
  ra.jwtRules.forEach((rule, i) => {
    const p = at(`${path}.jwtRules`, i);
    // Istio needs an issuer or a JWKS URI, and does not require issuers to
    // be unique across rules.
    if (!rule.issuer && !rule.jwksUri) issues.error(`${p}.issuer`, "issuer or jwksUri is required");
    if (rule.jwksUri) {
      let valid = false;
      try {
        const url = new URL(rule.jwksUri);
        valid = url.protocol === "http:" || url.protocol === "https:";
      } catch {
        valid = false;
      }
      if (!valid) issues.error(`${p}.jwksUri`, `"${rule.jwksUri}" is not an http(s) URL`);
    }
    if (rule.jwks && !isJsonObject(rule.jwks))
      issues.error(`${p}.jwks`, "jwks must be a JSON Web Key or key set");
    rule.audiences.forEach((aud, j) => {
      if (!aud) issues.error(at(`${p}.audiences`, j), "audience must not be empty");
    });
    rule.fromHeaders.forEach((h, j) => {
      if (!h.name) issues.error(`${at(`${p}.fromHeaders`, j)}.name`, "header name is required");
    });
    rule.fromParams.forEach((param, j) => {
      if (!param) issues.error(at(`${p}.fromParams`, j), "query parameter name must not be empty");
    });
    rule.fromCookies.forEach((cookie, j) => {
      if (!cookie) issues.error(at(`${p}.fromCookies`, j), "cookie name must not be empty");
    });
    rule.outputClaimToHeaders.forEach((c, j) => {
      const cp = at(`${p}.outputClaimToHeaders`, j);
      if (!c.header || !STRICT_HEADER_NAME.test(c.header))
        issues.error(
          `${cp}.header`,
          `"${c.header}" is not a valid header name (letters, digits, "-" and "_")`,
        );
      if (!c.claim) issues.error(`${cp}.claim`, "claim is required");
    });
    checkSpaceDelimitedClaims(issues, p, rule);
    checkDuration(issues, `${p}.timeout`, rule.timeout);
  });
}

function isJsonObject(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/** Attribute names accepted as `when` keys as they are. */
const CONDITION_KEYS = new Set([
  "source.ip",
  "remote.ip",
  "source.namespace",
  "source.principal",
  "source.serviceAccount",
  "source.trustDomain",
  "request.auth.principal",
  "request.auth.audiences",
  "request.auth.presenter",
  "destination.ip",
  "destination.port",
  "connection.sni",
]);
/** Attribute prefixes whose keys take a name in brackets, `prefix[name]`. */
const MAP_CONDITION_KEYS = ["request.headers", "request.auth.claims", "experimental.envoy.filters."];

function conditionKeyProblem(k: string): string | undefined {
  if (CONDITION_KEYS.has(k)) return undefined;
  if (MAP_CONDITION_KEYS.some((prefix) => k.startsWith(prefix))) {
    const open = k.indexOf("[");
    if (k.endsWith("]") && open > 0 && open < k.length - 2) return undefined;
    return `key "${k}" needs a name in brackets, e.g. request.headers[x-id]`;
  }
  if (k === "destination.namespace") return `"${k}" is replaced by the policy's metadata.namespace`;
  if (k.startsWith("destination.labels")) return `"${k}" is replaced by the workload selector`;
  if (k === "destination.name" || k === "destination.user") return `"${k}" was only supported in v1alpha1`;
  return `unknown attribute "${k}" in when.key`;
}

/** Why a port value is not one Istio accepts (0 to 65535), or undefined. */
function portValueProblem(v: string): string | undefined {
  return /^\d+$/.test(v) && Number(v) <= 65535 ? undefined : `"${v}" is not a port number (0-65535)`;
}

/** Why a service account entry is invalid (`sa` or `namespace/sa`), or undefined. */
function serviceAccountProblem(v: string): string | undefined {
  if (v === "") return "empty values are not allowed";
  if (v.includes("*")) return `wildcards are not allowed in service accounts ("${v}")`;
  if (v.length > 320) return `service account "${v}" is longer than 320 characters`;
  const parts = v.split("/");
  if (parts.length > 2 || parts.some((part) => part === ""))
    return `"${v}" must be "serviceAccount" or "namespace/serviceAccount"`;
  return undefined;
}

/** Why a trust domain value is invalid, or undefined: non-empty, one `*` at most, at an end, no `/`. */
function trustDomainProblem(v: string): string | undefined {
  if (v === "") return "empty values are not allowed";
  const stars = v.split("*").length - 1;
  if (stars > 1) return `at most one wildcard is allowed ("${v}")`;
  if (stars === 1 && v !== "*" && !v.startsWith("*") && !v.endsWith("*"))
    return `a wildcard is only allowed at the start or end ("${v}")`;
  if (v.includes("/")) return `a trust domain must not contain "/" ("${v}")`;
  return undefined;
}

/** Checks list items with `problem`, reporting each at its index. */
function checkEach(
  issues: Issues,
  p: string,
  values: string[],
  problem: (v: string) => string | undefined,
): void {
  values.forEach((v, i) => {
    const found = problem(v);
    if (found) issues.error(at(p, i), found);
  });
}

const nonEmpty = (v: string): string | undefined => (v === "" ? "empty values are not allowed" : undefined);
const ipOrCidr = (v: string): string | undefined => (v === "" ? nonEmpty(v) : cidrProblem(v));

function checkCondition(issues: Issues, p: string, c: Condition): void {
  if (!c.key) {
    issues.error(`${p}.key`, "key is required");
    return;
  }
  if (c.values.length === 0 && c.notValues.length === 0) {
    issues.error(p, `at least one of values or notValues is required for key "${c.key}"`);
    return;
  }
  const problem = conditionKeyProblem(c.key);
  if (problem) {
    issues.error(`${p}.key`, problem);
    return;
  }
  const valueProblem =
    c.key === "source.ip" || c.key === "remote.ip" || c.key === "destination.ip"
      ? ipOrCidr
      : c.key === "destination.port"
        ? (v: string) => nonEmpty(v) ?? portValueProblem(v)
        : c.key === "source.serviceAccount"
          ? serviceAccountProblem
          : c.key === "source.trustDomain"
            ? trustDomainProblem
            : nonEmpty;
  checkEach(issues, `${p}.values`, c.values, valueProblem);
  checkEach(issues, `${p}.notValues`, c.notValues, valueProblem);
}

/** Each list field of a Source and the check its values get. */
const SOURCE_CHECKS: Record<string, (v: string) => string | undefined> = {
  ipBlocks: ipOrCidr,
  notIpBlocks: ipOrCidr,
  remoteIpBlocks: ipOrCidr,
  notRemoteIpBlocks: ipOrCidr,
  serviceAccounts: serviceAccountProblem,
  notServiceAccounts: serviceAccountProblem,
  trustDomains: trustDomainProblem,
  notTrustDomains: trustDomainProblem,
};

const SERVICE_ACCOUNT_FIELDS = ["serviceAccounts", "notServiceAccounts"];
const IDENTITY_FIELDS = ["principals", "notPrincipals", "namespaces", "notNamespaces"];

function checkSource(issues: Issues, p: string, s: Source): void {
  const lists = Object.entries(s) as Array<[string, string[]]>;
  if (lists.every(([, v]) => v.length === 0)) issues.error(p, "source must set at least one field");
  for (const [field, values] of lists)
    checkEach(issues, `${p}.${field}`, values, SOURCE_CHECKS[field] ?? nonEmpty);
  const set = (fields: string[]) => lists.some(([field, v]) => fields.includes(field) && v.length > 0);
  if (set(SERVICE_ACCOUNT_FIELDS) && set(IDENTITY_FIELDS)) {
    issues.error(`${p}.serviceAccounts`, "serviceAccounts cannot be combined with principals or namespaces");
  }
  if (s.serviceAccounts.length > 16)
    issues.error(`${p}.serviceAccounts`, "at most 16 service accounts are allowed");
  if (s.notServiceAccounts.length > 16)
    issues.error(`${p}.notServiceAccounts`, "at most 16 service accounts are allowed");
}

/**
 * Why a path is not one Istio's path templates accept, or undefined: `{*}`
 * matches one segment and `{**}` the rest, so `{**}` must come last, no
 * other braces are allowed, and a templated path's literal segments are
 * URI path characters.
 */
function pathTemplateProblem(path: string): string | undefined {
  if (path === "") return "empty values are not allowed";
  const templated = path.includes("{*}") || path.includes("{**}");
  let sawMatchAny = false;
  for (const segment of path.replace(/^\/+|\/+$/g, "").split("/")) {
    if (segment === "{*}" || segment === "{**}") {
      if (sawMatchAny) return `path "${path}": {**} must be the last segment`;
      sawMatchAny = segment === "{**}";
      continue;
    }
    if (/[{}]/.test(segment)) return `path "${path}" has "{" or "}" outside a {*} or {**} segment`;
    if (templated && !/^[a-zA-Z0-9\-._~%!$&'()+,;:@=]+$/.test(segment))
      return `path "${path}" has an invalid literal segment "${segment}"`;
  }
  return undefined;
}

function checkOperation(issues: Issues, p: string, o: Operation): void {
  const lists = Object.entries(o) as Array<[keyof Operation, string[]]>;
  if (lists.every(([, v]) => v.length === 0)) issues.error(p, "operation must set at least one field");
  for (const [field, values] of lists) {
    const problem =
      field === "ports" || field === "notPorts"
        ? (v: string) => nonEmpty(v) ?? portValueProblem(v)
        : field === "paths" || field === "notPaths"
          ? pathTemplateProblem
          : nonEmpty;
    checkEach(issues, `${p}.${field}`, values, problem);
  }
}

/** Source fields and `when` keys an external (CUSTOM) authorizer cannot be given. */
const CUSTOM_UNSUPPORTED_SOURCE = [
  "namespaces",
  "notNamespaces",
  "serviceAccounts",
  "notServiceAccounts",
  "trustDomains",
  "notTrustDomains",
  "principals",
  "notPrincipals",
  "requestPrincipals",
  "notRequestPrincipals",
];
const CUSTOM_UNSUPPORTED_KEYS = [
  "source.namespace",
  "source.serviceAccount",
  "source.trustDomain",
  "source.principal",
];

function checkCustomRule(issues: Issues, p: string, rule: Rule): void {
  rule.from.forEach((from, j) => {
    const source = from.source as unknown as Record<string, string[]> | undefined;
    for (const field of CUSTOM_UNSUPPORTED_SOURCE) {
      if (source?.[field]?.length)
        issues.error(`${at(`${p}.from`, j)}.source.${field}`, `${field} is not supported with action CUSTOM`);
    }
  });
  rule.when.forEach((c, j) => {
    if (CUSTOM_UNSUPPORTED_KEYS.includes(c.key) || c.key.startsWith("request.auth."))
      issues.error(`${at(`${p}.when`, j)}.key`, `"${c.key}" is not supported with action CUSTOM`);
  });
}

/** Source fields a proxy can match on a plain TCP connection. */
const TCP_SOURCE_FIELDS = [
  "principals",
  "notPrincipals",
  "namespaces",
  "notNamespaces",
  "ipBlocks",
  "notIpBlocks",
  "remoteIpBlocks",
  "notRemoteIpBlocks",
  "serviceAccounts",
  "notServiceAccounts",
] as const;

/**
 * Whether a DENY rule matches on HTTP attributes only: on a TCP port such a
 * rule cannot be evaluated, so Istio's proxies deny all TCP traffic in its
 * scope. Ports and the identity fields are TCP attributes.
 */
function deniesAllTcp(rule: Rule): boolean {
  const sources = rule.from.map((f) => f.source).filter((s) => s !== undefined);
  const operations = rule.to.map((t) => t.operation).filter((o) => o !== undefined);
  const tcpInFrom = sources.some((s) => TCP_SOURCE_FIELDS.some((field) => s[field].length > 0));
  const tcpInTo = operations.some((o) => o.ports.length > 0 || o.notPorts.length > 0);
  return (sources.length > 0 && operations.length === 0 && !tcpInFrom) || (operations.length > 0 && !tcpInTo);
}

/** Istio's AuthorizationPolicy rules. */
export function validateAuthorizationPolicy(ap: AuthorizationPolicy, ctx: RuleContext): void {
  const { issues, path } = ctx;
  const A = AuthorizationPolicy_Action;
  checkSelector(issues, path, ap.selector, ap.targetRef, ap.targetRefs);
  if (ap.action === A.CUSTOM) {
    if (ap.rules.length === 0) {
      issues.error(
        `${path}.rules`,
        "a CUSTOM policy without rules never triggers; add an empty rule {} to send every request to the provider",
      );
    } else if (!ap.provider?.name) {
      issues.error(`${path}.provider.name`, "action CUSTOM needs a provider name");
    }
    ap.rules.forEach((rule, i) => {
      checkCustomRule(issues, at(`${path}.rules`, i), rule);
    });
  } else if (ap.provider) {
    issues.error(`${path}.provider`, "provider is only allowed with action CUSTOM");
  }
  if (ap.action === A.DENY && ap.rules.length === 0) {
    issues.error(
      `${path}.rules`,
      "a DENY policy without rules never triggers; add an empty rule {} to deny every request",
    );
  }
  ap.rules.forEach((rule, i) => {
    const p = at(`${path}.rules`, i);
    rule.from.forEach((from, j) => {
      const fp = `${at(`${p}.from`, j)}.source`;
      if (!from.source) issues.error(fp, "source is required in a from entry");
      else checkSource(issues, fp, from.source);
    });
    rule.to.forEach((to, j) => {
      const tp = `${at(`${p}.to`, j)}.operation`;
      if (!to.operation) issues.error(tp, "operation is required in a to entry");
      else checkOperation(issues, tp, to.operation);
    });
    rule.when.forEach((c, j) => {
      checkCondition(issues, at(`${p}.when`, j), c);
    });
    if (ap.action === A.DENY && deniesAllTcp(rule)) {
      issues.warn(
        p,
        "this DENY rule uses only HTTP attributes, so it denies all traffic to TCP ports in its scope; name the ports explicitly",
      );
    }
  });
}
