import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { JetStreamClient, JetStreamManager, PubAck } from "@nats-io/jetstream";
import type { KV, KvWatchEntry } from "@nats-io/kv";
import { Empty, headers, type QueuedIterator } from "@nats-io/nats-core";
import type { Logger } from "@sextant/observability";
import type { MessageCodec } from "@sextant/proto";
import { encodeCanonical } from "./codec.js";
import { Mirror, type MirrorOptions } from "./mirror.js";
import { DEFAULT_RETRY_POLICY, type RetryPolicy, retryTransient } from "./retry.js";
import type { Watch, WatchEvent } from "./watch.js";

/** The definition of a KV bucket: its name and the message type of its values. */
export interface BucketSpec<T> {
  readonly name: string;
  readonly codec: MessageCodec<T>;
  readonly description: string;
  /** How long a key lives after its last write (the bucket's TTL); forever if not given. */
  readonly ttlMs?: number;
}

/** Defines a bucket; see catalog.ts for Sextant's buckets. */
export function defineBucket<T>(
  name: string,
  codec: MessageCodec<T>,
  description: string,
  options: { ttlMs?: number } = {},
): BucketSpec<T> {
  return { name, codec, description, ...options };
}

/** A value read from a bucket, with the revision it was stored at. */
export interface Entry<T> {
  readonly key: string;
  readonly value: T;
  readonly revision: number;
  /** The stored bytes, so a writer can compare without encoding again. */
  readonly raw?: Uint8Array;
}

/** The outcome of a put: the revision now current, and whether anything was written. */
export interface PutResult {
  readonly revision: number;
  readonly changed: boolean;
}

export type { Watch, WatchEvent } from "./watch.js";

/** A read answered by a replica that lags behind this process's own write; retried. */
class StaleReadError extends Error {
  constructor(bucket: string, key: string, revision: number, own: number) {
    super(
      `${bucket}/${key}: a replica answered revision ${revision}, older than this process's write at ${own}`,
    );
    this.name = "StaleReadError";
  }
}

/** Thrown when a conditional write finds another revision than expected. */
export class RevisionConflictError extends Error {
  constructor(
    readonly key: string,
    readonly expectedRevision: number,
  ) {
    super(`key ${key} is no longer at revision ${expectedRevision}`);
    this.name = "RevisionConflictError";
  }
}

/** What a bucket needs beside its kv handle: the JetStream it publishes its writes to. */
export interface BucketContext {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  /** True once the connection is closed for good: watches stop resuming. */
  readonly connectionClosed?: () => boolean;
  /** How reads and writes ride out a leader change; {@link DEFAULT_RETRY_POLICY} by default. */
  readonly retry?: RetryPolicy;
}

/** The header that marks a KV record as a delete (the kv client's own convention). */
const KV_OPERATION_HEADER = "KV-Operation";
/** The JetStream publish deduplication header. */
const MSG_ID_HEADER = "Nats-Msg-Id";

/** How long a watch waits before resuming after its consumer went away. */
const WATCH_RESUME_DELAY_MS = 250;

/**
 * How often a watch checks that its server-side consumer still exists. The kv
 * client's watch uses an ephemeral push consumer that the server deletes after
 * a few seconds without interest (a long disconnect); the client then waits
 * forever without an error, so the watch must notice and resume by itself.
 */
const WATCH_LIVENESS_INTERVAL_MS = 3_000;

/**
 * A JetStream KV bucket whose values are protobuf messages of one type.
 * Writers never rewrite an unchanged value, so watchers only ever see real
 * changes; conditional writes use the KV revision.
 *
 * Reads and writes ride out a JetStream leader change (retried on timeouts,
 * no responders and 503s, with backoff, up to the retry policy's deadline,
 * then BusUnavailableError). A write is never applied twice: every attempt
 * carries the same Nats-Msg-Id, so a retry of a write that did land is
 * answered with the revision it landed at (JetStream's duplicate window),
 * and every write is conditional on the revision read, so a retry can never
 * clobber a newer write.
 */
export class TypedBucket<T> {
  private readonly connectionClosed: () => boolean;
  private readonly retry: RetryPolicy;
  /** The revision of this process's last write to each key (see #read): one number per key it wrote. */
  readonly #ownRevisions = new Map<string, number>();

  constructor(
    readonly spec: BucketSpec<T>,
    private readonly kv: KV,
    private readonly logger: Logger,
    private readonly context: BucketContext,
  ) {
    this.connectionClosed = context.connectionClosed ?? (() => false);
    const retry = context.retry ?? DEFAULT_RETRY_POLICY;
    // A retry must come while JetStream still remembers the first attempt's
    // message id: the duplicate window, which is the TTL when that is shorter.
    this.retry =
      spec.ttlMs === undefined ? retry : { ...retry, deadlineMs: Math.min(retry.deadlineMs, spec.ttlMs / 2) };
  }

  get name(): string {
    return this.spec.name;
  }

  /** Reads a key; undefined if it does not exist or was deleted. */
  async get(key: string): Promise<Entry<T> | undefined> {
    const entry = await this.#read(key);
    if (entry?.operation !== "PUT") return undefined;
    return { key, value: this.spec.codec.decode(entry.value), revision: entry.revision, raw: entry.value };
  }

  /**
   * The key's last record, a delete marker included; null if there is none.
   * Reads are direct gets, which any replica answers, also one that has not
   * applied the latest writes yet (NATS promises no read-your-writes for
   * them): a record older than this process's own last write to the key is
   * such a replica's, and is asked for again.
   */
  #read(key: string) {
    return retryTransient(
      `read of ${this.name}/${key}`,
      this.retry,
      async () => {
        const entry = await this.kv.get(key);
        const own = this.#ownRevisions.get(key) ?? 0;
        if ((entry?.revision ?? 0) < own) throw new StaleReadError(this.name, key, entry?.revision ?? 0, own);
        return entry;
      },
      (error) => this.logger.debug({ bucket: this.name, key, err: error }, "retrying a read"),
      (error) => error instanceof StaleReadError,
    );
  }

  /** Notes a revision this process wrote (see #read); not for a TTL bucket, whose keys vanish on their own. */
  #wrote(key: string, revision: number): void {
    if (this.spec.ttlMs !== undefined) return;
    if (revision > (this.#ownRevisions.get(key) ?? 0)) this.#ownRevisions.set(key, revision);
  }

  /**
   * Publishes one record for key (a value, or a delete marker when bytes is
   * undefined) on condition that the key is still at expectedRevision (0:
   * no record at all), and returns its revision. Retried across a leader
   * change with one message id for every attempt: JetStream checks the id
   * before the condition, so the retry of an attempt that landed is answered
   * with that attempt's revision instead of a wrong-last-sequence error.
   */
  async #publish(key: string, bytes: Uint8Array | undefined, expectedRevision: number): Promise<number> {
    const subject = `$KV.${this.name}.${key}`;
    const msgID = randomUUID();
    let uncertain = false;
    try {
      return await retryTransient(
        `write of ${this.name}/${key}`,
        this.retry,
        async (timeout) => {
          const ack: PubAck = await this.context.js.publish(subject, bytes ?? Empty, {
            msgID,
            expect: { lastSubjectSequence: expectedRevision },
            timeout,
            ...(bytes === undefined ? { headers: deleteHeaders() } : {}),
          });
          this.#wrote(key, ack.seq);
          return ack.seq;
        },
        (error, attempt) => {
          uncertain = true;
          this.logger.info(
            { bucket: this.name, key, attempt, err: (error as Error).message },
            "retrying a write across a JetStream leader change",
          );
        },
      );
    } catch (error) {
      // A wrong last sequence after an unanswered attempt may be that attempt
      // itself, applied after the retry was checked: the key's last record
      // carrying our message id says so.
      if (uncertain && isWrongLastSequence(error)) {
        const landed = await this.#landedRevision(subject, msgID);
        if (landed !== undefined) {
          this.#wrote(key, landed);
          return landed;
        }
      }
      throw error;
    }
  }

  /** The revision of subject's last record if it is the message msgID, else undefined. */
  async #landedRevision(subject: string, msgID: string): Promise<number | undefined> {
    const last = await retryTransient(`read of ${subject}`, this.retry, () =>
      this.context.jsm.direct.getMessage(`KV_${this.name}`, { last_by_subj: subject }),
    ).catch(() => null);
    return last?.header.get(MSG_ID_HEADER) === msgID ? last.seq : undefined;
  }

  /**
   * Stores a value unless the stored one has the same content. With
   * expectedRevision (0 for "must not exist"), the write happens only if the
   * key is still at that revision, otherwise RevisionConflictError.
   */
  async put(key: string, value: T, options: { expectedRevision?: number } = {}): Promise<PutResult> {
    for (;;) {
      const current = await this.get(key);
      if (options.expectedRevision !== undefined && options.expectedRevision !== (current?.revision ?? 0)) {
        throw new RevisionConflictError(key, options.expectedRevision);
      }
      try {
        // Conditional on what was just read, so a writer in between is
        // detected rather than overwritten.
        return await this.putOver(key, value, current);
      } catch (error) {
        if (!(error instanceof RevisionConflictError) || options.expectedRevision !== undefined) throw error;
        // A last-writer-wins put that raced with another writer: read again.
      }
    }
  }

  /**
   * Writes value over `current`, the entry the caller read with get()
   * (undefined: the key was absent), without reading it again: nothing is
   * written if the content is the same, and the write is conditional on
   * current's revision (RevisionConflictError if another writer got there
   * first). This is put() with the read already done, for read-modify-write
   * callers on a hot path.
   */
  async putOver(key: string, value: T, current: Entry<T> | undefined): Promise<PutResult> {
    const bytes = encodeCanonical(this.spec.codec, value);
    const currentBytes = current
      ? (current.raw ?? encodeCanonical(this.spec.codec, current.value))
      : undefined;
    if (current && currentBytes && Buffer.compare(Buffer.from(currentBytes), Buffer.from(bytes)) === 0) {
      return { revision: current.revision, changed: false };
    }
    try {
      return { revision: await this.#publish(key, bytes, current?.revision ?? 0), changed: true };
    } catch (error) {
      if (!isWrongLastSequence(error)) throw error;
      if (!current) {
        // "Absent" may be a delete marker, which holds a revision of its own:
        // write over it, still conditional, as the kv client's create() does.
        const last = await this.#read(key);
        if (last && last.operation !== "PUT") {
          return this.#publishOrConflict(key, bytes, last.revision, 0);
        }
      }
      throw new RevisionConflictError(key, current?.revision ?? 0);
    }
  }

  async #publishOrConflict(
    key: string,
    bytes: Uint8Array | undefined,
    revision: number,
    reportedRevision: number,
  ): Promise<PutResult> {
    try {
      return { revision: await this.#publish(key, bytes, revision), changed: true };
    } catch (error) {
      if (isWrongLastSequence(error)) throw new RevisionConflictError(key, reportedRevision);
      throw error;
    }
  }

  /**
   * Applies fn to the current value and stores the result, retrying when
   * another writer got there first. fn returning undefined deletes the key.
   */
  async update(
    key: string,
    fn: (current: T | undefined) => T | undefined,
    maxAttempts = 10,
  ): Promise<PutResult> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.get(key);
      const next = fn(current?.value);
      // fn handing back the current value means "no change": write nothing.
      if (current && next === current.value) return { revision: current.revision, changed: false };
      try {
        if (next === undefined) {
          const deleted = await this.delete(key, { expectedRevision: current?.revision ?? 0 });
          return { revision: current?.revision ?? 0, changed: deleted };
        }
        return await this.putOver(key, next, current);
      } catch (error) {
        if (!(error instanceof RevisionConflictError) && !isWrongLastSequence(error)) throw error;
        if (attempt >= maxAttempts) throw error;
      }
    }
  }

  /** Deletes a key; false (and no event) if it did not exist. */
  async delete(key: string, options: { expectedRevision?: number } = {}): Promise<boolean> {
    const current = await this.#read(key);
    const currentRevision = current && current.operation === "PUT" ? current.revision : 0;
    if (options.expectedRevision !== undefined && options.expectedRevision !== currentRevision) {
      throw new RevisionConflictError(key, options.expectedRevision);
    }
    if (currentRevision === 0) return false;
    try {
      await this.#publish(key, undefined, currentRevision);
    } catch (error) {
      if (!isWrongLastSequence(error)) throw error;
      if (options.expectedRevision !== undefined)
        throw new RevisionConflictError(key, options.expectedRevision);
      return this.delete(key);
    }
    return true;
  }

  /** Every current entry whose key matches the filter (NATS subject syntax). */
  async list(filter = ">"): Promise<Entry<T>[]> {
    const entries: Entry<T>[] = [];
    const watch = await this.watch(
      (event) => {
        if (event.type === "put")
          entries.push({ key: event.key, value: event.value, revision: event.revision });
      },
      { filter, replayOnly: true },
    );
    await watch.ready;
    await watch.stop();
    return entries;
  }

  /**
   * A replaying mirror of the keys matching options.filter: their current
   * values as an immutable map, and subscriptions that receive that state
   * first and then the changes, coalesced per key. Resolves once the watch
   * behind it is open; `ready` once the stored state is in.
   */
  mirror(options: MirrorOptions = {}): Promise<Mirror<T>> {
    return Mirror.open((handler, filter) => this.watch(handler, filter), options, this.logger, this.name);
  }

  /**
   * Delivers the current state (replay), then every later change, in order,
   * awaiting the handler for each. If the consumer goes away (a NATS restart),
   * the watch resumes after the last revision it delivered, so nothing is
   * missed and nothing is delivered twice.
   */
  async watch(
    handler: (event: WatchEvent<T>) => void | Promise<void>,
    options: { filter?: string; replayOnly?: boolean } = {},
  ): Promise<Watch> {
    let stopped = false;
    let iterator: QueuedIterator<KvWatchEntry> | undefined;
    let lastRevision = 0;
    let replaying = true;
    let markReady!: () => void;
    const ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    const finishReplay = () => {
      if (!replaying) return;
      replaying = false;
      markReady();
    };

    const open = async () => {
      iterator = await this.kv.watch({
        key: options.filter ?? ">",
        ...(lastRevision > 0 ? { resumeFromRevision: lastRevision + 1 } : {}),
      });
      if (replaying && (await consumerOf(iterator).info(true)).num_pending === 0) finishReplay();
      return iterator;
    };

    const liveness = setInterval(async () => {
      const current = iterator;
      if (!current || stopped || this.connectionClosed()) return;
      try {
        await consumerOf(current).info(false);
      } catch (error) {
        if (isConsumerNotFound(error) && current === iterator) {
          this.logger.warn({ bucket: this.name }, "watch consumer lost; resuming");
          current.stop();
        }
      }
    }, WATCH_LIVENESS_INTERVAL_MS);
    liveness.unref();

    const deliver = async (entry: KvWatchEntry) => {
      lastRevision = entry.revision;
      const replay = replaying;
      // The kv client marks the last entry of the initial state as an update.
      if (entry.isUpdate) finishReplay();
      try {
        if (entry.operation === "PUT") {
          let value: T;
          try {
            value = this.spec.codec.decode(entry.value);
          } catch (error) {
            this.logger.error(
              { bucket: this.name, key: entry.key, revision: entry.revision, err: error },
              "skipping a value that does not decode",
            );
            return;
          }
          await handler({ type: "put", key: entry.key, value, revision: entry.revision, replay });
        } else {
          await handler({ type: "delete", key: entry.key, revision: entry.revision, replay });
        }
      } catch (error) {
        this.logger.error({ bucket: this.name, key: entry.key, err: error }, "watch handler failed");
      }
    };

    const first = await open();
    const loop = (async () => {
      let current: QueuedIterator<KvWatchEntry> | undefined = first;
      while (!stopped && !this.connectionClosed()) {
        try {
          current ??= await open();
          for await (const entry of current) {
            await deliver(entry);
            if (options.replayOnly && !replaying) break;
          }
        } catch (error) {
          if (!stopped) this.logger.warn({ bucket: this.name, err: error }, "watch interrupted");
        }
        if (options.replayOnly && !replaying) break;
        current = undefined;
        if (!stopped && !this.connectionClosed()) {
          this.logger.info({ bucket: this.name, resumeFrom: lastRevision + 1 }, "resuming watch");
          await sleep(WATCH_RESUME_DELAY_MS);
        }
      }
    })();

    return {
      ready,
      stop: async () => {
        stopped = true;
        clearInterval(liveness);
        iterator?.stop();
        finishReplay();
        await loop;
      },
    };
  }
}

/**
 * The JetStream consumer behind a kv watch. The kv client keeps it on the
 * iterator without typing it. We need it twice: its pending count at creation
 * (with none pending there is no "last initial entry" to mark the replay
 * done) and a liveness check. The bus tests fail if a client upgrade moves it.
 */
function consumerOf(iterator: QueuedIterator<KvWatchEntry>): {
  info(cached: boolean): Promise<{ num_pending: number }>;
} {
  const consumer = (
    iterator as unknown as { _data?: { info(cached: boolean): Promise<{ num_pending: number }> } }
  )._data;
  if (!consumer)
    throw new Error("@nats-io/kv watch iterator no longer exposes its consumer; update consumerOf");
  return consumer;
}

function isConsumerNotFound(error: unknown): boolean {
  return error instanceof Error && /consumer not found/i.test(error.message);
}

function deleteHeaders() {
  const h = headers();
  h.set(KV_OPERATION_HEADER, "DEL");
  return h;
}

function isWrongLastSequence(error: unknown): boolean {
  return error instanceof Error && /wrong last sequence|key exists/i.test(error.message);
}
