import type { Endpoint } from "@sextant/proto";
import type { ClusterLoadAssignment } from "@sextant/proto/envoy";
import type {
  LoadBalancerSettings,
  LocalityLoadBalancerSetting,
  LocalityLoadBalancerSetting_Distribute,
  LocalityLoadBalancerSetting_Failover,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";

/** A ClusterLoadAssignment as fromPartial takes it. */
export type LoadAssignmentDraft = Parameters<typeof ClusterLoadAssignment.fromPartial>[0];
/** One LbEndpoint as fromPartial takes it. */
export type LbEndpointDraft = NonNullable<
  NonNullable<LoadAssignmentDraft["endpoints"]>[number]["lbEndpoints"]
>[number];

/** An Envoy locality. */
export interface EnvoyLocality {
  readonly region: string;
  readonly zone: string;
  readonly subZone: string;
}

/** One locality's endpoints (Istio's LocalityEndpoints): the Envoy endpoints and the registry endpoints they came from. */
export interface LocalityGroup {
  locality: EnvoyLocality;
  lbEndpoints: LbEndpointDraft[];
  /** The registry endpoints, parallel to lbEndpoints (failoverPriority reads their labels). */
  endpoints: Endpoint[];
  loadBalancingWeight: number;
  priority: number;
}

/**
 * The mesh's localityLbSetting when MeshConfig sets none: enabled, with no
 * distribute or failover rules (istiod's DefaultMeshConfig).
 */
export const MESH_LOCALITY_LB_SETTING: LocalityLoadBalancerSetting = {
  distribute: [],
  failover: [],
  failoverPriority: [],
  enabled: true,
};

/**
 * istiod's loadbalancer.GetLocalityLbSetting: the rule's setting unless it
 * is explicitly disabled (then none), else the mesh's.
 */
export function localityLbSetting(
  loadBalancer: LoadBalancerSettings | undefined,
): LocalityLoadBalancerSetting | undefined {
  const fromRule = loadBalancer?.localityLbSetting;
  if (fromRule) return fromRule.enabled === false ? undefined : fromRule;
  return MESH_LOCALITY_LB_SETTING.enabled === false ? undefined : MESH_LOCALITY_LB_SETTING;
}

/**
 * istiod's loadbalancer.ApplyLocalityLoadBalancer on a proxy's view of the
 * endpoints: `distribute` reweights localities for a proxy in a matching
 * `from`; otherwise, only when outlier detection is on (without it Envoy
 * would never fail over), `failoverPriority` splits localities by how many
 * of the listed labels an endpoint shares with the proxy, and priorities
 * follow region/zone/subzone proximity (`failover` pushing unlisted regions
 * further down). Priorities are renumbered 0..N without gaps.
 */
export function applyLocalityLoadBalancer(
  groups: LocalityGroup[],
  proxyLocality: EnvoyLocality,
  proxyLabels: Readonly<Record<string, string>>,
  setting: LocalityLoadBalancerSetting | undefined,
  enableFailover: boolean,
): LocalityGroup[] {
  if (!setting) return groups;
  if (setting.distribute.length > 0) {
    applyLocalityWeights(groups, proxyLocality, setting.distribute);
    return groups;
  }
  if (!enableFailover) return groups;
  if (setting.failoverPriority.length > 0) {
    const split = applyFailoverPriorities(groups, proxyLabels, setting.failoverPriority);
    if (setting.failover.length > 0) applyLocalityFailover(split, proxyLocality, setting.failover);
    return split;
  }
  applyLocalityFailover(groups, proxyLocality, setting.failover);
  return groups;
}

/** istiod's util.LocalityMatch: `region/zone/subzone` with "*" (and missing zone or subzone) matching any. */
export function localityMatches(locality: EnvoyLocality | undefined, rule: string): boolean {
  const [region = "", zone = "", subzone = ""] = rule.split("/");
  return (
    (region === "*" || (locality?.region ?? "") === region) &&
    (zone === "*" || zone === "" || (locality?.zone ?? "") === zone) &&
    (subzone === "*" || subzone === "" || (locality?.subZone ?? "") === subzone)
  );
}

/** istiod's util.LbPriority: 0 same subzone, 1 same zone, 2 same region, 3 elsewhere. */
function lbPriority(proxy: EnvoyLocality, endpoints: EnvoyLocality): number {
  if (proxy.region !== endpoints.region) return 3;
  if (proxy.zone !== endpoints.zone) return 2;
  return proxy.subZone === endpoints.subZone ? 0 : 1;
}

function applyLocalityWeights(
  groups: LocalityGroup[],
  proxyLocality: EnvoyLocality,
  distribute: readonly LocalityLoadBalancerSetting_Distribute[],
): void {
  const rule = distribute.find((candidate) => localityMatches(proxyLocality, candidate.from));
  if (!rule) return;
  const mismatched = new Set(groups.map((_, index) => index));
  // istiod walks a Go map here; sorted keys make the outcome deterministic.
  for (const [target, weight] of Object.entries(rule.to).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const original = new Map<number, number>();
    let total = 0;
    groups.forEach((group, index) => {
      if (!mismatched.has(index) || !localityMatches(group.locality, target)) return;
      mismatched.delete(index);
      original.set(index, group.loadBalancingWeight);
      total += group.loadBalancingWeight;
    });
    for (const [index, originalWeight] of original) {
      const destination = (originalWeight * weight) / total;
      if (destination > 0) (groups[index] as LocalityGroup).loadBalancingWeight = Math.ceil(destination);
    }
  }
  for (const index of mismatched) {
    const group = groups[index] as LocalityGroup;
    group.lbEndpoints = [];
    group.endpoints = [];
  }
}

function applyLocalityFailover(
  groups: LocalityGroup[],
  proxyLocality: EnvoyLocality,
  failover: readonly LocalityLoadBalancerSetting_Failover[],
): void {
  const assigned = groups.map((group) => {
    let priority = lbPriority(proxyLocality, group.locality);
    if (priority === 3) {
      const rule = failover.find((candidate) => candidate.from === proxyLocality.region);
      if (rule && group.locality.region !== rule.to) priority = 4;
    }
    return group.priority * 5 + priority;
  });
  renumber(groups, assigned);
}

function applyFailoverPriorities(
  groups: LocalityGroup[],
  proxyLabels: Readonly<Record<string, string>>,
  failoverPriority: readonly string[],
): LocalityGroup[] {
  if (Object.keys(proxyLabels).length === 0 || groups.length === 0) return groups;
  const labels = failoverPriority.map((entry) => {
    const [name = "", value] = entry.split("=");
    return { name, value };
  });
  const split: LocalityGroup[] = [];
  for (const group of groups) {
    const byPriority = new Map<number, number[]>();
    group.endpoints.forEach((endpoint, index) => {
      let priority = 0;
      for (const [position, label] of labels.entries()) {
        const wanted = label.value ?? proxyLabels[label.name];
        if (wanted !== endpoint.labels[label.name]) {
          priority = labels.length - position;
          break;
        }
      }
      byPriority.set(priority, [...(byPriority.get(priority) ?? []), index]);
    });
    for (const priority of [...byPriority.keys()].sort((a, b) => a - b)) {
      const indexes = byPriority.get(priority) ?? [];
      const lbEndpoints = indexes.map((index) => group.lbEndpoints[index] as LbEndpointDraft);
      split.push({
        locality: group.locality,
        lbEndpoints,
        endpoints: indexes.map((index) => group.endpoints[index] as Endpoint),
        loadBalancingWeight: lbEndpoints.reduce(
          (sum, endpoint) => sum + (endpoint.loadBalancingWeight ?? 0),
          0,
        ),
        priority,
      });
    }
  }
  renumber(
    split,
    split.map((group) => group.priority),
  );
  return split;
}

/** Sets each group's priority to the rank of its raw priority, so priorities run 0..N without gaps. */
function renumber(groups: LocalityGroup[], raw: readonly number[]): void {
  const ranks = [...new Set(raw)].sort((a, b) => a - b);
  groups.forEach((group, index) => {
    group.priority = ranks.indexOf(raw[index] as number);
  });
}
