import type { Logger } from "@sextant/observability";
import { configChanges } from "../cache/dependencies.js";
import type { XdsCache } from "../cache/xds-cache.js";
import type { MeshProxy } from "../model/proxy.js";
import type { PushContext } from "../model/push-context.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../model/types.js";
import { applyEnvoyFilters, patchesType } from "../translate/envoyfilter/apply.js";
import type { EnvoyFilterFailures } from "../translate/envoyfilter/failures.js";
import { isWildcard, namedOf, type ResourceSource, WILDCARD } from "./connection.js";
import type { XdsTypeTable } from "./xds-type-table.js";

/**
 * The resources connections send: the table's generator for the proxy's
 * kind, run on the current snapshot through a cache shared by every proxy.
 * When the snapshot's config changes, the cache drops only the entries
 * the change can affect (cache/dependencies.ts), so a VirtualService change
 * rebuilds the route configurations of its hosts and little else.
 */
export class GeneratedResources implements ResourceSource {
  /** The snapshot the cache's entries were last brought up to date with. */
  #cacheContext: PushContext | undefined;

  constructor(
    private readonly types: XdsTypeTable,
    private readonly cache: XdsCache,
    /** The current snapshot; undefined until the initial sync is done. */
    private readonly context: () => PushContext | undefined,
    private readonly logger?: Pick<Logger, "warn">,
    /** Where refused EnvoyFilter patches are reported; none in some tests. */
    private readonly envoyFilterFailures?: EnvoyFilterFailures,
  ) {}

  serves(proxy: MeshProxy, typeUrl: string): boolean {
    return this.types.generator(proxy.kind, typeUrl) !== undefined;
  }

  wildcardWhenEmpty(typeUrl: string): boolean {
    return this.types.wildcardWhenEmpty(typeUrl);
  }

  changedOnlyInSotw(typeUrl: string): boolean {
    return this.types.changedOnlyInSotw(typeUrl);
  }

  /** The generator's cheap check, for the wildcard and the names of a subscription. */
  needsPush(proxy: MeshProxy, typeUrl: string, names: WatchedNames, change: PushChange): boolean {
    const generator = this.types.generator(proxy.kind, typeUrl);
    if (!generator) return false;
    const named = namedOf(names);
    return (
      (isWildcard(names) && generator.needsPush(change, WILDCARD)) ||
      (named.size > 0 && generator.needsPush(change, named))
    );
  }

  /** The wildcard's resources, then those named, each name once; the proxy's EnvoyFilters applied. */
  generate(proxy: MeshProxy, typeUrl: string, names: WatchedNames): GeneratedResource[] | undefined {
    const resources = this.#generate(proxy, typeUrl, names);
    const push = this.context();
    if (!resources || !push || !patchesType(typeUrl)) return resources;
    const outcome = applyEnvoyFilters(push, proxy, typeUrl, resources, isWildcard(names));
    for (const failure of outcome.failures) this.envoyFilterFailures?.record(failure);
    return outcome.resources;
  }

  #generate(proxy: MeshProxy, typeUrl: string, names: WatchedNames): GeneratedResource[] | undefined {
    const generator = this.types.generator(proxy.kind, typeUrl);
    const push = this.context();
    if (!generator || !push) return undefined;
    if (push !== this.#cacheContext) {
      this.cache.invalidate(configChanges(this.#cacheContext, push));
      this.#cacheContext = push;
    }
    const context = { push, proxy, cache: this.cache, logger: this.logger };
    const named = namedOf(names);
    if (!isWildcard(names)) return generator.generate(context, named);
    const resources = generator.generate(context, WILDCARD);
    if (named.size === 0) return resources;
    const seen = new Set(resources.map((r) => r.name));
    return [...resources, ...generator.generate(context, named).filter((r) => !seen.has(r.name))];
  }
}
