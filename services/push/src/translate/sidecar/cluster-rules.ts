import type { Endpoint, Service, ServicePort } from "@sextant/proto";
import type { DestinationRule } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { selectorMatches } from "../../model/security.js";
import type { TypedConfig } from "../../model/types.js";

/**
 * The DestinationRule a sidecar applies to a service, as istiod's
 * SidecarScope.DestinationRule picks it (see
 * {@link PushContext.destinationRuleFor}: the proxy's namespace, the
 * service's, the root namespace; the most specific host; a matching
 * workloadSelector first), remembered per snapshot.
 */
export function sidecarDestinationRule(
  push: PushContext,
  proxy: Pick<MeshProxy, "namespace" | "labels">,
  service: Pick<Service, "hostname" | "namespace">,
): TypedConfig<DestinationRule> | undefined {
  const index = ruleIndex(push);
  const labels = ruleLabelsKey(push, proxy);
  const key = `${proxy.namespace}\u0000${service.namespace}\u0000${service.hostname}\u0000${labels}`;
  if (index.chosen.has(key)) return index.chosen.get(key);
  const chosen = push.destinationRuleFor(service.hostname, proxy.namespace, proxy.labels, service.namespace);
  index.chosen.set(key, chosen);
  return chosen;
}

/**
 * What of the proxy's labels the choice of DestinationRules depends on: all
 * of them where a rule of its namespace has a workloadSelector, else none
 * (""), so that proxies of a namespace share their choices.
 */
export function ruleLabelsKey(push: PushContext, proxy: Pick<MeshProxy, "namespace" | "labels">): string {
  return ruleIndex(push).withSelector.has(proxy.namespace) ? JSON.stringify(proxy.labels) : "";
}

interface RuleIndex {
  /** Namespaces with a rule that has a workloadSelector. */
  readonly withSelector: ReadonlySet<string>;
  /** Choices made so far in this snapshot. */
  readonly chosen: Map<string, TypedConfig<DestinationRule> | undefined>;
}

const ruleIndexes = new WeakMap<PushContext, RuleIndex>();

/** The namespaces with selector rules and the choices made, kept once per snapshot. */
function ruleIndex(push: PushContext): RuleIndex {
  let index = ruleIndexes.get(push);
  if (!index) {
    const withSelector = new Set<string>();
    for (const config of push.destinationRules)
      if (config.spec.workloadSelector) withSelector.add(config.ref.namespace);
    index = { withSelector, chosen: new Map() };
    ruleIndexes.set(push, index);
  }
  return index;
}

/** One service port a proxy serves (Istio's ServiceTarget): the service, its port, and the workload port. */
export interface ServiceTarget {
  readonly service: Service;
  readonly port: ServicePort;
  /** The port the workload listens on (Istio's TargetPort). */
  readonly targetPort: number;
}

/**
 * The service ports the proxy's workload serves, as istiod's
 * GetProxyServiceTargets finds them: the registry's endpoints at one of the
 * proxy's IPs; failing that (a pod whose endpoints are not yet published),
 * the services of its namespace whose selector matches its labels. Sorted
 * by hostname, then port.
 */
export function serviceTargets(push: PushContext, proxy: MeshProxy): ServiceTarget[] {
  const targets: ServiceTarget[] = [];
  const byIp = endpointsByIp(push);
  const seen = new Set<string>();
  for (const ip of proxy.instanceIps) {
    for (const { service, endpoint } of byIp.get(ip) ?? []) {
      if (seen.has(service.hostname)) continue;
      seen.add(service.hostname);
      for (const port of service.ports)
        targets.push({ service, port, targetPort: targetPortOf(port, endpoint) });
    }
  }
  if (targets.length === 0) {
    for (const service of push.services) {
      if (service.namespace !== proxy.namespace || Object.keys(service.selector).length === 0) continue;
      if (!selectorMatches(service.selector, proxy.labels)) continue;
      for (const port of service.ports) targets.push({ service, port, targetPort: targetPortOf(port) });
    }
  }
  return targets.sort(
    (a, b) => a.service.hostname.localeCompare(b.service.hostname) || a.port.number - b.port.number,
  );
}

const ipIndexes = new WeakMap<PushContext, Map<string, Array<{ service: Service; endpoint: Endpoint }>>>();

/** The snapshot's endpoints by address, with their services (the first endpoint of a service per address). */
function endpointsByIp(push: PushContext) {
  let index = ipIndexes.get(push);
  if (!index) {
    index = new Map();
    for (const service of push.services) {
      const seen = new Set<string>();
      for (const endpoint of push.endpointsByHost.get(service.hostname) ?? []) {
        if (seen.has(endpoint.address)) continue;
        seen.add(endpoint.address);
        index.set(endpoint.address, [...(index.get(endpoint.address) ?? []), { service, endpoint }]);
      }
    }
    ipIndexes.set(push, index);
  }
  return index;
}

/** The workload port of a service port for an endpoint: its named port, else the target port, else the port. */
export function targetPortOf(port: ServicePort, endpoint?: Endpoint): number {
  return endpoint?.ports[port.name] || port.targetPort || port.number;
}
