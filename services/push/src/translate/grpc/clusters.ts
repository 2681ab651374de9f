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

/**
 * The largest ring a gRPC client builds: both clients NACK a
 * `ring_hash_lb_config` ring size above it (C-core 1.51 "must be in the range
 * of 1 to 8388608", grpc-js-xds "minimum_ring_size is too large").
 */
const GRPC_MAX_RING_SIZE = 8_388_608;

/**
 * Of Envoy's lb_policy values, gRPC C-core 1.51 and grpc-js-xds 1.14 parse
 * only ROUND_ROBIN and RING_HASH (C-core: "LB policy is not supported",
 * grpc-js-xds: "unsupported lb_policy"), and neither knows a
 * `load_balancing_policy` for least request or random. So every simple load
 * balancer but ROUND_ROBIN is sent as ROUND_ROBIN, gRPC's default, and push
 * logs that it could not apply it. istiod's grpcgen does the same for RANDOM,
 * PASSTHROUGH and the deprecated LEAST_CONN, but sends LEAST_REQUEST as
 * written, for the clients of gRFC A48 (grpc-go, grpc-java) that both
 * clients push serves would NACK.
 */
const SIMPLE_LB_GRPC_RUNS = new Set([
  LoadBalancerSettings_SimpleLB.UNSPECIFIED,
  LoadBalancerSettings_SimpleLB.ROUND_ROBIN,
]);

/**
 * Clusters for proxyless gRPC clients, one per requested
 * `outbound|<port>|<subset>|<fqdn>`: EDS over ADS, with the DestinationRule's
 * traffic policy (subset over top level, port-level over both) in the forms
 * both gRPC C-core 1.51 and grpc-js-xds 1.14 accept: what they cannot run
 * is left out or replaced by what they can, and logged. An ISTIO_MUTUAL
 * cluster's SANs are the service accounts of its host's endpoints, so the
 * key names their version: an endpoint change that brings a new account
 * rebuilds the cluster, one that does not finds it cached.
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
    (name) => buildCluster(push, proxy.namespace, name, context.logger),
  );
}

/** The cluster `name` as seen from namespace; null if its service, port or subset does not exist. */
export function buildCluster(
  push: PushContext,
  namespace: string,
  name: string,
  logger?: GenerationContext["logger"],
): GeneratedResource | null {
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
  const consistentHash = loadBalancer?.consistentHash;
  if (consistentHash) {
    // Istio's ApplyRingHashLoadBalancer: ringHash's size, else the deprecated field's, else
    // Envoy's 1024. A maglev table becomes a ring: gRPC clients have no MAGLEV (istiod's
    // grpcgen sends it, and they NACK it), and both are consistent hashes of the same key.
    cluster.lbPolicy = Cluster_LbPolicy.RING_HASH;
    const requested = consistentHash.maglev
      ? undefined
      : consistentHash.ringHash
        ? consistentHash.ringHash.minimumRingSize || undefined
        : consistentHash.minimumRingSize || 1024;
    const minimumRingSize = requested === undefined ? undefined : Math.min(requested, GRPC_MAX_RING_SIZE);
    cluster.ringHashLbConfig = {
      hashFunction: Cluster_RingHashLbConfig_HashFunction.XX_HASH,
      ...(minimumRingSize ? { minimumRingSize } : {}),
    };
    if (consistentHash.maglev)
      logger?.warn(
        { cluster: name, namespace },
        "proxyless gRPC has no MAGLEV load balancer; sending RING_HASH",
      );
    else if (requested !== minimumRingSize)
      logger?.warn(
        { cluster: name, namespace, minimumRingSize: requested },
        `proxyless gRPC rings hold at most ${GRPC_MAX_RING_SIZE} entries; sending that as minimum_ring_size`,
      );
  } else if (loadBalancer?.simple !== undefined && !SIMPLE_LB_GRPC_RUNS.has(loadBalancer.simple)) {
    logger?.warn(
      { cluster: name, namespace, lbPolicy: LoadBalancerSettings_SimpleLB[loadBalancer.simple] },
      "proxyless gRPC cannot apply this load balancer; sending ROUND_ROBIN",
    );
  }
  // As istiod's grpcgen (gRFC A32): gRPC reads only max_requests of the circuit breakers.
  const maxRequests = policy?.connectionPool?.http?.http2MaxRequests;
  if (maxRequests && maxRequests > 0) cluster.circuitBreakers = { thresholds: [{ maxRequests }] };
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
