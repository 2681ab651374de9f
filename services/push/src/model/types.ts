// Types the model, the generators, the cache and the server all speak. They
// live apart from the modules that build or use them, so that no two of
// those modules need each other's types (a cache of generated resources and
// the generators that fill it; a snapshot and the security rules it holds).
import type { Any, ConfigRef } from "@sextant/proto";

/** A config resource decoded into its Istio type, with where it came from. */
export interface TypedConfig<T> {
  readonly ref: ConfigRef;
  readonly generation: number;
  readonly spec: T;
  /** The resource's annotations (e.g. `istio.io/dry-run`), when it has any. */
  readonly annotations?: Readonly<Record<string, string>>;
  /** Hosts of the resource resolved to FQDNs (relative to its namespace). */
  readonly hosts: readonly string[];
}

/** One generated xDS resource, packed, with the config resources it was built from (for NACK tracing). */
export interface GeneratedResource {
  readonly name: string;
  readonly resource: Any;
  readonly sources: readonly ConfigRef[];
}

/**
 * What one snapshot's config changed against the previous (istiod's
 * ConfigsUpdated): the kinds of the configs added, changed or removed
 * ("services" for the registry), and finer tokens some cache entries are
 * indexed by (cache/dependencies.ts). `all` when nothing can be kept.
 */
export interface ConfigChange {
  readonly all: boolean;
  readonly kinds: ReadonlySet<string>;
  readonly tokens: ReadonlySet<string>;
}

/** What changed since the last push. */
export interface PushChange {
  /** Config or services changed: every type may be affected. */
  readonly full: boolean;
  /** For a full change, what it changed; without it, a type must assume anything did. */
  readonly configs?: ConfigChange;
  /** Hosts whose endpoints changed. */
  readonly endpointHosts: ReadonlySet<string>;
  /** Secrets (namespace/name) whose credential changed or went away: SDS pushes only these. */
  readonly secrets?: ReadonlySet<string>;
}

/** The resource names a proxy watches for a type; "*" for a wildcard subscription. */
export type WatchedNames = ReadonlySet<string> | "*";
