import { resolveHost } from "@sextant/model";
import type { ConfigDigest, PushContext } from "../model/push-context.js";
import type { ConfigChange } from "../model/types.js";

/** The pseudo-kind of a registry service's change (added, removed, or any field of it). */
export const SERVICES = "services";

/**
 * Which generated resources a kind's change can affect, by class of cache
 * entry, as Istio's skipped{Cds,Lds,Rds,Eds}Configs (pilot/pkg/xds/*.go)
 * adapted to what Sextant's sidecar generators read: each class lists the
 * kinds whose change cannot alter its entries. An entry of class `any`
 * (the default) is dropped on every change. EnvoyFilters are applied after
 * the cache (server/generated-resources.ts), so no class depends on them.
 */
const SKIPPED_KINDS = {
  any: new Set<string>(),
  /** Outbound clusters: keyed by service port, DestinationRule, endpoints and SANs versions; no routing config. */
  "sidecar-cds": new Set([
    "Gateway",
    "VirtualService",
    "Sidecar",
    "WorkloadEntry",
    "WorkloadGroup",
    "AuthorizationPolicy",
    "RequestAuthentication",
    "Telemetry",
    "WasmPlugin",
    "EnvoyFilter",
  ]),
  /**
   * Cluster load assignments: as clusters, plus PeerAuthentication (an
   * endpoint's TLS mode metadata) and WorkloadEntry (endpoints). Also what
   * a sidecar's EDS push skips (Istio's skippedEdsConfigs): a scope that
   * a Sidecar or VirtualService change widens comes with new clusters in
   * CDS, whose assignments Envoy then asks for.
   */
  "sidecar-eds": new Set([
    "Gateway",
    "VirtualService",
    "Sidecar",
    "WorkloadGroup",
    "AuthorizationPolicy",
    "RequestAuthentication",
    "Telemetry",
    "WasmPlugin",
    "EnvoyFilter",
  ]),
  /** Outbound listeners (and virtualOutbound): Istio's sidecar list. */
  "sidecar-lds": new Set(["Gateway", "WorkloadEntry", "WorkloadGroup", "EnvoyFilter"]),
  /**
   * Outbound route configurations: Istio's list plus Gateway (a sidecar's
   * routes read the `gateways` field, not Gateway resources). A
   * VirtualService's change is matched by tokens instead: see
   * {@link routeDependencies}.
   */
  "sidecar-rds": new Set([
    "Gateway",
    "VirtualService",
    "WorkloadEntry",
    "WorkloadGroup",
    "AuthorizationPolicy",
    "RequestAuthentication",
    "PeerAuthentication",
    "WasmPlugin",
    "Telemetry",
    "EnvoyFilter",
  ]),
} satisfies Record<string, ReadonlySet<string>>;

export type DependencyClass = keyof typeof SKIPPED_KINDS;

/** What a cache entry depends on: its class, and tokens that drop it besides. */
export interface CacheDependencies {
  readonly class: DependencyClass;
  readonly tokens?: readonly string[];
}

/** True if an entry of the class can be affected by change (its tokens aside). */
export function classAffected(dependencyClass: DependencyClass, change: ConfigChange): boolean {
  if (change.all) return true;
  const skipped: ReadonlySet<string> = SKIPPED_KINDS[dependencyClass];
  for (const kind of change.kinds) if (!skipped.has(kind)) return true;
  return false;
}

/** Any VirtualService changed. */
export const ANY_VIRTUAL_SERVICE = "vs:any";
/** A VirtualService changed whose hosts are not all services' own hostnames (a wildcard, a delegate). */
export const UNPLACED_VIRTUAL_SERVICE = "vs:unplaced";
export const virtualServiceHost = (host: string) => `vs-host:${host}`;

/**
 * The tokens of an outbound route configuration whose virtual hosts are
 * those of `hosts` (the in-scope services with the route's port). Without a
 * Sidecar resource the scope is every exported service, which no
 * VirtualService changes, so only a VirtualService of one of those hosts
 * (or one not placed by host) can change the configuration; a Sidecar
 * imports the destinations of VirtualServices too, so then any does.
 */
export function routeDependencies(sidecarScoped: boolean, hosts: Iterable<string>): CacheDependencies {
  if (sidecarScoped) return { class: "sidecar-rds", tokens: [ANY_VIRTUAL_SERVICE] };
  const tokens = [UNPLACED_VIRTUAL_SERVICE];
  for (const host of hosts) tokens.push(virtualServiceHost(host));
  return { class: "sidecar-rds", tokens };
}

const EVERYTHING: ConfigChange = { all: true, kinds: new Set(), tokens: new Set() };

/** What next changed against previous; everything if there is no previous. */
export function configChanges(previous: PushContext | undefined, next: PushContext): ConfigChange {
  if (!previous) return EVERYTHING;
  const kinds = new Set<string>();
  const tokens = new Set<string>();
  if (previous.configVersion === next.configVersion) return { all: false, kinds, tokens };
  const before = previous.dependencies;
  const after = next.dependencies;
  if (before.global !== after.global) return EVERYTHING;
  const changedVirtualServices: ConfigDigest[] = [];
  const compare = (old: ConfigDigest | undefined, current: ConfigDigest | undefined) => {
    if (old?.digest === current?.digest) return;
    for (const digest of [old, current]) {
      if (!digest) continue;
      kinds.add(digest.kind);
      if (digest.kind === "VirtualService") changedVirtualServices.push(digest);
    }
  };
  for (const [key, current] of after.configs) compare(before.configs.get(key), current);
  for (const [key, old] of before.configs) if (!after.configs.has(key)) compare(old, undefined);
  const changedHosts = new Set<string>();
  for (const [key, current] of after.services) {
    const old = before.services.get(key);
    if (old?.digest === current.digest) continue;
    changedHosts.add(current.hostname);
    if (old) changedHosts.add(old.hostname);
  }
  for (const [key, old] of before.services) if (!after.services.has(key)) changedHosts.add(old.hostname);
  if (changedHosts.size > 0) kinds.add(SERVICES);
  if (changedVirtualServices.length > 0) {
    tokens.add(ANY_VIRTUAL_SERVICE);
    for (const token of virtualServiceTokens(changedVirtualServices, previous, next)) tokens.add(token);
  }
  return { all: false, kinds, tokens };
}

/**
 * A changed VirtualService reaches the virtual hosts of its hosts: Sextant
 * builds a virtual host per in-scope service only, with the routes of the
 * VirtualService of that hostname, so a host no service has reaches none.
 * A wildcard host (or any host while a wildcard service exists, which it
 * may match) or a VirtualService without hosts (a delegate, merged into
 * others) is unplaced.
 */
function virtualServiceTokens(
  changed: readonly ConfigDigest[],
  previous: PushContext,
  next: PushContext,
): string[] {
  const wildcardServices = [previous, next].some((push) =>
    [...push.servicesByHost.keys()].some((host) => host.includes("*")),
  );
  const tokens: string[] = [];
  for (const digest of changed) {
    const hosts = hostsOf(digest.spec);
    if (hosts.length === 0 || wildcardServices) return [UNPLACED_VIRTUAL_SERVICE];
    for (const written of hosts) {
      const host = resolveHost(written, digest.namespace, next.domainSuffix);
      if (host.includes("*")) return [UNPLACED_VIRTUAL_SERVICE];
      tokens.push(virtualServiceHost(host));
    }
  }
  return tokens;
}

function hostsOf(spec: unknown): string[] {
  const hosts = (spec as { hosts?: unknown } | undefined)?.hosts;
  return Array.isArray(hosts) ? hosts.filter((host): host is string => typeof host === "string") : [];
}

/**
 * What two pushes merged into one changed (a proxy's pending push taking a
 * second change): a full one's configs are kept, those of two full ones
 * united, and unknown (undefined: anything) if either full one's are.
 */
export function mergedConfigs(
  waiting: { readonly full: boolean; readonly configs?: ConfigChange | undefined },
  added: { readonly full: boolean; readonly configs?: ConfigChange | undefined },
): ConfigChange | undefined {
  if (!added.full) return waiting.configs;
  if (!waiting.full) return added.configs;
  if (!waiting.configs || !added.configs) return undefined;
  if (waiting.configs.all || added.configs.all) return EVERYTHING;
  return {
    all: false,
    kinds: new Set([...waiting.configs.kinds, ...added.configs.kinds]),
    tokens: new Set([...waiting.configs.tokens, ...added.configs.tokens]),
  };
}
