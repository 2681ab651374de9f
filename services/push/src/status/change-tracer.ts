import { type Link, TraceFlags, trace } from "@opentelemetry/api";
import { Buckets, type Bus, type Mirror, type MirrorSubscription } from "@sextant/bus";
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
import type { Connection, WatchState } from "../server/connection.js";

// Asked for at each span, not once at load: this module's @opentelemetry/api
// is the ES module build, the SDK registers itself through the CommonJS one,
// and a tracer taken from the ES build before the SDK starts never reaches it.
const tracer = () => trace.getTracer("@sextant/push");

/**
 * How many changes are followed at once. Each response and answer of every
 * proxy updates every followed change, so the newest ones are kept; an older
 * change's record stays in `sextant-traces` as last written.
 */
const MAX_FOLLOWED = 256;

/**
 * Stamps and spans waiting for one change's ids, at most: ingest writes its
 * record just after the change, so they wait milliseconds; the bound keeps a
 * change whose record never comes from holding memory for every response.
 */
const MAX_WAITING = 20_000;

/** How long the push.build span waits for ingest's records before it is made with the links it has. */
const LINK_WAIT_MS = 5_000;

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
  /** Ingest's trace and span ids of the change, once read. */
  traceId?: string;
  spanId?: string;
  /**
   * What waits for the ids: a build pushed at once (the debounce's leading
   * edge) can send before ingest's record of the change reaches push, so
   * the stamps and spans of those sends are made when it does.
   */
  readonly waiting: Array<() => void>;
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
  /** The newest change built: what is sent next carries it. */
  #latest: Followed | undefined;
  /** The change each type's last response (and last ACKed response) of a stream carried. */
  readonly #sentFor = new WeakMap<WatchState, Followed>();
  readonly #ackedFor = new WeakMap<WatchState, Followed>();
  #timer: NodeJS.Timeout | undefined;
  /**
   * Ingest's records (keys of three segments: kind.namespace.name), so that
   * a build knows its changes' trace ids at once: ingest writes a record just
   * after the change, usually within the debounce that precedes the build
   * (not always with the leading edge: see {@link Followed.waiting}).
   */
  #stored: ReadonlyMap<string, Struct> = new Map();
  #mirror: Mirror<Struct> | undefined;
  #subscription: MirrorSubscription | undefined;

  constructor(private readonly options: ChangeTracerOptions) {
    this.#tasks = new SerialTasks((error) =>
      options.logger.warn({ err: error }, "change traces not written; will retry"),
    );
  }

  async start(): Promise<void> {
    this.#mirror = await (await this.options.bus().bucket(Buckets.traces)).mirror({ filter: "*.*.*" });
    this.#subscription = this.#mirror.subscribe(({ state }) => {
      this.#stored = state;
      for (const followed of this.#followed.values()) if (!followed.traceId) this.identify(followed);
    });
    this.#timer = setInterval(() => void this.flush(), this.options.flushMs);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.#subscription?.close();
    await this.#mirror?.close();
    await this.flush();
  }

  /** A PushContext was built with these changes (the burst's first arrived at startedAt); called before it is pushed. */
  built(changes: readonly ConfigChangeRef[], startedAt: number): void {
    const builtAt = new Date();
    for (const change of changes) {
      const followed: Followed = {
        ref: parseConfigKey(change.key),
        generation: change.generation,
        deleted: change.deleted,
        builtAt,
        proxies: new Map(),
        waiting: [],
      };
      this.identify(followed);
      this.#latest = followed;
      this.#followed.delete(change.key);
      this.#followed.set(change.key, followed);
      this.#dirty.add(followed);
    }
    for (const key of [...this.#followed.keys()].slice(0, Math.max(0, this.#followed.size - MAX_FOLLOWED)))
      this.#followed.delete(key);
    const followed = changes.map((change) => this.#followed.get(change.key)!);
    this.recordBuild(followed, startedAt, builtAt.getTime());
    void this.#tasks.run(() => this.lookUp(followed));
  }

  /** A response of a type was sent to a proxy: every followed change not yet ACKed by it travelled in it. */
  sent(connection: Connection, typeUrl: string): void {
    const state = connection.watched.get(typeUrl);
    const change = this.#latest;
    if (state && change) {
      this.#sentFor.set(state, change);
      this.whenIdentified(change, () => {
        if (this.#sentFor.get(state) === change) state.traceIdSent = change.traceId;
      });
    }
    this.span("xds.send", connection, typeUrl, change);
    const now = new Date().toISOString();
    // The first response after the change carried it; later ones change nothing in its record.
    this.each(connection, typeUrl, (type) =>
      type.ackedAt || type.sentAt ? undefined : { ...type, sentAt: now },
    );
  }

  /** The proxy ACKed the latest response of a type. */
  acked(connection: Connection, typeUrl: string): void {
    const state = connection.watched.get(typeUrl);
    const change = state && this.#sentFor.get(state);
    if (state && change) {
      this.#ackedFor.set(state, change);
      this.whenIdentified(change, () => {
        if (this.#ackedFor.get(state) === change) state.traceIdAcked = change.traceId;
      });
    }
    this.span("xds.ack", connection, typeUrl, change);
    const now = new Date().toISOString();
    this.each(connection, typeUrl, (type) =>
      type.sentAt && !type.ackedAt ? { sentAt: type.sentAt, ackedAt: now } : undefined,
    );
  }

  /** The proxy NACKed the latest response of a type. */
  nacked(connection: Connection, typeUrl: string, message: string): void {
    const state = connection.watched.get(typeUrl);
    this.span("xds.nack", connection, typeUrl, state && this.#sentFor.get(state), {
      "xds.nack.message": message,
    });
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

  /** Ingest's record of the change push built, if it is of the same generation. */
  private storedRecord(followed: Followed, value: Struct | undefined): ConfigTraceRecord | undefined {
    const stored = value && (Struct.unwrap(value) as unknown as ConfigTraceRecord);
    return stored && stored.generation === followed.generation && stored.deleted === followed.deleted
      ? stored
      : undefined;
  }

  /** Sets the change's trace ids from the mirror of ingest's records, if it has delivered the record. */
  private identify(followed: Followed): void {
    this.identified(followed, this.storedRecord(followed, this.#stored.get(configTraceKey(followed.ref))));
  }

  /** Takes the ids from ingest's record (if any) and runs what waited for them. */
  private identified(followed: Followed, stored: ConfigTraceRecord | undefined): void {
    if (!stored || followed.traceId) return;
    followed.traceId = stored.traceId;
    followed.spanId = stored.spanId;
    for (const run of followed.waiting.splice(0)) run();
  }

  /** Runs now if the change's ids are known, else when they are (a change never identified drops it with its record). */
  private whenIdentified(followed: Followed, run: () => void): void {
    if (followed.traceId) run();
    else if (followed.waiting.length < MAX_WAITING) followed.waiting.push(run);
  }

  /**
   * A span of one proxy's part in a change (a response sent, its ACK or
   * NACK), linked to the change's config.store span; made when the change's
   * ids are known, with the time it happened. Without an OpenTelemetry SDK
   * the tracer's spans are no-ops.
   */
  private span(
    name: string,
    connection: Connection,
    typeUrl: string,
    change: Followed | undefined,
    attributes: Record<string, string> = {},
  ): void {
    const at = Date.now();
    const record = () => {
      tracer()
        .startSpan(name, {
          startTime: at,
          links: linkTo(change),
          attributes: { "sextant.proxy.id": connection.proxy.id, "xds.type_url": typeUrl, ...attributes },
        })
        .end(at);
    };
    if (change) this.whenIdentified(change, record);
    else record();
  }

  /** Reads ingest's records of the changes the mirror had not delivered by the build. */
  private async lookUp(changes: readonly Followed[]): Promise<void> {
    const bucket = await this.options.bus().bucket(Buckets.traces);
    for (const followed of changes) {
      if (followed.traceId) continue;
      this.identified(
        followed,
        this.storedRecord(followed, (await bucket.get(configTraceKey(followed.ref)))?.value),
      );
    }
  }

  /**
   * Records the build as a span linked to each change's config.store span:
   * the config travels through KV, which carries no trace context, so the
   * ids come from ingest's record of the same generation. The span is made
   * once every change's ids are known, or after LINK_WAIT_MS with those known.
   */
  private recordBuild(changes: readonly Followed[], startedAt: number, builtAt: number): void {
    const record = () =>
      // From the burst's first change to the snapshot: the debounce and the build.
      tracer()
        .startSpan("push.build", {
          startTime: startedAt,
          links: changes.flatMap(linkTo),
          attributes: {
            "sextant.push.replica": this.options.replica,
            "sextant.push.changes": changes.length,
          },
        })
        .end(builtAt);
    const unidentified = changes.filter((followed) => !followed.traceId);
    if (unidentified.length === 0) {
      record();
      return;
    }
    let recorded = false;
    const recordOnce = () => {
      if (recorded) return;
      recorded = true;
      clearTimeout(timer);
      record();
    };
    const timer = setTimeout(recordOnce, LINK_WAIT_MS).unref();
    for (const followed of unidentified)
      this.whenIdentified(followed, () => {
        if (unidentified.every((change) => change.traceId)) recordOnce();
      });
  }
}

/** The link to a change's config.store span, once its ids are known. */
function linkTo(change: Followed | undefined): Link[] {
  return change?.traceId && change.spanId
    ? [{ context: { traceId: change.traceId, spanId: change.spanId, traceFlags: TraceFlags.SAMPLED } }]
    : [];
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
