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
  durationNanos,
  hostProblem,
  isDns1123Label,
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
    else if (!isDns1123Label(subset.name)) {
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
    checkLabels(issues, `${path}.workloadSelector.matchLabels`, dr.workloadSelector.matchLabels);
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
  if (tp.loadBalancer) checkLoadBalancer(issues, `${p}.loadBalancer`, tp.loadBalancer);
  if (tp.connectionPool) checkConnectionPool(issues, `${p}.connectionPool`, tp.connectionPool);
  if (tp.outlierDetection) checkOutlierDetection(issues, `${p}.outlierDetection`, tp.outlierDetection);
  if (tp.tls) checkClientTls(issues, `${p}.tls`, tp.tls);
  checkRetryBudget(issues, p, tp.retryBudget);
  if (tp.tunnel) {
    const t = tp.tunnel;
    if (t.protocol !== "" && t.protocol !== "CONNECT" && t.protocol !== "POST") {
      issues.error(`${p}.tunnel.protocol`, 'tunnel protocol must be "CONNECT" or "POST"');
    }
    if (!t.targetHost) issues.error(`${p}.tunnel.targetHost`, "tunnel targetHost is required");
    checkPort(issues, `${p}.tunnel.targetPort`, t.targetPort);
  }
  if (!allowPortLevel) return;
  const ports = new Set<number>();
  tp.portLevelSettings.forEach((pls, i) => {
    const pp = at(`${p}.portLevelSettings`, i);
    if (!pls.port) {
      issues.error(`${pp}.port`, "port is required in portLevelSettings");
    } else {
      checkPort(issues, `${pp}.port.number`, pls.port.number);
      if (ports.has(pls.port.number)) issues.error(`${pp}.port.number`, `duplicate port ${pls.port.number}`);
      ports.add(pls.port.number);
    }
    if (!pls.loadBalancer && !pls.connectionPool && !pls.outlierDetection && !pls.tls) {
      issues.error(pp, "a port traffic policy must set at least one field");
    }
    if (pls.loadBalancer) checkLoadBalancer(issues, `${pp}.loadBalancer`, pls.loadBalancer);
    if (pls.connectionPool) checkConnectionPool(issues, `${pp}.connectionPool`, pls.connectionPool);
    if (pls.outlierDetection) checkOutlierDetection(issues, `${pp}.outlierDetection`, pls.outlierDetection);
    if (pls.tls) checkClientTls(issues, `${pp}.tls`, pls.tls);
  });
}

function isPrime(n: number): boolean {
  if (n < 2) return false;
  for (let d = 2; d * d <= n; d++) if (n % d === 0) return false;
  return true;
}

function checkLoadBalancer(issues: Issues, p: string, lb: LoadBalancerSettings): void {
  const ch = lb.consistentHash;
  if (ch) {
    const cp = `${p}.consistentHash`;
    const hasKey =
      ch.httpHeaderName !== undefined ||
      ch.httpCookie !== undefined ||
      ch.useSourceIp !== undefined ||
      ch.httpQueryParameterName !== undefined;
    if (!hasKey) {
      issues.error(
        cp,
        "consistentHash needs one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName",
      );
    }
    if (ch.httpHeaderName === "") issues.error(`${cp}.httpHeaderName`, "httpHeaderName must not be empty");
    if (ch.httpQueryParameterName === "") {
      issues.error(`${cp}.httpQueryParameterName`, "httpQueryParameterName must not be empty");
    }
    if (ch.httpCookie) {
      if (!ch.httpCookie.name) issues.error(`${cp}.httpCookie.name`, "cookie name is required");
      if (!ch.httpCookie.ttl) issues.error(`${cp}.httpCookie.ttl`, "cookie ttl is required");
      else if (durationNanos(ch.httpCookie.ttl) < 0)
        issues.error(`${cp}.httpCookie.ttl`, "ttl must not be negative");
    }
    if (ch.maglev && !isPrime(ch.maglev.tableSize)) {
      issues.error(`${cp}.maglev.tableSize`, `tableSize ${ch.maglev.tableSize} must be a prime number`);
    }
    if (ch.minimumRingSize !== 0) {
      issues.warn(`${cp}.minimumRingSize`, "minimumRingSize is deprecated; use ringHash.minimumRingSize");
      if (ch.maglev) issues.error(`${cp}.minimumRingSize`, "minimumRingSize cannot be used with maglev");
    }
  }
  if (lb.localityLbSetting) checkLocality(issues, `${p}.localityLbSetting`, lb.localityLbSetting);
  checkDuration(issues, `${p}.warmupDurationSecs`, lb.warmupDurationSecs);
  checkLoadBalancerNewFields(issues, p, lb);
}

function checkLocality(issues: Issues, p: string, loc: LocalityLoadBalancerSetting): void {
  if (loc.distribute.length > 0 && loc.failover.length > 0) {
    issues.error(p, "distribute and failover cannot both be set");
  }
  loc.distribute.forEach((d, i) => {
    const dp = at(`${p}.distribute`, i);
    if (!d.from) issues.error(`${dp}.from`, "from locality is required");
    const total = Object.values(d.to).reduce((sum, w) => sum + w, 0);
    if (total !== 100)
      issues.error(`${dp}.to`, `locality weights must add up to 100 (they add up to ${total})`);
  });
  loc.failover.forEach((f, i) => {
    const fp = at(`${p}.failover`, i);
    if (f.from === f.to) issues.error(fp, "failover from and to must be different regions");
    if (f.from.includes("/")) issues.error(`${fp}.from`, "failover only names regions (no zone)");
    if (f.to.includes("/")) issues.error(`${fp}.to`, "failover only names regions (no zone)");
  });
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
    checkDuration(issues, `${tp}.idleTimeout`, t.idleTimeout);
    if (t.tcpKeepalive) {
      checkDuration(issues, `${tp}.tcpKeepalive.time`, t.tcpKeepalive.time);
      checkDuration(issues, `${tp}.tcpKeepalive.interval`, t.tcpKeepalive.interval);
    }
  }
}

function checkOutlierDetection(issues: Issues, p: string, od: OutlierDetection): void {
  if (od.consecutiveErrors !== 0) {
    issues.warn(`${p}.consecutiveErrors`, "consecutiveErrors is deprecated; use consecutive5xxErrors");
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
  const hasFiles =
    tls.clientCertificate !== "" || tls.privateKey !== "" || tls.caCertificates !== "" || tls.caCrl !== "";
  if (tls.mode === ClientTLSSettings_TLSmode.ISTIO_MUTUAL) {
    if (hasFiles || tls.credentialName !== "") {
      issues.error(
        p,
        "ISTIO_MUTUAL uses Istio's certificates: do not set credentialName or certificate files",
      );
    }
    return;
  }
  if (tls.mode === ClientTLSSettings_TLSmode.SIMPLE || tls.mode === ClientTLSSettings_TLSmode.MUTUAL) {
    if (tls.credentialName !== "") {
      if (hasFiles)
        issues.error(`${p}.credentialName`, "credentialName cannot be combined with certificate files");
      return;
    }
  }
  if (tls.mode === ClientTLSSettings_TLSmode.MUTUAL) {
    if (!tls.clientCertificate)
      issues.error(`${p}.clientCertificate`, "MUTUAL needs clientCertificate (or credentialName)");
    if (!tls.privateKey) issues.error(`${p}.privateKey`, "MUTUAL needs privateKey (or credentialName)");
  }
}

/** Reports a map of named ports whose names or numbers are invalid. */
export function checkPortMap(issues: Issues, p: string, ports: Record<string, number>): void {
  for (const [name, number] of Object.entries(ports)) {
    if (!isDns1123Label(name)) issues.error(key(p, name), `port name "${name}" must be a DNS-1123 label`);
    checkPort(issues, key(p, name), number);
  }
}
