import type { Logger } from "@sextant/observability";
import type { CacheDependencies } from "../cache/dependencies.js";
import type { XdsCache } from "../cache/xds-cache.js";
import type { MeshProxy } from "../model/proxy.js";
import type { PushContext } from "../model/push-context.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../model/types.js";

/** What a generator is given. */
export interface GenerationContext {
  readonly push: PushContext;
  readonly proxy: MeshProxy;
  readonly cache: XdsCache;
  /** Where a generator says what it could not translate as written (istiod's warnings). */
  readonly logger?: Pick<Logger, "warn">;
}

/**
 * A Generator builds one xDS type for one kind of proxy (istiod's
 * XdsResourceGenerator). `needsPush` is the cheap check run for every proxy
 * on every change; `generate` is a pure function of the snapshot and proxy.
 */
export interface Generator {
  needsPush(change: PushChange, watched: WatchedNames): boolean;
  generate(context: GenerationContext, watched: WatchedNames): GeneratedResource[];
}

/**
 * The shape every by-name generator shares: for each watched name, in order,
 * the cached resource under the key its inputs give (built on a miss), and
 * nothing for a name that does not resolve. A wildcard gets nothing: gRPC
 * clients always subscribe by name.
 */
export function generateByName(
  context: GenerationContext,
  watched: WatchedNames,
  keyOf: (name: string) => string,
  build: (name: string) => GeneratedResource | null,
  /** What each resource depends on; any config change drops it if not given. */
  dependenciesOf?: (name: string) => CacheDependencies,
): GeneratedResource[] {
  if (watched === "*") return [];
  const resources: GeneratedResource[] = [];
  for (const name of [...watched].sort()) {
    const resource = context.cache.get(
      keyOf(name),
      () => build(name),
      dependenciesOf && (() => dependenciesOf(name)),
    );
    if (resource) resources.push(resource);
  }
  return resources;
}
