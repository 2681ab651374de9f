import { packAny } from "@sextant/proto";
import { Cluster, TypeUrl } from "@sextant/proto/envoy";
import {
  Cluster_DiscoveryType,
  Cluster_LbPolicy,
  Cluster_RingHashLbConfig_HashFunction,
} from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import {
  ClientTLSSettings_TLSmode,
  LoadBalancerSettings_SimpleLB,
  type TrafficPolicy,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import { cacheKey } from "../../cache/xds-cache.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import { type GenerationContext, generateByName } from "../generator.js";
import { parseOutboundClusterName } from "../names.js";
import { upstreamMtlsSocket } from "./tls.js";

/** Istio's simple load balancers as Envoy's lb_policy; gRPC clients accept ROUND_ROBIN and RING_HASH. */
const LB_POLICY: Partial<Record<LoadBalancerSettings_SimpleLB, Cluster_LbPolicy>> = {
  [LoadBalancerSettings_SimpleLB.UNSPECIFIED]: Cluster_LbPolicy.ROUND_ROBIN,
  [LoadBalancerSettings_SimpleLB.ROUND_ROBIN]: Cluster_LbPolicy.ROUND_ROBIN,
  [LoadBalancerSettings_SimpleLB.LEAST_CONN]: Cluster_LbPolicy.LEAST_REQUEST,
  [LoadBalancerSettings_SimpleLB.LEAST_REQUEST]: Cluster_LbPolicy.LEAST_REQUEST,
  [LoadBalancerSettings_SimpleLB.RANDOM]: Cluster_LbPolicy.RANDOM,
  [LoadBalancerSettings_SimpleLB.PASSTHROUGH]: Cluster_LbPolicy.CLUSTER_PROVIDED,
};

/**
 * Clusters for proxyless gRPC clients, one per requested
 * `outbound|<port>|<subset>|<fqdn>`: EDS over ADS, with the DestinationRule's
 * traffic policy (subset over top level, port-level over both) translated
 * faithfully: a policy the client cannot run is sent as written, and the
 * client's NACK says so. An ISTIO_MUTUAL cluster's SANs are the service
 * accounts of its host's endpoints, so the key names their version: an
 * endpoint change that brings a new account rebuilds the cluster, one that
 * does not finds it cached.
 */
export function generateGrpcClusters(context: GenerationContext, watched: WatchedNames): GeneratedResource[] {
  const { push, proxy } = context;
  return generateByName(
    context,
    watched,
    (name) =>
      cacheKey(
        "cds-grpc",
        proxy.namespace,
        name,
        push.configVersion,
        push.serviceAccountVersion(parseOutboundClusterName(name)?.host ?? ""),
      ),
    (name) => buildCluster(push, proxy.namespace, name),
  );
}

/** The cluster `name` as seen from namespace; null if its service, port or subset does not exist. */
export function buildCluster(push: PushContext, namespace: string, name: string): GeneratedResource | null {
  const parsed = parseOutboundClusterName(name);
  if (!parsed) return null;
  const service = push.serviceFor(parsed.host, namespace);
  if (!service?.ports.some((port) => port.number === parsed.port)) return null;
  const rule = push.destinationRuleFor(parsed.host, namespace);
  const subset = parsed.subset ? rule?.spec.subsets.find((s) => s.name === parsed.subset) : undefined;
  if (parsed.subset && !subset) return null;
  const policy = effectivePolicy(rule?.spec.trafficPolicy, subset?.trafficPolicy, parsed.port);

  const cluster: Record<string, unknown> = {
    name,
    type: Cluster_DiscoveryType.EDS,
    edsClusterConfig: { edsConfig: { ads: {}, resourceApiVersion: ApiVersion.V3 }, serviceName: name },
    connectTimeout: policy?.connectionPool?.tcp?.connectTimeout ?? { seconds: 10, nanos: 0 },
    lbPolicy: Cluster_LbPolicy.ROUND_ROBIN,
  };
  const loadBalancer = policy?.loadBalancer;
  if (loadBalancer?.consistentHash) {
    cluster.lbPolicy = Cluster_LbPolicy.RING_HASH;
    const minimumRingSize =
      loadBalancer.consistentHash.ringHash?.minimumRingSize || loadBalancer.consistentHash.minimumRingSize;
    cluster.ringHashLbConfig = {
      hashFunction: Cluster_RingHashLbConfig_HashFunction.XX_HASH,
      ...(minimumRingSize ? { minimumRingSize } : {}),
    };
  } else if (loadBalancer?.simple !== undefined) {
    cluster.lbPolicy = LB_POLICY[loadBalancer.simple] ?? Cluster_LbPolicy.ROUND_ROBIN;
  }
  const http = policy?.connectionPool?.http;
  if (http?.http2MaxRequests || http?.http1MaxPendingRequests || http?.maxRetries) {
    cluster.circuitBreakers = {
      thresholds: [
        {
          ...(http.http2MaxRequests ? { maxRequests: http.http2MaxRequests } : {}),
          ...(http.http1MaxPendingRequests ? { maxPendingRequests: http.http1MaxPendingRequests } : {}),
          ...(http.maxRetries ? { maxRetries: http.maxRetries } : {}),
        },
      ],
    };
  }
  const outlier = policy?.outlierDetection;
  if (outlier) {
    const consecutive5xx = outlier.consecutive5xxErrors ?? (outlier.consecutiveErrors || undefined);
    cluster.outlierDetection = {
      ...(consecutive5xx !== undefined ? { consecutive5xx } : {}),
      ...(outlier.consecutiveGatewayErrors !== undefined
        ? { consecutiveGatewayFailure: outlier.consecutiveGatewayErrors }
        : {}),
      ...(outlier.interval ? { interval: outlier.interval } : {}),
      ...(outlier.baseEjectionTime ? { baseEjectionTime: outlier.baseEjectionTime } : {}),
      ...(outlier.maxEjectionPercent ? { maxEjectionPercent: outlier.maxEjectionPercent } : {}),
    };
  }
  // As istiod's grpcgen: TLS only when asked for (no auto-mTLS, since nothing says whether the
  // server is a gRPC XdsServer with mesh certificates), and only ISTIO_MUTUAL (SIMPLE and MUTUAL name
  // files or credentialName secrets, which a gRPC client has no way to load: it only knows the
  // bootstrap's certificate providers).
  if (policy.tls?.mode === ClientTLSSettings_TLSmode.ISTIO_MUTUAL)
    cluster.transportSocket = upstreamMtlsSocket(push.serviceAccountsOf(parsed.host));
  return {
    name,
    resource: packAny(TypeUrl.Cluster, Cluster, Cluster.fromPartial(cluster)),
    sources: rule ? [rule.ref] : [],
  };
}

/** Istio's precedence: a subset's policy replaces the top-level one per field; port-level settings win for their port. */
function effectivePolicy(top: TrafficPolicy | undefined, subset: TrafficPolicy | undefined, port: number) {
  const merged = {
    loadBalancer: subset?.loadBalancer ?? top?.loadBalancer,
    connectionPool: subset?.connectionPool ?? top?.connectionPool,
    outlierDetection: subset?.outlierDetection ?? top?.outlierDetection,
    tls: subset?.tls ?? top?.tls,
  };
  const portLevel = (
    subset?.portLevelSettings.length ? subset.portLevelSettings : (top?.portLevelSettings ?? [])
  ).find((settings) => settings.port?.number === port);
  if (!portLevel) return merged;
  return {
    loadBalancer: portLevel.loadBalancer ?? merged.loadBalancer,
    connectionPool: portLevel.connectionPool ?? merged.connectionPool,
    outlierDetection: portLevel.outlierDetection ?? merged.outlierDetection,
    tls: portLevel.tls ?? merged.tls,
  };
}
