import type { GeneratedResource } from "../model/types.js";

/**
 * XdsCache shares generated resources between proxies (istiod's XdsCache).
 * A key must name every input its resource depends on: the type, the
 * resource name, the config version, and whatever of the proxy the resource
 * reads (its namespace, for short-host resolution). A missing input would
 * hand one proxy another's resource, so generators build keys with
 * {@link cacheKey} and tests compare cached and uncached output.
 */
export class XdsCache {
  #entries = new Map<string, GeneratedResource | null>();
  #hits = 0;
  #misses = 0;

  constructor(private readonly maxEntries = 100_000) {}

  /** The cached resource for key, or build() stored under it (null: "does not exist"). */
  get(key: string, build: () => GeneratedResource | null): GeneratedResource | null {
    const cached = this.#entries.get(key);
    if (cached !== undefined) {
      this.#hits++;
      return cached;
    }
    this.#misses++;
    const built = build();
    if (this.#entries.size >= this.maxEntries) this.#entries.clear();
    this.#entries.set(key, built);
    return built;
  }

  /** Drops every entry; called when a new config version makes them unreachable. */
  clear(): void {
    this.#entries.clear();
  }

  get stats(): { hits: number; misses: number; size: number } {
    return { hits: this.#hits, misses: this.#misses, size: this.#entries.size };
  }
}

/** A cache key from its parts, joined by NUL, which no part can contain. */
export function cacheKey(...parts: Array<string | number>): string {
  return parts.join("\u0000");
}
