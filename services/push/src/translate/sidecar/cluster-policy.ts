import { Protocol, type ServicePort } from "@sextant/proto";
import { Cluster_DiscoveryType, Cluster_LbPolicy } from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";
import type { Duration } from "@sextant/proto/gen/google/protobuf/duration";
import {
  type ConnectionPoolSettings,
  ConnectionPoolSettings_HTTPSettings_H2UpgradePolicy as H2UpgradePolicy,
  type LoadBalancerSettings,
  type OutlierDetection,
  LoadBalancerSettings_SimpleLB as SimpleLB,
  type TrafficPolicy_RetryBudget,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { MtlsMode } from "../../model/security.js";
import type { PortTrafficPolicy } from "../common/traffic-policy.js";
import { localityLbSetting } from "./cluster-locality.js";
import { applyUpstreamTls, type UpstreamTlsOptions, upstreamTlsSettings } from "./cluster-tls.js";
import type { ClusterWrapper } from "./cluster-wrapper.js";

/** MeshConfig's connectTimeout default (10 s), every cluster's connect_timeout unless a DestinationRule sets one. */
export const MESH_CONNECT_TIMEOUT: Duration = { seconds: 10, nanos: 0 };

const MAX_UINT32 = 0xffffffff;

/** What applying a traffic policy to a cluster needs. */
export interface TrafficPolicyOptions {
  readonly policy: PortTrafficPolicy | undefined;
  readonly port: ServicePort;
  readonly direction: "outbound" | "inbound";
  /** Outbound only: the upstream TLS inputs. */
  readonly tls?: UpstreamTlsOptions & {
    readonly sni: string;
    readonly meshExternal: boolean;
    /** The destination's mTLS mode as istiod infers it (BestEffortInferServiceMTLSMode). */
    readonly serviceMtlsMode: MtlsMode | "UNKNOWN";
  };
}

/** True for ports whose traffic is HTTP/2 (Istio's Protocol.IsHTTP2: HTTP2, gRPC, gRPC-Web). */
export function isHttp2Port(port: ServicePort): boolean {
  return (
    port.protocol === Protocol.PROTOCOL_HTTP2 ||
    port.protocol === Protocol.PROTOCOL_GRPC ||
    port.protocol === Protocol.PROTOCOL_GRPC_WEB
  );
}

/**
 * istiod's setUpstreamProtocol for a sidecar: explicit HTTP/2 for HTTP/2
 * ports, the downstream's protocol for ports whose protocol is sniffed
 * (unnamed), nothing otherwise.
 */
export function setUpstreamProtocol(wrapper: ClusterWrapper, port: ServicePort): void {
  if (isHttp2Port(port)) wrapper.setH2();
  else if (port.protocol === Protocol.PROTOCOL_UNSPECIFIED) wrapper.setUseDownstream();
}

/**
 * istiod's applyTrafficPolicy: the connection pool on every cluster; on
 * outbound ones also the h2 upgrade, outlier detection, load balancer and
 * upstream TLS (DestinationRule TLS, else auto mTLS). An ORIGINAL_DST
 * cluster always balances CLUSTER_PROVIDED.
 */
export function applyTrafficPolicy(wrapper: ClusterWrapper, options: TrafficPolicyOptions): void {
  const policy = options.policy;
  const connectionPool = policy?.connectionPool ?? { tcp: undefined, http: undefined };
  applyConnectionPool(wrapper, connectionPool, policy?.retryBudget);
  if (options.direction === "outbound") {
    applyH2Upgrade(wrapper, options.port, connectionPool);
    applyOutlierDetection(wrapper, policy?.outlierDetection);
    applyLoadBalancer(wrapper, policy?.loadBalancer);
    if (options.tls) {
      const { tls, origin } = upstreamTlsSettings(
        policy?.tls,
        options.tls.serviceAccounts,
        options.tls.sni,
        options.tls.meshExternal,
        options.tls.serviceMtlsMode,
      );
      applyUpstreamTls(wrapper, tls, origin, options.tls);
    }
  }
  if (wrapper.isOriginalDst()) wrapper.cluster.lbPolicy = Cluster_LbPolicy.CLUSTER_PROVIDED;
}

/**
 * istiod's applyConnectionPool: the mesh connect timeout; circuit breaker
 * thresholds at the maximum (tracking remaining) unless the pool sets
 * http2MaxRequests, http1MaxPendingRequests, maxRetries or maxConnections;
 * the TCP connect timeout and keepalive; idle timeout (HTTP's, else TCP's),
 * max requests per connection, max connection duration and max concurrent
 * streams as HTTP protocol options; useClientProtocol as the downstream's
 * protocol; the DestinationRule's retry budget on the thresholds. Zero counts
 * as unset, as in istiod.
 */
export function applyConnectionPool(
  wrapper: ClusterWrapper,
  settings: ConnectionPoolSettings,
  retryBudget?: TrafficPolicy_RetryBudget,
): void {
  const cluster = wrapper.cluster;
  const threshold = {
    maxConnections: MAX_UINT32,
    maxPendingRequests: MAX_UINT32,
    maxRequests: MAX_UINT32,
    maxRetries: MAX_UINT32,
    trackRemaining: true,
  };
  let idleTimeout: Duration | undefined;
  let maxRequestsPerConnection = 0;
  let maxConcurrentStreams = 0;
  let maxConnectionDuration: Duration | undefined;
  const http = settings.http;
  if (http) {
    if (http.http2MaxRequests > 0) threshold.maxRequests = http.http2MaxRequests;
    if (http.http1MaxPendingRequests > 0) threshold.maxPendingRequests = http.http1MaxPendingRequests;
    if (http.maxRetries > 0) threshold.maxRetries = http.maxRetries;
    idleTimeout = http.idleTimeout;
    maxRequestsPerConnection = http.maxRequestsPerConnection;
    maxConcurrentStreams = http.maxConcurrentStreams;
  }
  cluster.connectTimeout = { ...MESH_CONNECT_TIMEOUT };
  const tcp = settings.tcp;
  if (tcp) {
    if (tcp.connectTimeout) cluster.connectTimeout = tcp.connectTimeout;
    if (tcp.maxConnections > 0) threshold.maxConnections = tcp.maxConnections;
    if (tcp.maxConnectionDuration) maxConnectionDuration = tcp.maxConnectionDuration;
    idleTimeout ??= tcp.idleTimeout;
    const keepalive = tcp.tcpKeepalive;
    if (keepalive) {
      cluster.upstreamConnectionOptions ??= {};
      cluster.upstreamConnectionOptions.tcpKeepalive ??= {};
      const target = cluster.upstreamConnectionOptions.tcpKeepalive;
      if (keepalive.probes > 0) target.keepaliveProbes = keepalive.probes;
      if (keepalive.time) target.keepaliveTime = keepalive.time.seconds;
      if (keepalive.interval) target.keepaliveInterval = keepalive.interval.seconds;
    }
  }
  cluster.circuitBreakers = { thresholds: [{ ...threshold, retryBudget: envoyRetryBudget(retryBudget) }] };
  if (maxConnectionDuration || idleTimeout || maxRequestsPerConnection > 0 || maxConcurrentStreams > 0) {
    const options = wrapper.httpOptions();
    options.commonHttpProtocolOptions ??= {};
    const common = options.commonHttpProtocolOptions;
    if (idleTimeout) common.idleTimeout = idleTimeout;
    if (maxRequestsPerConnection > 0) common.maxRequestsPerConnection = maxRequestsPerConnection;
    if (maxConnectionDuration) common.maxConnectionDuration = maxConnectionDuration;
    const http2 = options.explicitHttpConfig?.http2ProtocolOptions;
    if (http2 && maxConcurrentStreams > 0) http2.maxConcurrentStreams = maxConcurrentStreams;
  }
  if (http?.useClientProtocol) wrapper.setUseDownstream();
}

/**
 * istiod's applyRetryBudget: Envoy's budget with Istio's defaults (20 % of
 * active requests, at least 3 concurrent retries) for what the rule leaves
 * unset; a minRetryConcurrency of 0 counts as unset.
 */
function envoyRetryBudget(budget: TrafficPolicy_RetryBudget | undefined) {
  if (!budget) return undefined;
  return {
    budgetPercent: { value: budget.percent ?? 20 },
    minRetryConcurrency: budget.minRetryConcurrency > 0 ? budget.minRetryConcurrency : 3,
  };
}

/**
 * istiod's shouldH2Upgrade: a pool's UPGRADE upgrades (whatever the port),
 * DO_NOT_UPGRADE does not; otherwise the mesh's h2UpgradePolicy, whose
 * default is DO_NOT_UPGRADE, so nothing.
 */
function applyH2Upgrade(wrapper: ClusterWrapper, _port: ServicePort, settings: ConnectionPoolSettings): void {
  if (settings.http?.h2UpgradePolicy === H2UpgradePolicy.UPGRADE) wrapper.setH2();
}

/**
 * istiod's applyOutlierDetection: success-rate ejection off; consecutive 5xx
 * and gateway errors with enforcement 100 % when non-zero; interval, base
 * ejection time, max ejection percent; local-origin errors when split; and
 * the healthy panic threshold set to minHealthPercent (0 disables panic mode,
 * istiod's default).
 */
export function applyOutlierDetection(wrapper: ClusterWrapper, outlier: OutlierDetection | undefined): void {
  if (!outlier) return;
  const out: NonNullable<ClusterWrapper["cluster"]["outlierDetection"]> = { enforcingSuccessRate: 0 };
  if (outlier.consecutive5xxErrors !== undefined) {
    out.consecutive5xx = outlier.consecutive5xxErrors;
    out.enforcingConsecutive5xx = outlier.consecutive5xxErrors > 0 ? 100 : 0;
  }
  if (outlier.consecutiveGatewayErrors !== undefined) {
    out.consecutiveGatewayFailure = outlier.consecutiveGatewayErrors;
    out.enforcingConsecutiveGatewayFailure = outlier.consecutiveGatewayErrors > 0 ? 100 : 0;
  }
  if (outlier.interval) out.interval = outlier.interval;
  if (outlier.baseEjectionTime) out.baseEjectionTime = outlier.baseEjectionTime;
  if (outlier.maxEjectionPercent > 0) out.maxEjectionPercent = outlier.maxEjectionPercent;
  if (outlier.splitExternalLocalOriginErrors) {
    out.splitExternalLocalOriginErrors = true;
    if ((outlier.consecutiveLocalOriginFailures ?? 0) > 0) {
      out.consecutiveLocalOriginFailure = outlier.consecutiveLocalOriginFailures;
      out.enforcingConsecutiveLocalOriginFailure = 100;
    }
    out.enforcingLocalOriginSuccessRate = 0;
  }
  wrapper.cluster.outlierDetection = out;
  if (outlier.minHealthPercent >= 0) {
    wrapper.cluster.commonLbConfig ??= {};
    wrapper.cluster.commonLbConfig.healthyPanicThreshold = { value: outlier.minHealthPercent };
  }
}

/**
 * istiod's applyLoadBalancer: locality-weighted LB config when locality
 * distribution (or failover with outlier detection) is configured;
 * CLUSTER_PROVIDED on ORIGINAL_DST; LEAST_CONN and LEAST_REQUEST as
 * LEAST_REQUEST, RANDOM, ROUND_ROBIN, PASSTHROUGH as an ORIGINAL_DST cluster,
 * unset as LEAST_REQUEST (istiod's default since 1.14), each with the
 * warmup as slow start; consistentHash as MAGLEV or RING_HASH (the
 * hash policy itself is on the route).
 */
export function applyLoadBalancer(wrapper: ClusterWrapper, lb: LoadBalancerSettings | undefined): void {
  const cluster = wrapper.cluster;
  const setting = localityLbSetting(lb);
  const failover = cluster.outlierDetection !== undefined;
  if (
    setting &&
    (setting.distribute.length > 0 ||
      (failover && (setting.failover.length > 0 || setting.failoverPriority.length > 0)))
  ) {
    cluster.commonLbConfig ??= {};
    cluster.commonLbConfig.localityWeightedLbConfig = {};
  }
  if (wrapper.isOriginalDst()) {
    cluster.lbPolicy = Cluster_LbPolicy.CLUSTER_PROVIDED;
    return;
  }
  const slowStart = slowStartConfig(lb);
  switch (lb?.simple) {
    case SimpleLB.ROUND_ROBIN:
      cluster.lbPolicy = Cluster_LbPolicy.ROUND_ROBIN;
      if (slowStart) cluster.roundRobinLbConfig = slowStart;
      break;
    case SimpleLB.RANDOM:
      cluster.lbPolicy = Cluster_LbPolicy.RANDOM;
      break;
    case SimpleLB.PASSTHROUGH:
      cluster.lbPolicy = Cluster_LbPolicy.CLUSTER_PROVIDED;
      cluster.type = Cluster_DiscoveryType.ORIGINAL_DST;
      cluster.loadAssignment = undefined;
      break;
    default:
      // LEAST_CONN, LEAST_REQUEST and unset.
      cluster.lbPolicy = Cluster_LbPolicy.LEAST_REQUEST;
      if (slowStart) cluster.leastRequestLbConfig = slowStart;
  }
  const hash = lb?.consistentHash;
  if (!hash) return;
  cluster.roundRobinLbConfig = undefined;
  cluster.leastRequestLbConfig = undefined;
  if (hash.maglev) {
    cluster.lbPolicy = Cluster_LbPolicy.MAGLEV;
    if (hash.maglev.tableSize !== 0) cluster.maglevLbConfig = { tableSize: hash.maglev.tableSize };
  } else if (hash.ringHash) {
    cluster.lbPolicy = Cluster_LbPolicy.RING_HASH;
    if (hash.ringHash.minimumRingSize !== 0)
      cluster.ringHashLbConfig = { minimumRingSize: hash.ringHash.minimumRingSize };
  } else {
    cluster.lbPolicy = Cluster_LbPolicy.RING_HASH;
    cluster.ringHashLbConfig = { minimumRingSize: hash.minimumRingSize || 1024 };
  }
}

/** Envoy needs a runtime key on a RuntimeDouble; Istio sets one no runtime defines, so the default always wins. */
const UNUSED_RUNTIME_KEY = "(";

/**
 * istiod's setWarmup and setSlowStartConfig: `warmup` (with Istio's defaults:
 * aggression 1, i.e. a linear ramp, and a 10 % starting weight, Envoy's own)
 * wins over the deprecated `warmupDurationSecs`, which sets only the window.
 */
function slowStartConfig(lb: LoadBalancerSettings | undefined) {
  const warmup = lb?.warmup;
  if (warmup) {
    return {
      slowStartConfig: {
        slowStartWindow: warmup.duration,
        aggression: { defaultValue: warmup.aggression ?? 1, runtimeKey: UNUSED_RUNTIME_KEY },
        minWeightPercent: { value: warmup.minimumPercent ?? 10 },
      },
    };
  }
  if (lb?.warmupDurationSecs) return { slowStartConfig: { slowStartWindow: lb.warmupDurationSecs } };
  return undefined;
}
