// The analyses of Gateways (istioctl analyze's gateway analyzers): a selector
// that picks no workload, and servers of several Gateways that claim the
// same hosts on the same port of the same workload.
import { hostMatches } from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import type { Gateway } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";

/** A workload of the registry, as a Gateway selector sees it. */
export interface AnalysisWorkload {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** What a gateway analysis reports: where, and what it says. */
export interface GatewayFinding {
  readonly resource: ConfigResource;
  readonly kind: "selectorNotFound" | "conflictingServers";
  readonly field: string;
  readonly message: string;
}

/** A selector as Kubernetes prints one (keys sorted, `k=v` joined by commas), as Istio's messages show it. */
export const selectorText = (selector: Readonly<Record<string, string>>): string =>
  Object.keys(selector)
    .sort()
    .map((key) => `${key}=${selector[key]}`)
    .join(",");

const selects = (selector: Readonly<Record<string, string>>, labels: Readonly<Record<string, string>>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);

/**
 * A Gateway's selector picks workloads in every namespace, as Istio's
 * gateway analyzer matches pods and as push merges Gateways when gateways are
 * not scoped to their namespace (Istio's default). An empty selector picks
 * every workload.
 */
function selectedWorkloads(gateway: Gateway, workloads: readonly AnalysisWorkload[]): Set<number> {
  const selected = new Set<number>();
  workloads.forEach((workload, index) => {
    if (selects(gateway.selector, workload.labels)) selected.add(index);
  });
  return selected;
}

/**
 * A server host `[namespace/]dnsName`: the namespace part says which
 * namespaces' VirtualServices may bind to it ("*" any, "." the Gateway's own).
 */
function serverHost(host: string, gatewayNamespace: string): { namespace: string; name: string } {
  const slash = host.indexOf("/");
  if (slash < 0) return { namespace: "*", name: host };
  const namespace = host.slice(0, slash);
  return { namespace: namespace === "." ? gatewayNamespace : namespace, name: host.slice(slash + 1) };
}

/** Two server hosts overlap when their DNS names overlap and so do the namespaces they admit. */
function hostsOverlap(
  a: { namespace: string; name: string },
  b: { namespace: string; name: string },
): boolean {
  const namespaces = a.namespace === "*" || b.namespace === "*" || a.namespace === b.namespace;
  return namespaces && (hostMatches(a.name, b.name) || hostMatches(b.name, a.name));
}

interface Entry {
  readonly resource: ConfigResource;
  readonly spec: Gateway;
  readonly selector: string;
  readonly workloads: ReadonlySet<number>;
}

/**
 * Runs the gateway analyses over the Gateways and the registry's workloads:
 *
 * - IST0101 (Istio's gateway analyzer): a selector that picks no workload
 *   gets no proxy, so its servers listen nowhere.
 * - IST0145 (Istio's conflicting-gateway analyzer): another Gateway on the
 *   same workload (the same selector, as Istio compares, or one that picks a
 *   workload this one picks too) has a server on the same port number whose
 *   hosts overlap; which one the proxy serves is undefined. Reported on each
 *   side, per server.
 */
export function analyzeGateways(
  gateways: ReadonlyArray<{ resource: ConfigResource; spec: Gateway }>,
  workloads: readonly AnalysisWorkload[],
): GatewayFinding[] {
  const findings: GatewayFinding[] = [];
  const entries: Entry[] = gateways.map(({ resource, spec }) => ({
    resource,
    spec,
    selector: selectorText(spec.selector),
    workloads: selectedWorkloads(spec, workloads),
  }));

  for (const entry of entries) {
    if (entry.workloads.size > 0) continue;
    findings.push({
      resource: entry.resource,
      kind: "selectorNotFound",
      field: "spec.selector",
      message: `Referenced selector not found: "${entry.selector}"`,
    });
  }

  const sameWorkload = (a: Entry, b: Entry) =>
    a.selector === b.selector || [...a.workloads].some((index) => b.workloads.has(index));
  for (const entry of entries) {
    entry.spec.servers.forEach((server, index) => {
      const port = server.port?.number;
      if (port === undefined) return;
      const hosts = server.hosts.map((host) => serverHost(host, entry.resource.namespace));
      const conflicting = new Set<string>();
      for (const other of entries) {
        if (other === entry || !sameWorkload(entry, other)) continue;
        const overlaps = other.spec.servers.some(
          (candidate) =>
            candidate.port?.number === port &&
            candidate.hosts.some((host) =>
              hosts.some((mine) => hostsOverlap(mine, serverHost(host, other.resource.namespace))),
            ),
        );
        if (overlaps) conflicting.add(`${other.resource.namespace}/${other.resource.name}`);
      }
      if (conflicting.size === 0) return;
      findings.push({
        resource: entry.resource,
        kind: "conflictingServers",
        field: `spec.servers[${index}]`,
        message:
          `Conflict with gateways ${[...conflicting].sort().join(",")} ` +
          `(workload selector ${entry.selector}, port ${port}, hosts ${server.hosts.join(",")}).`,
      });
    });
  }
  return findings;
}
