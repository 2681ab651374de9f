import PQueue from "p-queue";
import { Backoff, type BackoffPolicy } from "./backoff.js";

/** Options of {@link WorkQueue}. */
export interface WorkQueueOptions<K, V> {
  /** Makes things right for one key; a rejection retries the key after the backoff. */
  readonly process: (key: K, value: V) => Promise<void>;
  /**
   * Folds a value added for a key that is already waiting into the waiting
   * one (e.g. two pushes into one); without it the later value replaces it.
   */
  readonly merge?: (waiting: V, added: V) => V;
  /** Keys processed at once (default 1: one at a time, in order). */
  readonly concurrency?: number;
  /**
   * The delays before a failed key is tried again, per key; started over when
   * the key succeeds. Without it a failure is only reported.
   */
  readonly retry?: BackoffPolicy;
  /** Told of each failure (to log or count it), with the delay before the key's next try if it has one. */
  readonly onError?: (key: K, error: unknown, retryInMs: number | undefined) => void;
  /** Starts paused (see {@link WorkQueue.pause}). */
  readonly paused?: boolean;
}

/** A failed key waiting for its retry. */
interface Retry<V> {
  readonly backoff: Backoff;
  value: V;
  timer?: NodeJS.Timeout;
}

/**
 * A queue of keys to reconcile, as client-go's workqueue: a key added again
 * while it waits is processed once, so a burst of events for one object
 * costs one pass, which reads the current state rather than replaying each
 * event (a key may carry a value, which is merged instead). A key that fails
 * is added again after its own backoff. A key is never processed twice at
 * once: one added while it is being processed waits for that pass to end, so
 * an older pass can never finish after a newer one and undo it (a stale
 * write, a stale push).
 *
 * p-queue bounds the work in flight: each of its tasks is a drainer that
 * processes waiting keys one after another until none is left, so a key
 * costs a map entry rather than a p-queue task (thousands of keys a second
 * for push), and at most `concurrency` keys run at once.
 */
export class WorkQueue<K, V = void> {
  readonly #queue: PQueue;
  readonly #concurrency: number;
  readonly #waiting = new Map<K, V>();
  /** Keys being processed now: a drainer skips them until their pass ends. */
  readonly #processing = new Set<K>();
  readonly #retries = new Map<K, Retry<V>>();
  #idleWaiters: Array<() => void> = [];
  /** Drainers queued in p-queue or running. */
  #drainers = 0;
  #closed = false;

  constructor(private readonly options: WorkQueueOptions<K, V>) {
    this.#concurrency = options.concurrency ?? 1;
    this.#queue = new PQueue({ concurrency: this.#concurrency, autoStart: !options.paused });
    // "next" follows each task once p-queue no longer counts it as running.
    this.#queue.on("next", () => this.#settle());
  }

  /** Keys waiting to be processed, or to be tried again after a failure. */
  get size(): number {
    let retrying = 0;
    for (const { timer } of this.#retries.values()) if (timer) retrying += 1;
    return this.#waiting.size + retrying;
  }

  /** Queues key, or merges value into its waiting one. A key being processed is queued again. */
  add(key: K, value: V): void {
    if (this.#closed) return;
    if (this.#waiting.has(key)) {
      this.#waiting.set(key, this.#merge(this.#waiting.get(key) as V, value));
      return;
    }
    const retrying = this.#retries.get(key);
    if (retrying?.timer) {
      // Its retry is due anyway: run it now, with what failed folded in, keeping its backoff.
      clearTimeout(retrying.timer);
      retrying.timer = undefined;
      value = this.#merge(retrying.value, value);
    }
    this.#waiting.set(key, value);
    this.#startDrainers();
  }

  /** Runs task after the drainers queued before it; never beside a key when concurrency is 1. */
  async run(task: () => Promise<void>): Promise<void> {
    await this.#queue.add(task);
  }

  /** Stops starting keys; keys added meanwhile wait. Keys already running finish. */
  pause(): void {
    this.#queue.pause();
    this.#settle();
  }

  resume(): void {
    this.#queue.start();
    this.#startDrainers();
  }

  /**
   * Resolves once nothing waits, runs or is due for a retry, or the queue
   * is paused with nothing running, or it is closed.
   */
  idle(): Promise<void> {
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Forgets every waiting key and pending retry; resolves once the running ones have finished. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const { timer } of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
    this.#waiting.clear();
    this.#queue.clear();
    await this.#queue.onIdle();
    for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }

  #merge(waiting: V, added: V): V {
    return this.options.merge ? this.options.merge(waiting, added) : added;
  }

  /** Enough drainers for the waiting keys, up to the concurrency. */
  #startDrainers(): void {
    if (this.#queue.isPaused) return;
    while (this.#drainers < Math.min(this.#concurrency, this.#waiting.size)) {
      this.#drainers += 1;
      void this.#queue.add(() => this.#drain());
    }
  }

  async #drain(): Promise<void> {
    try {
      while (!this.#closed && !this.#queue.isPaused) {
        const next = this.#nextIdleKey();
        if (!next) return;
        const [key, value] = next;
        this.#waiting.delete(key);
        this.#processing.add(key);
        try {
          await this.#process(key, value);
        } finally {
          this.#processing.delete(key);
        }
      }
    } finally {
      this.#drainers -= 1;
    }
  }

  /** The first waiting key that is not being processed (the drainer that processes one picks it up after). */
  #nextIdleKey(): [K, V] | undefined {
    for (const entry of this.#waiting) if (!this.#processing.has(entry[0])) return entry;
    return undefined;
  }

  async #process(key: K, value: V): Promise<void> {
    try {
      await this.options.process(key, value);
      const retrying = this.#retries.get(key);
      if (retrying && !retrying.timer) this.#retries.delete(key);
    } catch (error) {
      if (this.#closed) return;
      if (!this.options.retry) {
        this.options.onError?.(key, error, undefined);
        return;
      }
      const retrying = this.#retries.get(key) ?? { backoff: new Backoff(this.options.retry), value };
      const delay = retrying.backoff.next();
      clearTimeout(retrying.timer);
      retrying.value = value;
      retrying.timer = setTimeout(() => {
        retrying.timer = undefined;
        this.add(key, retrying.value);
      }, delay);
      this.#retries.set(key, retrying);
      this.options.onError?.(key, error, delay);
    }
  }

  #isIdle(): boolean {
    if (this.#closed) return true;
    if (this.#queue.pending > 0) return false;
    if (this.#queue.isPaused) return true;
    return this.#queue.size === 0 && this.size === 0;
  }

  #settle(): void {
    if (this.#idleWaiters.length > 0 && this.#isIdle())
      for (const resolve of this.#idleWaiters.splice(0)) resolve();
  }
}
