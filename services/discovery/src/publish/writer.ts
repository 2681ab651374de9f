import { createHash } from "node:crypto";
import { encodeCanonical, type TypedBucket } from "@sextant/bus";
import { Counter, Gauge, type Logger, type Registry as MetricsRegistry } from "@sextant/observability";
import { EndpointShard, Service } from "@sextant/proto";
import type { Registry, RegistryBucket } from "../registry/registry.js";

/** Discovery's write metrics. */
export class WriterMetrics {
  /** KV operations by bucket and op (put, delete). */
  readonly writes: Counter<"bucket" | "op">;
  /** Values found unchanged, so not written. */
  readonly unchanged: Counter<"bucket">;
  /** Keys waiting to be written. */
  readonly pending: Gauge;
  /** 1 while this replica is the writer. */
  readonly leader: Gauge;
  /** Failed KV operations (retried). */
  readonly failures: Counter<"bucket">;

  constructor(registry: MetricsRegistry) {
    this.writes = new Counter({
      name: "sextant_discovery_kv_writes_total",
      help: "KV writes of the registry, by bucket and op (put, delete)",
      labelNames: ["bucket", "op"],
      registers: [registry],
    });
    this.unchanged = new Counter({
      name: "sextant_discovery_kv_unchanged_total",
      help: "registry values found unchanged and not written",
      labelNames: ["bucket"],
      registers: [registry],
    });
    this.failures = new Counter({
      name: "sextant_discovery_kv_write_failures_total",
      help: "KV writes that failed and will be retried",
      labelNames: ["bucket"],
      registers: [registry],
    });
    this.pending = new Gauge({
      name: "sextant_discovery_pending_writes",
      help: "registry keys waiting to be written",
      registers: [registry],
    });
    this.leader = new Gauge({
      name: "sextant_discovery_leader",
      help: "1 while this replica holds the lease and writes the registry",
      registers: [registry],
    });
  }
}

/** Options of {@link RegistryWriter}. */
export interface RegistryWriterOptions {
  readonly services: () => TypedBucket<Service>;
  readonly endpoints: () => TypedBucket<EndpointShard>;
  readonly registry: Registry;
  readonly isLeader: () => boolean;
  readonly concurrency: number;
  readonly logger: Logger;
  readonly metrics?: WriterMetrics;
}

const RETRY_DELAY_MS = 500;

const hashOf = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("base64");

/**
 * RegistryWriter publishes the registry's desired state to
 * `sextant-services` and `sextant-endpoints`, and only while this replica
 * leads. It keeps what it knows to be stored (a content hash per key), so
 * that an unchanged value costs nothing, not even a KV read; keys whose
 * desired value changed are queued and written by a bounded pool. On
 * becoming leader it reads both buckets and reconciles: puts what differs,
 * deletes what no source produces any more (what changed while no replica
 * led, or what the previous leader had not finished).
 */
export class RegistryWriter {
  readonly #written = { services: new Map<string, string>(), endpoints: new Map<string, string>() };
  readonly #dirty = { services: new Set<string>(), endpoints: new Set<string>() };
  #active = false;
  #generation = 0;
  #draining: Promise<void> | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #idleWaiters: Array<() => void> = [];

  constructor(private readonly options: RegistryWriterOptions) {
    options.registry.onChange((bucket, key) => this.mark(bucket, key));
  }

  /** True while leading and reconciled: what is stored follows the registry. */
  get active(): boolean {
    return this.#active;
  }

  /** Queues a key whose desired value may have changed. */
  mark(bucket: RegistryBucket, key: string): void {
    this.#dirty[bucket].add(key);
    this.options.metrics?.pending.set(this.#pendingCount());
    if (this.#active) this.#drain();
  }

  /** Called on becoming leader: reads what is stored, then writes every difference. */
  async activate(): Promise<void> {
    const generation = ++this.#generation;
    this.options.metrics?.leader.set(1);
    const [services, endpoints] = await Promise.all([
      this.options.services().list(),
      this.options.endpoints().list(),
    ]);
    if (generation !== this.#generation) return;
    this.#written.services.clear();
    this.#written.endpoints.clear();
    for (const entry of services)
      this.#written.services.set(entry.key, hashOf(encodeCanonical(Service, entry.value)));
    for (const entry of endpoints)
      this.#written.endpoints.set(entry.key, hashOf(encodeCanonical(EndpointShard, entry.value)));
    for (const bucket of ["services", "endpoints"] as const) {
      for (const key of this.#written[bucket].keys()) this.#dirty[bucket].add(key);
      for (const key of this.options.registry.keys(bucket)) this.#dirty[bucket].add(key);
    }
    this.#active = true;
    this.options.logger.info(
      { stored: services.length + endpoints.length, queued: this.#pendingCount() },
      "reconciling the registry",
    );
    await this.#drain();
  }

  /** Called on losing leadership: stops writing at once and forgets what it knew was stored. */
  deactivate(): void {
    this.#generation++;
    this.#active = false;
    this.options.metrics?.leader.set(0);
    this.#written.services.clear();
    this.#written.endpoints.clear();
  }

  /** Resolves once nothing is queued (immediately when not writing). */
  idle(): Promise<void> {
    if (!this.#active || (this.#pendingCount() === 0 && !this.#draining)) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Stops retrying; pending writes are abandoned (the next leader reconciles). */
  close(): void {
    this.deactivate();
    clearTimeout(this.#retryTimer);
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  #pendingCount(): number {
    return this.#dirty.services.size + this.#dirty.endpoints.size;
  }

  #drain(): Promise<void> {
    if (this.#draining) return this.#draining;
    this.#draining = (async () => {
      // Yield first, so that #draining is set before the finally below clears it.
      await null;
      try {
        let failed = false;
        while (this.#active && this.#pendingCount() > 0 && !failed) {
          const work: Array<[RegistryBucket, string]> = [];
          for (const bucket of ["services", "endpoints"] as const) {
            for (const key of this.#dirty[bucket]) work.push([bucket, key]);
            this.#dirty[bucket].clear();
          }
          let next = 0;
          const worker = async () => {
            while (next < work.length) {
              const [bucket, key] = work[next++]!;
              if (!(await this.#write(bucket, key))) {
                this.#dirty[bucket].add(key);
                failed = true;
              }
            }
          };
          await Promise.all(Array.from({ length: Math.min(this.options.concurrency, work.length) }, worker));
          this.options.metrics?.pending.set(this.#pendingCount());
        }
        if (failed && this.#active) {
          clearTimeout(this.#retryTimer);
          this.#retryTimer = setTimeout(() => void this.#drain(), RETRY_DELAY_MS);
        }
      } finally {
        this.#draining = undefined;
        if (this.#pendingCount() === 0 || !this.#active)
          for (const resolve of this.#idleWaiters.splice(0)) resolve();
      }
    })();
    return this.#draining;
  }

  /** Writes one key; false if it must be retried. Never writes without the lease. */
  async #write(bucket: RegistryBucket, key: string): Promise<boolean> {
    if (!this.options.isLeader()) {
      // The lease lapsed under us: keep the key queued; the elector steps down on its next round.
      return !this.#active;
    }
    const generation = this.#generation;
    try {
      if (bucket === "services") {
        return await this.#writeOne(
          bucket,
          key,
          this.options.registry.service(key),
          Service,
          this.options.services(),
          generation,
        );
      }
      return await this.#writeOne(
        bucket,
        key,
        this.options.registry.endpoints(key),
        EndpointShard,
        this.options.endpoints(),
        generation,
      );
    } catch (error) {
      this.options.metrics?.failures.inc({ bucket });
      this.options.logger.warn({ bucket, key, err: error }, "registry write failed; will retry");
      return false;
    }
  }

  async #writeOne<T>(
    bucket: RegistryBucket,
    key: string,
    value: T | undefined,
    codec: typeof Service | typeof EndpointShard,
    store: TypedBucket<T>,
    generation: number,
  ): Promise<boolean> {
    const written = this.#written[bucket];
    if (value === undefined) {
      if (!written.has(key)) return true;
      await store.delete(key);
      this.options.metrics?.writes.inc({ bucket, op: "delete" });
      if (generation === this.#generation) written.delete(key);
      return true;
    }
    const hash = hashOf(encodeCanonical(codec as never, value));
    if (written.get(key) === hash) {
      this.options.metrics?.unchanged.inc({ bucket });
      return true;
    }
    const result = await store.put(key, value);
    if (result.changed) this.options.metrics?.writes.inc({ bucket, op: "put" });
    else this.options.metrics?.unchanged.inc({ bucket });
    if (generation === this.#generation) written.set(key, hash);
    return true;
  }
}
