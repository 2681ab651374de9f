// Istio's rules (pkg/config/validation and the CRD schemas of istio/api
// 1.30.3) for fields the ten kinds gained in recent releases. Each check is
// called from its kind's validator with one line.
import type {
  LoadBalancerSettings,
  TrafficPolicy_RetryBudget,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import {
  type ServerTLSSettings,
  ServerTLSSettings_TLSmode,
} from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import type { JWTRule } from "@sextant/proto/gen/istio/security/v1beta1/request_authentication";
import { at, type Issues } from "../issues.js";
import { checkDuration, checkPercentage } from "./common.js";

/**
 * LoadBalancerSettings.warmup (Istio's validateLoadBalancer: duration
 * required and whole milliseconds of at least 1ms, minimumPercent at most
 * 100, aggression at least 1; the CRD: minimumPercent not negative, and not
 * together with warmupDurationSecs) and the consistent-hash cookie's
 * attributes (each named, no name twice).
 */
export function checkLoadBalancerNewFields(issues: Issues, p: string, lb: LoadBalancerSettings): void {
  const warmup = lb.warmup;
  if (warmup) {
    const wp = `${p}.warmup`;
    if (lb.warmupDurationSecs) issues.error(wp, "only one of warmupDurationSecs or warmup can be set");
    if (!warmup.duration) issues.error(`${wp}.duration`, "warmup duration is required");
    else checkDuration(issues, `${wp}.duration`, warmup.duration);
    checkPercentage(issues, `${wp}.minimumPercent`, warmup.minimumPercent);
    if (warmup.aggression !== undefined && !(warmup.aggression >= 1))
      issues.error(`${wp}.aggression`, "aggression must be at least 1");
  }
  const attributes = lb.consistentHash?.httpCookie?.attributes ?? [];
  const seen = new Set<string>();
  attributes.forEach((attribute, i) => {
    const ap = `${at(`${p}.consistentHash.httpCookie.attributes`, i)}.name`;
    if (!attribute.name) issues.error(ap, "cookie attribute name must not be empty");
    else if (seen.has(attribute.name)) issues.error(ap, `duplicate cookie attribute name ${attribute.name}`);
    seen.add(attribute.name);
  });
}

/** TrafficPolicy.retryBudget: the CRD bounds percent to 0..100. */
export function checkRetryBudget(
  issues: Issues,
  p: string,
  budget: TrafficPolicy_RetryBudget | undefined,
): void {
  if (budget) checkPercentage(issues, `${p}.retryBudget.percent`, budget.percent);
}

/**
 * The server certificate lists (credentialNames, tlsCertificates) under
 * Istio's validateTLSOptions: ISTIO_MUTUAL takes neither; one certificate
 * source only (credentialName, credentialNames, certificate files,
 * tlsCertificates); each listed file pair complete; MUTUAL and
 * OPTIONAL_MUTUAL with files need caCertificates; more than two
 * certificates is a warning (Envoy serves at most one RSA and one ECDSA).
 * The CRD allows one or two entries. True when a list is set: the caller's
 * single-certificate checks then do not apply.
 */
export function checkServerCertificateLists(issues: Issues, p: string, tls: ServerTLSSettings): boolean {
  const M = ServerTLSSettings_TLSmode;
  const names = tls.credentialNames;
  const pairs = tls.tlsCertificates;
  if (names.length === 0 && pairs.length === 0) return false;
  if (names.length > 2) issues.error(`${p}.credentialNames`, "at most 2 credentialNames are allowed");
  if (pairs.length > 2) issues.error(`${p}.tlsCertificates`, "at most 2 tlsCertificates are allowed");
  names.forEach((name, i) => {
    if (!name) issues.error(at(`${p}.credentialNames`, i), "credentialNames must not hold an empty name");
  });
  if (tls.mode === M.ISTIO_MUTUAL) {
    const field = names.length > 0 ? "credentialNames" : "tlsCertificates";
    issues.error(`${p}.${field}`, `ISTIO_MUTUAL uses Istio's certificates: do not set ${field}`);
    return true;
  }
  if (tls.mode === M.PASSTHROUGH || tls.mode === M.AUTO_PASSTHROUGH) {
    issues.warn(p, `${M[tls.mode]} mode does not use certificates, they will be ignored`);
    return true;
  }
  const sources = [
    tls.credentialName !== "",
    names.length > 0,
    tls.serverCertificate !== "" && tls.privateKey !== "",
    pairs.length > 0,
  ].filter(Boolean).length;
  if (sources > 1) {
    issues.error(
      p,
      "only one of credentialName, credentialNames, serverCertificate/privateKey or tlsCertificates may be set",
    );
  }
  if (names.length > 0) return true;
  const mode = M[tls.mode];
  if (tls.mode !== M.SIMPLE && !tls.caCertificates)
    issues.error(`${p}.caCertificates`, `${mode} needs caCertificates to verify clients`);
  pairs.forEach((pair, i) => {
    const pp = at(`${p}.tlsCertificates`, i);
    if (!pair.serverCertificate)
      issues.error(`${pp}.serverCertificate`, `${mode} needs a server certificate`);
    if (!pair.privateKey) issues.error(`${pp}.privateKey`, `${mode} needs a private key`);
  });
  return true;
}

/** Sidecar ingress TLS: Istio supports neither certificate list there. */
export function checkSidecarIngressCertificateLists(issues: Issues, p: string, tls: ServerTLSSettings): void {
  if (tls.credentialNames.length > 0)
    issues.error(`${p}.credentialNames`, "sidecar: credentialNames is not currently supported");
  if (tls.tlsCertificates.length > 0)
    issues.error(`${p}.tlsCertificates`, "sidecar: tlsCertificates is not currently supported");
}

/** JWTRule.spaceDelimitedClaims: the CRD wants at most 64 names, none empty. */
export function checkSpaceDelimitedClaims(issues: Issues, p: string, rule: JWTRule): void {
  const claims = rule.spaceDelimitedClaims;
  if (claims.length > 64)
    issues.error(`${p}.spaceDelimitedClaims`, "at most 64 spaceDelimitedClaims are allowed");
  claims.forEach((claim, i) => {
    if (!claim) issues.error(at(`${p}.spaceDelimitedClaims`, i), "a claim name must not be empty");
  });
}
