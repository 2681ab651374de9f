import type { Logger, Registry } from "@sextant/observability";
import { Counter } from "@sextant/observability";
import type { PatchFailure } from "./apply.js";

/** How many distinct failures /debug/envoyfilterz keeps (the oldest go first). */
const KEPT = 200;

/**
 * Where push says that an EnvoyFilter's patch was refused: a warning the
 * first time a failure is seen (the same one recurs on every push), a
 * counter by EnvoyFilter and type, and the latest distinct failures for
 * /debug/envoyfilterz. Ingest cannot be told (push has no channel to
 * config status but NACKs, which are the proxies' word, not push's); its
 * analysis checks what can be checked without a proxy.
 */
export class EnvoyFilterFailures {
  readonly #recent = new Map<string, PatchFailure & { at: string; count: number }>();
  readonly #rejected: Counter<"envoyfilter" | "type">;

  constructor(
    registry: Registry,
    private readonly logger: Pick<Logger, "warn">,
  ) {
    this.#rejected = new Counter({
      name: "sextant_envoyfilter_patch_rejected_total",
      help: "Patched resources not sent because Envoy would reject them (the unpatched resource was sent instead), by EnvoyFilter (namespace/name) and xDS type.",
      labelNames: ["envoyfilter", "type"],
      registers: [registry],
    });
  }

  record(failure: PatchFailure): void {
    const type = failure.typeUrl.slice(failure.typeUrl.lastIndexOf(".") + 1);
    for (const ref of failure.filters)
      this.#rejected.inc({ envoyfilter: `${ref.namespace}/${ref.name}`, type });
    const key = `${failure.proxyId}\u0000${failure.typeUrl}\u0000${failure.resource}\u0000${failure.reason}`;
    const known = this.#recent.get(key);
    this.#recent.delete(key);
    this.#recent.set(key, { ...failure, at: new Date().toISOString(), count: (known?.count ?? 0) + 1 });
    if (this.#recent.size > KEPT) this.#recent.delete(this.#recent.keys().next().value as string);
    if (!known) {
      this.logger.warn(
        {
          envoyFilters: failure.filters.map((ref) => `${ref.namespace}/${ref.name}`),
          proxy: failure.proxyId,
          typeUrl: failure.typeUrl,
          resource: failure.resource,
          reason: failure.reason,
        },
        "EnvoyFilter patch refused: the unpatched resource is sent",
      );
    }
  }

  /** The latest distinct failures, newest first, for /debug/envoyfilterz. */
  recent(): Array<PatchFailure & { at: string; count: number }> {
    return [...this.#recent.values()].reverse();
  }
}
