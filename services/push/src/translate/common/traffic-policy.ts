import type {
  ClientTLSSettings_TLSmode,
  DestinationRule,
  TrafficPolicy,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";

/**
 * A DestinationRule traffic policy reduced to what applies to one port: the
 * four settings, without port-level lists (Istio's TrafficPolicy after
 * GetPortLevelTrafficPolicy / MergeSubsetTrafficPolicy), plus the two
 * rule-level-only ones (PROXY protocol and retry budget).
 */
export type PortTrafficPolicy = Pick<
  TrafficPolicy,
  "loadBalancer" | "connectionPool" | "outlierDetection" | "tls" | "proxyProtocol" | "retryBudget"
>;

/**
 * Istio's util.GetPortLevelTrafficPolicy: the port-level settings for port,
 * when the policy has some, replace the whole policy (omitted fields fall back
 * to defaults, not to the top level: Istio documents that port-level settings
 * do not inherit); otherwise the policy itself. `portLevel` says which.
 */
export function portLevelPolicy(
  policy: TrafficPolicy | undefined,
  port: number,
): { policy: PortTrafficPolicy | undefined; portLevel: boolean } {
  if (!policy) return { policy: undefined, portLevel: false };
  const settings = policy.portLevelSettings.find((candidate) => candidate.port?.number === port);
  if (!settings) return { policy, portLevel: false };
  return {
    policy: {
      loadBalancer: settings.loadBalancer,
      connectionPool: settings.connectionPool,
      outlierDetection: settings.outlierDetection,
      tls: settings.tls,
      // Port-level settings have neither; Istio's copy of them leaves both unset.
      proxyProtocol: undefined,
      retryBudget: undefined,
    },
    portLevel: true,
  };
}

/**
 * Istio's util.MergeSubsetTrafficPolicy: the rule's policy for port, with
 * each setting the subset's policy (for port) sets replacing it; a subset
 * with port-level settings for port replaces all four.
 */
export function mergeSubsetPolicy(
  top: TrafficPolicy | undefined,
  subset: TrafficPolicy | undefined,
  port: number,
): PortTrafficPolicy | undefined {
  const original = portLevelPolicy(top, port).policy;
  if (!subset) return original;
  const { policy: subsetPolicy, portLevel } = portLevelPolicy(subset, port);
  if (!original) return subsetPolicy;
  if (!subsetPolicy) return original;
  const pick = <K extends keyof PortTrafficPolicy>(key: K) =>
    subsetPolicy[key] !== undefined || portLevel ? subsetPolicy[key] : original[key];
  return {
    loadBalancer: pick("loadBalancer"),
    connectionPool: pick("connectionPool"),
    outlierDetection: pick("outlierDetection"),
    tls: pick("tls"),
    proxyProtocol: subsetPolicy.proxyProtocol ?? original.proxyProtocol,
    retryBudget: subsetPolicy.retryBudget ?? original.retryBudget,
  };
}

/**
 * The traffic policy of cluster `subset` (empty: the service's default
 * cluster) for port, as Istio's cluster builder applies it.
 */
export function clusterPolicy(
  rule: DestinationRule | undefined,
  subset: string,
  port: number,
): PortTrafficPolicy | undefined {
  if (!subset) return portLevelPolicy(rule?.trafficPolicy, port).policy;
  const found = rule?.subsets.find((candidate) => candidate.name === subset);
  return mergeSubsetPolicy(rule?.trafficPolicy, found?.trafficPolicy, port);
}

/**
 * Istio's EDS mtlsChecker.tlsModeForDestinationRule: the TLS mode the rule
 * sets for a cluster, if any. For a subset cluster only the subset's own
 * policy counts (as in Istio), port-level TLS over policy-level.
 */
export function destinationRuleTlsMode(
  rule: DestinationRule | undefined,
  subset: string,
  port: number,
): ClientTLSSettings_TLSmode | undefined {
  if (!rule) return undefined;
  const policy = subset
    ? rule.subsets.find((candidate) => candidate.name === subset)?.trafficPolicy
    : rule.trafficPolicy;
  if (!policy) return undefined;
  const portTls = policy.portLevelSettings.find(
    (settings) => settings.port?.number === port && settings.tls,
  )?.tls;
  return (portTls ?? policy.tls)?.mode;
}
