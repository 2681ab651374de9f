import { Buckets, type Bus, type Watch } from "@sextant/bus";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource, Endpoint, Service } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { PushContext } from "../model/push-context.js";
import type { PushChange } from "../model/types.js";

/** Options of {@link PushInputs}. */
export interface PushInputsOptions {
  bus: () => Bus;
  logger: Logger;
  readiness: ReadinessGate;
  domainSuffix: string;
  /** The SPIFFE trust domain (TRUST_DOMAIN) of the SANs and principals push writes; "cluster.local" if not given. */
  trustDomain?: string;
  debounceAfterMs: number;
  debounceMaxMs: number;
  /** Called with each new snapshot and what changed; startedAt is when the first change of the burst arrived. */
  onPush(change: PushChange, startedAt: number): void;
}

/**
 * PushInputs follows `sextant-config`, `sextant-services` and
 * `sextant-endpoints` (each replays, then follows) and turns bursts of
 * changes into snapshots: after PUSH_DEBOUNCE_AFTER of quiet, or at most
 * PUSH_DEBOUNCE_MAX after the first change. A config or service change
 * rebuilds the PushContext; an endpoint-only change keeps the config and
 * names the hosts whose endpoints changed. If NATS goes away the last
 * snapshot keeps serving, and the watches resume where they stopped.
 */
export class PushInputs implements Runner {
  readonly name = "push-inputs";
  readonly #config = new Map<string, ConfigResource>();
  readonly #services = new Map<string, Service>();
  readonly #shards = new Map<string, { hostname: string; endpoints: readonly Endpoint[] }>();
  readonly #watches: Watch[] = [];
  #context: PushContext | undefined;
  #pending: { full: boolean; endpointHosts: Set<string>; firstAt: number } | undefined;
  #quietTimer: NodeJS.Timeout | undefined;
  #maxTimer: NodeJS.Timeout | undefined;
  #initialized = false;

  constructor(private readonly options: PushInputsOptions) {}

  /** The current snapshot; undefined before the initial sync. */
  get context(): PushContext | undefined {
    return this.#context;
  }

  async start(): Promise<void> {
    this.options.readiness.require("push initial sync");
    const bus = this.options.bus();
    const config = await bus.bucket(Buckets.config);
    const services = await bus.bucket(Buckets.services);
    const endpoints = await bus.bucket(Buckets.endpoints);
    this.#watches.push(
      await config.watch((event) => {
        if (event.type === "put") this.#config.set(event.key, event.value);
        else this.#config.delete(event.key);
        this.changed(true);
      }),
      await services.watch((event) => {
        if (event.type === "put") this.#services.set(event.key, event.value);
        else this.#services.delete(event.key);
        this.changed(true);
      }),
      await endpoints.watch((event) => {
        const previous = this.#shards.get(event.key);
        if (event.type === "put")
          this.#shards.set(event.key, { hostname: event.value.hostname, endpoints: event.value.endpoints });
        else this.#shards.delete(event.key);
        const host = event.type === "put" ? event.value.hostname : previous?.hostname;
        this.changed(false, host);
      }),
    );
    await Promise.all(this.#watches.map((watch) => watch.ready));
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxTimer);
    this.#pending = undefined;
    this.#context = this.build();
    this.#initialized = true;
    this.options.readiness.done("push initial sync");
    this.options.logger.info(
      { config: this.#config.size, services: this.#services.size, endpointShards: this.#shards.size },
      "initial sync done",
    );
  }

  async close(): Promise<void> {
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxTimer);
    await Promise.all(this.#watches.map((watch) => watch.stop()));
  }

  private build(): PushContext {
    return PushContext.build({
      config: this.#config,
      services: this.#services,
      endpointShards: this.#shards,
      domainSuffix: this.options.domainSuffix,
      ...(this.options.trustDomain ? { trustDomain: this.options.trustDomain } : {}),
    });
  }

  private changed(full: boolean, endpointHost?: string): void {
    if (!this.#initialized) return; // the replay is folded into the first snapshot
    const now = Date.now();
    this.#pending ??= { full: false, endpointHosts: new Set(), firstAt: now };
    this.#pending.full ||= full;
    if (endpointHost) this.#pending.endpointHosts.add(endpointHost);
    clearTimeout(this.#quietTimer);
    this.#quietTimer = setTimeout(() => this.flush(), this.options.debounceAfterMs);
    this.#maxTimer ??= setTimeout(() => this.flush(), this.options.debounceMaxMs);
  }

  private flush(): void {
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#maxTimer);
    this.#maxTimer = undefined;
    const pending = this.#pending;
    this.#pending = undefined;
    if (!pending || !this.#context) return;
    this.#context = pending.full ? this.build() : this.#context.withEndpoints(this.#shards);
    this.options.onPush({ full: pending.full, endpointHosts: pending.endpointHosts }, pending.firstAt);
  }
}
