import type { Service } from "@sextant/proto";
import { Resolution } from "@sextant/proto/gen/sextant/mesh/v1/service";
import type { PushContext } from "./push-context.js";

/**
 * True for a service that is only another name for its external name (a
 * Kubernetes ExternalName Service, Istio's Alias resolution): it has no
 * listener, cluster or virtual host of its own; its names route as the
 * service it names (see {@link aliasesByTarget}).
 */
export function isAlias(service: Service): boolean {
  return service.resolution === Resolution.RESOLUTION_ALIAS;
}

interface AliasIndex {
  /** Target hostname -> the hostnames of the aliases leading to it. */
  byTarget: ReadonlyMap<string, readonly string[]>;
  /** Alias hostname -> the hostname it finally leads to. */
  targetOf: ReadonlyMap<string, string>;
}

const aliasMemo = new WeakMap<PushContext, AliasIndex>();

/**
 * Istio's resolveServiceAliases, memoized per snapshot: each alias of the
 * registry followed to the name that is no alias (an alias of an alias
 * too; a loop of aliases, which Kubernetes DNS answers NXDOMAIN, leads
 * nowhere), and per such name its aliases sorted by namespace then
 * hostname. Every alias counts, whatever its exportTo, as Istio computes
 * them over all services; whether the name an alias leads to is a service
 * a proxy sees is the caller's check.
 */
function aliasIndex(push: PushContext): AliasIndex {
  const memo = aliasMemo.get(push);
  if (memo) return memo;
  const aliases = push.services.filter((service) => isAlias(service) && service.externalName !== "");
  const next = new Map(aliases.map((service) => [service.hostname, service.externalName]));
  const targetOf = new Map<string, string>();
  const byTarget = new Map<string, Service[]>();
  for (const alias of aliases) {
    let target = alias.externalName;
    const seen = new Set([alias.hostname]);
    let loop = false;
    while (next.has(target)) {
      if (seen.has(target)) {
        loop = true;
        break;
      }
      seen.add(target);
      target = next.get(target)!;
    }
    if (loop) continue;
    targetOf.set(alias.hostname, target);
    byTarget.set(target, [...(byTarget.get(target) ?? []), alias]);
  }
  const sorted = new Map<string, readonly string[]>();
  for (const [target, list] of byTarget) {
    list.sort((a, b) =>
      a.namespace !== b.namespace ? (a.namespace < b.namespace ? -1 : 1) : a.hostname < b.hostname ? -1 : 1,
    );
    sorted.set(
      target,
      list.map((service) => service.hostname),
    );
  }
  const index = { byTarget: sorted, targetOf };
  aliasMemo.set(push, index);
  return index;
}

/** For each hostname some alias leads to, the hostnames of those aliases (Istio's Attributes.Aliases). */
export function aliasesByTarget(push: PushContext): ReadonlyMap<string, readonly string[]> {
  return aliasIndex(push).byTarget;
}

/** The name an alias finally leads to; undefined for a hostname that is no alias, or an alias in a loop. */
export function aliasTarget(push: PushContext, host: string): string | undefined {
  return aliasIndex(push).targetOf.get(host);
}

/**
 * The host a route destination's cluster is named after (Istio's
 * GetDestinationCluster): for an alias, the name it leads to, else the host
 * itself. Istio takes one hop (its external name; a TODO there says an alias
 * of an alias then names a cluster that does not exist); Sextant follows the
 * chain as the virtual host domains do, and takes the one hop only for an
 * alias in a loop, which leads nowhere anyway.
 */
export function clusterHost(push: PushContext, host: string): string {
  const service = push.servicesByHost.get(host);
  if (!service?.externalName) return host;
  return aliasTarget(push, host) ?? service.externalName;
}
