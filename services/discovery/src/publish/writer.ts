import { createHash } from "node:crypto";
import { encodeCanonical, type TypedBucket } from "@sextant/bus";
import { type BackoffPolicy, WorkQueue } from "@sextant/kube";
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

/** A failed write is tried again after half a second, as often as it takes. */
const RETRY: BackoffPolicy = { initialMs: 500, maxMs: 500 };

/** A queued write: the bucket and the key. */
type Item = `${RegistryBucket}/${string}`;

const itemOf = (bucket: RegistryBucket, key: string): Item => `${bucket}/${key}`;

const parseItem = (item: Item): [RegistryBucket, string] => {
  const slash = item.indexOf("/");
  return [item.slice(0, slash) as RegistryBucket, item.slice(slash + 1)];
};

/** The write was not made because the lease lapsed: the key stays queued until the elector steps down. */
class LeaseLapsed extends Error {}

const hashOf = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("base64");

/**
 * RegistryWriter publishes the registry's desired state to
 * `sextant-services` and `sextant-endpoints`, and only while this replica
 * leads. It keeps what it knows to be stored (a content hash per key), so
 * that an unchanged value costs nothing, not even a KV read; keys whose
 * desired value changed are queued and written, a bounded number at once. On
 * becoming leader it reads both buckets and reconciles: puts what differs,
 * deletes what no source produces any more (what changed while no replica
 * led, or what the previous leader had not finished).
 */
export class RegistryWriter {
  readonly #written = { services: new Map<string, string>(), endpoints: new Map<string, string>() };
  /** Paused while this replica does not lead: marked keys wait for the next activation. */
  readonly #queue: WorkQueue<Item>;
  #active = false;
  #generation = 0;

  constructor(private readonly options: RegistryWriterOptions) {
    this.#queue = new WorkQueue<Item>({
      process: (item) => this.#write(item),
      concurrency: options.concurrency,
      retry: RETRY,
      paused: true,
      onError: (item, error) => {
        this.options.metrics?.pending.set(this.#queue.size);
        if (error instanceof LeaseLapsed) return;
        const [bucket, key] = parseItem(item);
        this.options.metrics?.failures.inc({ bucket });
        this.options.logger.warn({ bucket, key, err: error }, "registry write failed; will retry");
      },
    });
    options.registry.onChange((bucket, key) => this.mark(bucket, key));
  }

  /** True while leading and reconciled: what is stored follows the registry. */
  get active(): boolean {
    return this.#active;
  }

  /** Queues a key whose desired value may have changed. */
  mark(bucket: RegistryBucket, key: string): void {
    this.#queue.add(itemOf(bucket, key));
    this.options.metrics?.pending.set(this.#queue.size);
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
      for (const key of this.#written[bucket].keys()) this.#queue.add(itemOf(bucket, key));
      for (const key of this.options.registry.keys(bucket)) this.#queue.add(itemOf(bucket, key));
    }
    this.#active = true;
    this.options.logger.info(
      { stored: services.length + endpoints.length, queued: this.#queue.size },
      "reconciling the registry",
    );
    this.#queue.resume();
  }

  /** Called on losing leadership: stops writing at once and forgets what it knew was stored. */
  deactivate(): void {
    this.#generation++;
    this.#active = false;
    this.#queue.pause();
    this.options.metrics?.leader.set(0);
    this.#written.services.clear();
    this.#written.endpoints.clear();
  }

  /** Resolves once nothing is queued (immediately when not writing). */
  idle(): Promise<void> {
    if (!this.#active) return Promise.resolve();
    return this.#queue.idle();
  }

  /** Stops retrying; pending writes are abandoned (the next leader reconciles). */
  close(): void {
    this.deactivate();
    void this.#queue.close();
  }

  /** Writes one key; rejects if it must be retried. Never writes without the lease. */
  async #write(item: Item): Promise<void> {
    try {
      // No longer leading: dropped, the next activation reconciles every key.
      if (!this.#active) return;
      // The lease lapsed under us: keep the key queued; the elector steps down on its next round.
      if (!this.options.isLeader()) throw new LeaseLapsed();
      const [bucket, key] = parseItem(item);
      const { registry, services, endpoints } = this.options;
      const generation = this.#generation;
      if (bucket === "services")
        await this.#writeOne(bucket, key, registry.service(key), Service, services(), generation);
      else await this.#writeOne(bucket, key, registry.endpoints(key), EndpointShard, endpoints(), generation);
    } finally {
      this.options.metrics?.pending.set(this.#queue.size);
    }
  }

  async #writeOne<T>(
    bucket: RegistryBucket,
    key: string,
    value: T | undefined,
    codec: typeof Service | typeof EndpointShard,
    store: TypedBucket<T>,
    generation: number,
  ): Promise<void> {
    const written = this.#written[bucket];
    if (value === undefined) {
      if (!written.has(key)) return;
      await store.delete(key);
      this.options.metrics?.writes.inc({ bucket, op: "delete" });
      if (generation === this.#generation) written.delete(key);
      return;
    }
    const hash = hashOf(encodeCanonical(codec as never, value));
    if (written.get(key) === hash) {
      this.options.metrics?.unchanged.inc({ bucket });
      return;
    }
    const result = await store.put(key, value);
    if (result.changed) this.options.metrics?.writes.inc({ bucket, op: "put" });
    else this.options.metrics?.unchanged.inc({ bucket });
    if (generation === this.#generation) written.set(key, hash);
  }
}
