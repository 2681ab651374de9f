import {
  type AuthorizationPolicy,
  AuthorizationPolicy_Action,
  type Condition,
  type Operation,
  type Source,
} from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import type { PeerAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/peer_authentication";
import type { RequestAuthentication } from "@sextant/proto/gen/istio/security/v1beta1/request_authentication";
import type { PolicyTargetReference, WorkloadSelector } from "@sextant/proto/gen/istio/type/v1beta1/selector";
import { at, type Issues, key } from "../issues.js";
import { checkLabels, cidrProblem, isHeaderName } from "./common.js";
import type { RuleContext } from "./context.js";

/** selector vs targetRef(s), as Istio checks every policy kind (Telemetry shares it). */
export function checkSelector(
  issues: Issues,
  path: string,
  selector: WorkloadSelector | undefined,
  targetRef: PolicyTargetReference | undefined,
  targetRefs: PolicyTargetReference[],
): void {
  if (selector) checkLabels(issues, `${path}.selector.matchLabels`, selector.matchLabels);
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
    if (!ref.kind) issues.error(`${p}.kind`, "kind is required");
    if (!ref.name) issues.error(`${p}.name`, "name is required");
  }
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
  for (const port of ports) {
    const n = Number(port);
    if (!(n >= 1 && n <= 65535))
      issues.error(key(`${path}.portLevelMtls`, port), `port ${port} must be between 1 and 65535`);
  }
}

/** Istio's RequestAuthentication rules. */
export function validateRequestAuthentication(ra: RequestAuthentication, ctx: RuleContext): void {
  const { issues, path } = ctx;
  checkSelector(issues, path, ra.selector, ra.targetRef, ra.targetRefs);
  const issuers = new Set<string>();
  ra.jwtRules.forEach((rule, i) => {
    const p = at(`${path}.jwtRules`, i);
    if (!rule.issuer) issues.error(`${p}.issuer`, "issuer is required");
    else if (issuers.has(rule.issuer)) issues.error(`${p}.issuer`, `duplicate issuer "${rule.issuer}"`);
    issuers.add(rule.issuer);
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
    rule.audiences.forEach((aud, j) => {
      if (!aud) issues.error(at(`${p}.audiences`, j), "audience must not be empty");
    });
    rule.fromHeaders.forEach((h, j) => {
      if (!h.name) issues.error(`${at(`${p}.fromHeaders`, j)}.name`, "header name is required");
    });
    rule.outputClaimToHeaders.forEach((c, j) => {
      const cp = at(`${p}.outputClaimToHeaders`, j);
      if (!c.header || !isHeaderName(c.header))
        issues.error(`${cp}.header`, `"${c.header}" is not a valid header name`);
      if (!c.claim) issues.error(`${cp}.claim`, "claim is required");
    });
  });
}

/** Attribute names accepted as `when` keys; `[...]` keys take a name in brackets. */
const CONDITION_KEYS = new Set([
  "source.ip",
  "remote.ip",
  "source.namespace",
  "source.principal",
  "source.serviceAccount",
  "request.auth.principal",
  "request.auth.audiences",
  "request.auth.presenter",
  "destination.ip",
  "destination.port",
  "connection.sni",
]);
const BRACKETED_CONDITION_KEYS = ["request.headers[", "request.auth.claims[", "experimental.envoy.filters."];

function conditionKeyProblem(k: string): string | undefined {
  if (CONDITION_KEYS.has(k)) return undefined;
  for (const prefix of BRACKETED_CONDITION_KEYS) {
    if (!k.startsWith(prefix)) continue;
    if (prefix.endsWith(".")) return undefined;
    if (!k.endsWith("]") || k.length <= prefix.length + 1)
      return `key "${k}" needs a name in brackets, e.g. ${prefix}x-id]`;
    return undefined;
  }
  return `unknown attribute "${k}" in when.key`;
}

function checkCondition(issues: Issues, p: string, c: Condition): void {
  if (!c.key) {
    issues.error(`${p}.key`, "key is required");
    return;
  }
  const problem = conditionKeyProblem(c.key);
  if (problem) issues.error(`${p}.key`, problem);
  if (c.values.length === 0 && c.notValues.length === 0) {
    issues.error(p, `at least one of values or notValues is required for key "${c.key}"`);
  }
  const checkValues = (field: "values" | "notValues") => {
    c[field].forEach((v, i) => {
      const vp = at(`${p}.${field}`, i);
      if (c.key === "source.ip" || c.key === "remote.ip" || c.key === "destination.ip") {
        const cidr = cidrProblem(v);
        if (cidr) issues.error(vp, cidr);
      } else if (c.key === "destination.port") {
        const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
        if (!(n >= 1 && n <= 65535)) issues.error(vp, `"${v}" is not a port number`);
      }
    });
  };
  checkValues("values");
  checkValues("notValues");
}

function checkNonEmpty(issues: Issues, p: string, values: string[]): void {
  values.forEach((v, i) => {
    if (v === "") issues.error(at(p, i), "empty values are not allowed");
  });
}

function checkSource(issues: Issues, p: string, s: Source): void {
  const lists = Object.entries(s) as Array<[keyof Source, string[]]>;
  if (lists.every(([, v]) => v.length === 0)) issues.error(p, "source must set at least one field");
  for (const [field, values] of lists) {
    checkNonEmpty(issues, `${p}.${field}`, values);
    if (/[iI]pBlocks$/.test(field)) {
      values.forEach((v, i) => {
        const problem = v === "" ? undefined : cidrProblem(v);
        if (problem) issues.error(at(`${p}.${field}`, i), problem);
      });
    }
  }
}

function checkOperation(issues: Issues, p: string, o: Operation): void {
  const lists = Object.entries(o) as Array<[keyof Operation, string[]]>;
  if (lists.every(([, v]) => v.length === 0)) issues.error(p, "operation must set at least one field");
  for (const [field, values] of lists) {
    checkNonEmpty(issues, `${p}.${field}`, values);
    if (field === "ports" || field === "notPorts") {
      values.forEach((v, i) => {
        const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
        if (v !== "" && !(n >= 1 && n <= 65535))
          issues.error(at(`${p}.${field}`, i), `"${v}" is not a port number`);
      });
    }
  }
}

/** Istio's AuthorizationPolicy rules. */
export function validateAuthorizationPolicy(ap: AuthorizationPolicy, ctx: RuleContext): void {
  const { issues, path } = ctx;
  const A = AuthorizationPolicy_Action;
  checkSelector(issues, path, ap.selector, ap.targetRef, ap.targetRefs);
  if (ap.action === A.CUSTOM) {
    if (!ap.provider) issues.error(`${path}.provider`, "action CUSTOM needs a provider");
    else if (!ap.provider.name) issues.error(`${path}.provider.name`, "provider name is required");
  } else if (ap.provider) {
    issues.error(`${path}.provider`, "provider is only allowed with action CUSTOM");
  }
  if (ap.rules.length === 0 && ap.action !== A.ALLOW) {
    issues.warn(`${path}.rules`, `a ${A[ap.action]} policy without rules never matches and has no effect`);
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
  });
}
