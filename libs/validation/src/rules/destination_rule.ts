import {
  type ClientTLSSettings,
  ClientTLSSettings_TLSmode,
  type ConnectionPoolSettings,
  ConnectionPoolSettings_HTTPSettings_H2UpgradePolicy,
  type DestinationRule,
  type LoadBalancerSettings,
  type LocalityLoadBalancerSetting,
  type OutlierDetection,
  type TrafficPolicy,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import { at, type Issues, key } from "../issues.js";
import {
  checkDuration,
  checkExportTo,
  checkLabels,
  checkPort,
  checkSelectorLabels,
  durationNanos,
  hostProblem,
  isIpAddress,
  isIstioDnsLabel,
  requireString,
} from "./common.js";
import type { RuleContext } from "./context.js";
import { checkLoadBalancerNewFields, checkRetryBudget } from "./new-fields.js";

/** Istio's DestinationRule rules. */
export function validateDestinationRule(dr: DestinationRule, ctx: RuleContext): void {
  const { issues, path } = ctx;
  if (requireString(issues, `${path}.host`, dr.host, "host")) {
    const problem = hostProblem(dr.host);
    if (problem) issues.error(`${path}.host`, problem);
  }
  if (dr.trafficPolicy) checkTrafficPolicy(issues, `${path}.trafficPolicy`, dr.trafficPolicy, true);
  const names = new Set<string>();
  dr.subsets.forEach((subset, i) => {
    const p = at(`${path}.subsets`, i);
    if (!subset.name) issues.error(`${p}.name`, "subset name is required");
    else if (!isIstioDnsLabel(subset.name)) {
      issues.error(`${p}.name`, `subset name "${subset.name}" must be a DNS-1123 label`);
    } else if (names.has(subset.name)) {
      issues.error(`${p}.name`, `duplicate subset name "${subset.name}"`);
    }
    names.add(subset.name);
    checkLabels(issues, `${p}.labels`, subset.labels);
    if (subset.trafficPolicy) checkTrafficPolicy(issues, `${p}.trafficPolicy`, subset.trafficPolicy, true);
  });
  checkExportTo(issues, `${path}.exportTo`, dr.exportTo, ctx.namespace);
  if (dr.workloadSelector) {
    checkSelectorLabels(issues, `${path}.workloadSelector.matchLabels`, dr.workloadSelector.matchLabels);
    if (dr.exportTo.some((e) => e !== "." && e !== ctx.namespace)) {
      issues.error(
        `${path}.exportTo`,
        'a DestinationRule with a workloadSelector can only be exported to "."',
      );
    }
  }
}

function checkTrafficPolicy(issues: Issues, p: string, tp: TrafficPolicy, allowPortLevel: boolean): void {
  if (
    !tp.loadBalancer &&
    !tp.connectionPool &&
    !tp.outlierDetection &&
    !tp.tls &&
    tp.portLevelSettings.length === 0 &&
    !tp.tunnel &&
    !tp.proxyProtocol &&
    !tp.retryBudget
  ) {
    issues.error(p, "trafficPolicy must set at least one field");
  }
  if (tp.tunnel && tp.proxyProtocol)
    issues.error(`${p}.proxyProtocol`, "tunnel and proxyProtocol cannot both be set");
  if (tp.loadBalancer) checkLoadBalancer(issues, `${p}.loadBalancer`, tp.loadBalancer, tp.outlierDetection);
  if (tp.connectionPool) checkConnectionPool(issues, `${p}.connectionPool`, tp.connectionPool);
  if (tp.outlierDetection) checkOutlierDetection(issues, `${p}.outlierDetection`, tp.outlierDetection);
  if (tp.tls) checkClientTls(issues, `${p}.tls`, tp.tls);
  checkRetryBudget(issues, p, tp.retryBudget);
  if (tp.tunnel) {
    const t = tp.tunnel;
    if (t.protocol !== "" && t.protocol !== "CONNECT" && t.protocol !== "POST") {
      issues.error(`${p}.tunnel.protocol`, 'tunnel protocol must be "CONNECT" or "POST"');
    }
    if (
      !isIpAddress(t.targetHost) &&
      (t.targetHost === "" || hostProblem(t.targetHost) || t.targetHost.includes("*"))
    )
      issues.error(
        `${p}.tunnel.targetHost`,
        `tunnel targetHost "${t.targetHost}" must be a DNS name or an IP address`,
      );
    checkPort(issues, `${p}.tunnel.targetPort`, t.targetPort);
  }
  if (!allowPortLevel) return;
  // Istio does not refuse two entries for one port (the first one wins).
  tp.portLevelSettings.forEach((pls, i) => {
    const pp = at(`${p}.portLevelSettings`, i);
    if (!pls.port) {
      issues.error(`${pp}.port`, "port is required in portLevelSettings");
    } else {
      checkPort(issues, `${pp}.port.number`, pls.port.number);
    }
    if (!pls.loadBalancer && !pls.connectionPool && !pls.outlierDetection && !pls.tls) {
      issues.error(pp, "a port traffic policy must set at least one field");
    }
    if (pls.loadBalancer)
      checkLoadBalancer(issues, `${pp}.loadBalancer`, pls.loadBalancer, pls.outlierDetection);
    if (pls.connectionPool) checkConnectionPool(issues, `${pp}.connectionPool`, pls.connectionPool);
    if (pls.outlierDetection) checkOutlierDetection(issues, `${pp}.outlierDetection`, pls.outlierDetection);
    if (pls.tls) checkClientTls(issues, `${pp}.tls`, pls.tls);
  });
}

/** Envoy's primality test for maglev table sizes (it counts 1 as prime, as Envoy does). */
function isPrime(n: number): boolean {
  if (n !== 0 && n < 4) return true;
  if (n % 2 === 0) return false;
  for (let d = 3; d * d <= n; d += 2) if (n % d === 0) return false;
  return true;
}

/** Envoy's largest maglev table is just below this prime. */
const MAGLEV_TABLE_LIMIT = 5000011;

function checkLoadBalancer(
  issues: Issues,
  p: string,
  lb: LoadBalancerSettings,
  outlier: OutlierDetection | undefined,
): void {
  const ch = lb.consistentHash;
  if (ch) {
    // Istio requires no hash key: without one every request hashes alike.
    const cp = `${p}.consistentHash`;
    if (ch.httpCookie) {
      if (!ch.httpCookie.name) issues.error(`${cp}.httpCookie.name`, "cookie name is required");
      // A cookie without ttl is a session cookie (Istio 1.30 accepts it).
      if (ch.httpCookie.ttl && durationNanos(ch.httpCookie.ttl) < 0)
        issues.error(`${cp}.httpCookie.ttl`, "ttl must not be negative");
    }
    if (ch.maglev) {
      const size = ch.maglev.tableSize;
      if (size === 0) issues.error(`${cp}.maglev.tableSize`, "tableSize must be set for maglev");
      else if (size >= MAGLEV_TABLE_LIMIT)
        issues.error(`${cp}.maglev.tableSize`, `tableSize must be less than ${MAGLEV_TABLE_LIMIT}`);
      else if (!isPrime(size))
        issues.error(`${cp}.maglev.tableSize`, `tableSize ${size} must be a prime number`);
    }
    if (ch.minimumRingSize !== 0) {
      issues.warn(
        `${cp}.minimumRingSize`,
        "consistent hash minimumRingSize is deprecated, use the ringHash configuration of consistentHash instead",
      );
      if (ch.maglev || ch.ringHash)
        issues.error(`${cp}.minimumRingSize`, "minimumRingSize cannot be combined with maglev or ringHash");
    }
  }
  if (lb.localityLbSetting) checkLocality(issues, `${p}.localityLbSetting`, lb.localityLbSetting, outlier);
  checkDuration(issues, `${p}.warmupDurationSecs`, lb.warmupDurationSecs);
  checkLoadBalancerNewFields(issues, p, lb);
}

const TOPOLOGY_LABELS = new Set([
  "topology.kubernetes.io/region",
  "topology.kubernetes.io/zone",
  "topology.istio.io/subzone",
]);

function checkLocality(
  issues: Issues,
  p: string,
  loc: LocalityLoadBalancerSetting,
  outlier: OutlierDetection | undefined,
): void {
  if (loc.distribute.length > 0 && loc.failover.length > 0) {
    issues.error(p, "distribute and failover cannot both be set");
    return;
  }
  if (loc.failover.length > 0) {
    const i = loc.failoverPriority.findIndex((l) => TOPOLOGY_LABELS.has(l));
    if (i >= 0)
      issues.error(
        at(`${p}.failoverPriority`, i),
        `failover cannot be combined with the topology label "${loc.failoverPriority[i]}" in failoverPriority`,
      );
  }
  loc.distribute.forEach((d, i) => {
    const dp = at(`${p}.distribute`, i);
    const weights = Object.entries(d.to);
    const outOfRange = weights.find(([, w]) => w < 1 || w > 100);
    if (outOfRange) {
      issues.error(
        key(`${dp}.to`, outOfRange[0]),
        `locality weight ${outOfRange[1]} must be between 1 and 100`,
      );
      return;
    }
    const total = weights.reduce((sum, [, w]) => sum + w, 0);
    if (total !== 100)
      issues.error(`${dp}.to`, `locality weights must add up to 100 (they add up to ${total})`);
    else
      checkLocalities(
        issues,
        `${dp}.to`,
        weights.map(([l]) => l),
      );
  });
  checkLocalities(
    issues,
    `${p}.distribute`,
    loc.distribute.map((d) => d.from),
  );
  if ((loc.failover.length > 0 || loc.failoverPriority.length > 0) && !outlier) {
    issues.warn(p, "failover needs an outlierDetection policy to take effect");
  }
  loc.failover.forEach((f, i) => {
    const fp = at(`${p}.failover`, i);
    if (f.from === f.to) issues.error(fp, "failover from and to must be different regions");
    if (f.from.includes("/") || f.to.includes("/")) issues.error(fp, "failover only names regions (no zone)");
    if (f.from.includes("*") || f.to.includes("*")) issues.error(fp, 'failover regions must not contain "*"');
  });
}

/**
 * Localities of one list (distribute sources, or one entry's targets) as
 * Istio checks them: `region[/zone[/subzone]]`, no empty part, at most one
 * `*` and only at the end, and no two that overlap (`us`, then `us/east`).
 */
function checkLocalities(issues: Issues, path: string, localities: string[]): void {
  const seen: string[][] = [];
  for (const locality of localities) {
    const stars = locality.split("*").length - 1;
    if (stars > 1 || (stars === 1 && !locality.endsWith("*"))) {
      issues.error(path, `locality "${locality}" may hold one "*", only at its end`);
      return;
    }
    const parts = locality.split("/");
    if (parts.length > 3 || parts.some((part) => part === "")) {
      issues.error(path, `locality "${locality}" must be region[/zone[/subzone]] with no empty part`);
      return;
    }
    // A trailing "*" stands for every locality below its parent.
    const scope = parts[parts.length - 1] === "*" ? parts.slice(0, -1) : parts;
    const covers = (a: string[], b: string[]) => a.every((part, i) => b[i] === part);
    if (seen.some((other) => covers(other, scope) || covers(scope, other))) {
      issues.error(path, `locality "${locality}" overlaps one given before`);
      return;
    }
    seen.push(scope);
  }
}

function checkConnectionPool(issues: Issues, p: string, pool: ConnectionPoolSettings): void {
  if (!pool.http && !pool.tcp) issues.error(p, "connectionPool must set http or tcp");
  const nonNegative = (path: string, value: number, what: string) => {
    if (value < 0) issues.error(path, `${what} must not be negative`);
  };
  if (pool.http) {
    const h = pool.http;
    const hp = `${p}.http`;
    nonNegative(`${hp}.http1MaxPendingRequests`, h.http1MaxPendingRequests, "http1MaxPendingRequests");
    nonNegative(`${hp}.http2MaxRequests`, h.http2MaxRequests, "http2MaxRequests");
    nonNegative(`${hp}.maxRequestsPerConnection`, h.maxRequestsPerConnection, "maxRequestsPerConnection");
    nonNegative(`${hp}.maxRetries`, h.maxRetries, "maxRetries");
    nonNegative(`${hp}.maxConcurrentStreams`, h.maxConcurrentStreams, "maxConcurrentStreams");
    checkDuration(issues, `${hp}.idleTimeout`, h.idleTimeout);
    if (
      h.h2UpgradePolicy === ConnectionPoolSettings_HTTPSettings_H2UpgradePolicy.UPGRADE &&
      h.useClientProtocol
    ) {
      issues.error(
        `${hp}.useClientProtocol`,
        "useClientProtocol cannot be true when h2UpgradePolicy is UPGRADE",
      );
    }
  }
  if (pool.tcp) {
    const t = pool.tcp;
    const tp = `${p}.tcp`;
    nonNegative(`${tp}.maxConnections`, t.maxConnections, "maxConnections");
    checkDuration(issues, `${tp}.connectTimeout`, t.connectTimeout);
    checkDuration(issues, `${tp}.maxConnectionDuration`, t.maxConnectionDuration);
    // 0s turns the idle timeout off, as in Istio.
    if (t.idleTimeout && durationNanos(t.idleTimeout) !== 0)
      checkDuration(issues, `${tp}.idleTimeout`, t.idleTimeout);
    if (t.tcpKeepalive) {
      checkDuration(issues, `${tp}.tcpKeepalive.time`, t.tcpKeepalive.time);
      checkDuration(issues, `${tp}.tcpKeepalive.interval`, t.tcpKeepalive.interval);
    }
  }
}

function checkOutlierDetection(issues: Issues, p: string, od: OutlierDetection): void {
  if (od.consecutiveErrors !== 0) {
    issues.warn(
      `${p}.consecutiveErrors`,
      "outlier detection consecutiveErrors is deprecated, use consecutiveGatewayErrors or consecutive5xxErrors instead",
    );
    if (od.consecutiveErrors < 0)
      issues.error(`${p}.consecutiveErrors`, "consecutiveErrors must not be negative");
  }
  checkDuration(issues, `${p}.interval`, od.interval);
  checkDuration(issues, `${p}.baseEjectionTime`, od.baseEjectionTime);
  if (od.maxEjectionPercent < 0 || od.maxEjectionPercent > 100) {
    issues.error(`${p}.maxEjectionPercent`, "maxEjectionPercent must be between 0 and 100");
  }
  if (od.minHealthPercent < 0 || od.minHealthPercent > 100) {
    issues.error(`${p}.minHealthPercent`, "minHealthPercent must be between 0 and 100");
  }
  if ((od.consecutiveLocalOriginFailures ?? 0) > 0 && !od.splitExternalLocalOriginErrors) {
    issues.error(
      `${p}.consecutiveLocalOriginFailures`,
      "consecutiveLocalOriginFailures needs splitExternalLocalOriginErrors: true",
    );
  }
}

/** Istio's rules for client-side TLS settings (DestinationRule, Sidecar egress proxy). */
export function checkClientTls(issues: Issues, p: string, tls: ClientTLSSettings): void {
  const M = ClientTLSSettings_TLSmode;
  // Istio does not refuse certificates beside ISTIO_MUTUAL: they are ignored.
  if (tls.insecureSkipVerify === true) {
    if (
      tls.mode === M.SIMPLE &&
      (tls.caCertificates || tls.credentialName || tls.subjectAltNames.length > 0)
    ) {
      issues.error(
        `${p}.insecureSkipVerify`,
        "insecureSkipVerify cannot be combined with caCertificates, credentialName or subjectAltNames",
      );
    }
    if (tls.mode === M.MUTUAL && (tls.caCertificates || tls.subjectAltNames.length > 0)) {
      issues.error(
        `${p}.insecureSkipVerify`,
        "insecureSkipVerify cannot be combined with caCertificates or subjectAltNames",
      );
    }
  }
  if ((tls.mode === M.SIMPLE || tls.mode === M.MUTUAL) && tls.credentialName !== "") {
    if (tls.clientCertificate || tls.privateKey || tls.caCertificates || tls.caCrl)
      issues.error(
        `${p}.credentialName`,
        "credentialName cannot be combined with certificate files or a CRL",
      );
    return;
  }
  if (tls.mode === M.MUTUAL) {
    if (!tls.clientCertificate)
      issues.error(`${p}.clientCertificate`, "MUTUAL needs clientCertificate (or credentialName)");
    if (!tls.privateKey) issues.error(`${p}.privateKey`, "MUTUAL needs privateKey (or credentialName)");
  }
}
