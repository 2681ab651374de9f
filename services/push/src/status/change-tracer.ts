import { type Link, TraceFlags, trace } from "@opentelemetry/api";
import { Buckets, type Bus } from "@sextant/bus";
import {
  type ConfigRefLike,
  type ConfigTraceRecord,
  configTraceKey,
  type ProxyTrace,
  type ProxyTypeTrace,
  type PushTraceRecord,
  parseConfigKey,
  pushTraceKey,
} from "@sextant/model";
import type { Logger } from "@sextant/observability";
import { Struct } from "@sextant/proto";
import { type Runner, SerialTasks } from "@sextant/runtime";
import type { ConfigChangeRef } from "../inputs/push-inputs.js";
import type { Connection } from "../server/connection.js";

const tracer = trace.getTracer("@sextant/push");

/**
 * How many changes are followed at once. Each response and answer of every
 * proxy updates every followed change, so the newest ones are kept; an older
 * change's record stays in `sextant-traces` as last written.
 */
const MAX_FOLLOWED = 256;

/** Options of {@link ChangeTracer}. */
export interface ChangeTracerOptions {
  bus: () => Bus;
  logger: Logger;
  replica: string;
  flushMs: number;
}

/** One change followed: the resource, what push built, and each proxy's part. */
interface Followed {
  readonly ref: ConfigRefLike;
  readonly generation: number;
  readonly deleted: boolean;
  readonly builtAt: Date;
  readonly proxies: Map<string, { pushedAt?: string; types: Map<string, ProxyTypeTrace> }>;
  /** Ingest's trace id of the change, once read. */
  traceId?: string;
}

/**
 * ChangeTracer follows each config change from the PushContext built with
 * it to every proxy's answer: for each proxy, when push decided what it
 * needed, and per type when the response carrying it was sent, ACKed or
 * NACKed (with the message). It writes a record per change and replica to
 * `sextant-traces` (at most every STATUS_FLUSH_MS), which `sextantctl trace`
 * reads through ingest, and stamps each proxy's watch state with the change's
 * trace id, which `sextant-proxy-status` shows. With an OpenTelemetry SDK
 * running, its push.build span links to ingest's config.store span by the
 * trace id ingest recorded.
 */
export class ChangeTracer implements Runner {
  readonly name = "change-tracer";
  readonly #followed = new Map<string, Followed>();
  readonly #dirty = new Set<Followed>();
  readonly #tasks: SerialTasks;
  /** The trace id of the newest change built, stamped on what is sent next. */
  #latestTraceId: string | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ChangeTracerOptions) {
    this.#tasks = new SerialTasks((error) =>
      options.logger.warn({ err: error }, "change traces not written; will retry"),
    );
  }

  async start(): Promise<void> {
    this.#timer = setInterval(() => void this.flush(), this.options.flushMs);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  /** A PushContext was built with these changes; called before it is pushed. */
  built(changes: readonly ConfigChangeRef[]): void {
    const builtAt = new Date();
    for (const change of changes) {
      const followed: Followed = {
        ref: parseConfigKey(change.key),
        generation: change.generation,
        deleted: change.deleted,
        builtAt,
        proxies: new Map(),
      };
      this.#followed.delete(change.key);
      this.#followed.set(change.key, followed);
      this.#dirty.add(followed);
    }
    for (const key of [...this.#followed.keys()].slice(0, Math.max(0, this.#followed.size - MAX_FOLLOWED)))
      this.#followed.delete(key);
    void this.#tasks.run(() => this.link(changes.map((change) => this.#followed.get(change.key)!)));
  }

  /** A response of a type was sent to a proxy: every followed change not yet ACKed by it travelled in it. */
  sent(connection: Connection, typeUrl: string): void {
    const state = connection.watched.get(typeUrl);
    if (state) state.traceIdSent = this.#latestTraceId;
    const now = new Date().toISOString();
    this.each(connection, typeUrl, (type) =>
      type.ackedAt ? undefined : { ...type, sentAt: type.sentAt ?? now },
    );
  }

  /** The proxy ACKed the latest response of a type. */
  acked(connection: Connection, typeUrl: string): void {
    const state = connection.watched.get(typeUrl);
    if (state) state.traceIdAcked = state.traceIdSent;
    const now = new Date().toISOString();
    this.each(connection, typeUrl, (type) =>
      type.sentAt && !type.ackedAt ? { sentAt: type.sentAt, ackedAt: now } : undefined,
    );
  }

  /** The proxy NACKed the latest response of a type. */
  nacked(connection: Connection, typeUrl: string, message: string): void {
    const now = new Date().toISOString();
    this.each(connection, typeUrl, (type) =>
      type.sentAt && !type.ackedAt ? { ...type, nackedAt: now, nack: message } : undefined,
    );
  }

  /** Push decided what the proxy needs after the changes built so far (maybe nothing). */
  pushed(connection: Connection): void {
    const now = new Date().toISOString();
    for (const followed of this.#followed.values()) {
      const proxy = this.proxyOf(followed, connection);
      if (proxy.pushedAt) continue;
      proxy.pushedAt = now;
      this.#dirty.add(followed);
    }
  }

  /** Writes every change whose record changed since the last flush. */
  flush(): Promise<void> {
    return this.#tasks.run(async () => {
      if (this.#dirty.size === 0) return;
      const bucket = await this.options.bus().bucket(Buckets.traces);
      for (const followed of [...this.#dirty]) {
        this.#dirty.delete(followed);
        await bucket.put(
          pushTraceKey(followed.ref, this.options.replica),
          Struct.wrap({ ...recordOf(followed, this.options.replica) }),
        );
      }
    });
  }

  /** Updates one type of one proxy in every followed change; update returns undefined for no change. */
  private each(
    connection: Connection,
    typeUrl: string,
    update: (type: ProxyTypeTrace) => ProxyTypeTrace | undefined,
  ): void {
    for (const followed of this.#followed.values()) {
      const proxy = this.proxyOf(followed, connection);
      const next = update(proxy.types.get(typeUrl) ?? {});
      if (!next) continue;
      proxy.types.set(typeUrl, next);
      this.#dirty.add(followed);
    }
  }

  private proxyOf(followed: Followed, connection: Connection) {
    let proxy = followed.proxies.get(connection.proxy.id);
    if (!proxy) {
      proxy = { types: new Map() };
      followed.proxies.set(connection.proxy.id, proxy);
    }
    return proxy;
  }

  /**
   * Reads ingest's trace ids of the changes and records the build as a span
   * linked to each: the config travels through KV, which carries no trace
   * context, so the id comes from ingest's record of the same generation.
   */
  private async link(changes: Followed[]): Promise<void> {
    const bucket = await this.options.bus().bucket(Buckets.traces);
    const links: Link[] = [];
    for (const followed of changes) {
      const entry = await bucket.get(configTraceKey(followed.ref));
      const stored = entry && (Struct.unwrap(entry.value) as unknown as ConfigTraceRecord);
      if (!stored || stored.generation !== followed.generation || stored.deleted !== followed.deleted)
        continue;
      followed.traceId = stored.traceId;
      this.#latestTraceId = stored.traceId;
      links.push({
        context: { traceId: stored.traceId, spanId: stored.spanId, traceFlags: TraceFlags.SAMPLED },
      });
    }
    const oldest = Math.min(...changes.map((followed) => followed.builtAt.getTime()));
    tracer
      .startSpan("push.build", {
        startTime: oldest,
        links,
        attributes: { "sextant.push.replica": this.options.replica, "sextant.push.changes": changes.length },
      })
      .end(oldest);
  }
}

function recordOf(followed: Followed, replica: string): PushTraceRecord {
  const proxies: Record<string, ProxyTrace> = {};
  for (const [id, proxy] of followed.proxies)
    proxies[id] = {
      ...(proxy.pushedAt ? { pushedAt: proxy.pushedAt } : {}),
      types: Object.fromEntries(proxy.types),
    };
  return {
    replica,
    generation: followed.generation,
    deleted: followed.deleted,
    builtAt: followed.builtAt.toISOString(),
    proxies,
  };
}
