import type { ConfigChange, GeneratedResource } from "../model/types.js";
import { type CacheDependencies, classAffected, type DependencyClass } from "./dependencies.js";

const ANY: CacheDependencies = { class: "any" };

/**
 * XdsCache shares generated resources between proxies (istiod's XdsCache).
 * A key must name every input its resource depends on that differs between
 * proxies of one snapshot: the type, the resource name, whatever of the
 * proxy the resource reads (its namespace; its labels only through the
 * policies that select them). What changes between snapshots is handled by
 * {@link invalidate}: each entry says which configs it depends on (its
 * {@link CacheDependencies}), and a change drops only those entries, as
 * istiod's Clear(ConfigsUpdated). Generators build keys with
 * {@link cacheKey}, and tests compare cached and uncached output.
 */
export class XdsCache {
  #entries = new Map<string, { resource: GeneratedResource | null; dependencies: CacheDependencies }>();
  /** Keys by dependency class. */
  #byClass = new Map<DependencyClass, Set<string>>();
  /** Keys by dependency token. */
  #byToken = new Map<string, Set<string>>();
  #hits = 0;
  #misses = 0;

  constructor(private readonly maxEntries = 100_000) {}

  /**
   * The cached resource for key, or build() stored under it (null: "does
   * not exist"), to be dropped when a change reaches its dependencies (by
   * default any config change; a function is called on a miss only).
   */
  get(
    key: string,
    build: () => GeneratedResource | null,
    dependenciesOf: CacheDependencies | (() => CacheDependencies) = ANY,
  ): GeneratedResource | null {
    const cached = this.#entries.get(key);
    if (cached !== undefined) {
      this.#hits++;
      return cached.resource;
    }
    this.#misses++;
    const built = build();
    const dependencies = typeof dependenciesOf === "function" ? dependenciesOf() : dependenciesOf;
    if (this.#entries.size >= this.maxEntries) this.clear();
    this.#entries.set(key, { resource: built, dependencies });
    index(this.#byClass, dependencies.class, key);
    for (const token of dependencies.tokens ?? []) index(this.#byToken, token, key);
    return built;
  }

  /** Drops the entries change can affect; returns how many. */
  invalidate(change: ConfigChange): number {
    if (change.all) {
      const dropped = this.#entries.size;
      this.clear();
      return dropped;
    }
    let dropped = 0;
    for (const [dependencyClass, keys] of this.#byClass)
      if (classAffected(dependencyClass, change)) for (const key of keys) dropped += this.#drop(key);
    for (const token of change.tokens)
      for (const key of this.#byToken.get(token) ?? []) dropped += this.#drop(key);
    return dropped;
  }

  /** Drops every entry. */
  clear(): void {
    this.#entries.clear();
    this.#byClass.clear();
    this.#byToken.clear();
  }

  #drop(key: string): number {
    const entry = this.#entries.get(key);
    if (!entry) return 0;
    this.#entries.delete(key);
    this.#byClass.get(entry.dependencies.class)?.delete(key);
    for (const token of entry.dependencies.tokens ?? []) {
      const keys = this.#byToken.get(token);
      keys?.delete(key);
      if (keys?.size === 0) this.#byToken.delete(token);
    }
    return 1;
  }

  get stats(): { hits: number; misses: number; size: number } {
    return { hits: this.#hits, misses: this.#misses, size: this.#entries.size };
  }
}

function index<K>(map: Map<K, Set<string>>, at: K, key: string): void {
  const keys = map.get(at);
  if (keys) keys.add(key);
  else map.set(at, new Set([key]));
}

/** A cache key from its parts, joined by NUL, which no part can contain. */
export function cacheKey(...parts: Array<string | number>): string {
  return parts.join("\u0000");
}
