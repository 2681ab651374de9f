import type { Logger } from "@sextant/observability";
import type { Watch, WatchEvent } from "./watch.js";

/** Options of TypedBucket.mirror(). */
export interface MirrorOptions {
  /** The keys to mirror (NATS subject syntax); every key if not given. */
  readonly filter?: string;
}

/** One key's net change since the subscriber's previous delivery. */
export interface MirrorChange<T> {
  readonly key: string;
  /** The value now; undefined if the key was deleted. */
  readonly value: T | undefined;
  /** The value the subscriber was last given; undefined if the key was new to it. */
  readonly previous: T | undefined;
}

/** What a subscriber receives: the state, and what changed since its previous delivery. */
export interface MirrorDelivery<T> {
  /** True for the first delivery, whose changes list every key of the state. */
  readonly initial: boolean;
  /** The mirror's state when the delivery was made; it includes every change listed. */
  readonly state: ReadonlyMap<string, T>;
  /** One per key, in the order of each key's latest change. */
  readonly changes: readonly MirrorChange<T>[];
}

/** Receives a subscription's deliveries, one at a time: the next waits for a returned promise. */
export type MirrorHandler<T> = (delivery: MirrorDelivery<T>) => void | Promise<void>;

/** A running subscription to a mirror. */
export interface MirrorSubscription {
  /** Resolves once the initial delivery has been handled, or the subscription closed. */
  readonly synced: Promise<void>;
  /** Ends the deliveries; resolves when a delivery in progress has been handled. */
  close(): Promise<void>;
}

/** How a mirror opens the watch it follows: TypedBucket.watch. */
type OpenWatch<T> = (handler: (event: WatchEvent<T>) => void, options: { filter?: string }) => Promise<Watch>;

/**
 * A bucket's keys as an immutable map that follows the bucket, in the manner
 * of Envoy Gateway's watchable.Map. One watch feeds any number of
 * subscribers. A subscriber slower than the changes does not queue them up:
 * while it handles a delivery, the changes of each key fold into one, so it
 * always catches up with the current state in a single delivery.
 */
export class Mirror<T> {
  /** Never changed once handed out as `state`: a change copies it first (copy on write). */
  #entries = new Map<string, T>();
  #state: ReadonlyMap<string, T> | undefined;
  readonly #subscribers = new Set<Subscriber<T>>();
  #watch: Watch | undefined;
  #ready: Promise<void> = Promise.resolve();
  #synced = false;
  #closed = false;

  private constructor(
    private readonly logger: Logger,
    private readonly bucketName: string,
  ) {}

  /** Opens a mirror on the watch openWatch starts; TypedBucket.mirror() is the way to call it. */
  static async open<T>(
    openWatch: OpenWatch<T>,
    options: MirrorOptions,
    logger: Logger,
    bucketName: string,
  ): Promise<Mirror<T>> {
    const mirror = new Mirror<T>(logger, bucketName);
    const watch = await openWatch(
      (event) => mirror.#apply(event),
      options.filter === undefined ? {} : { filter: options.filter },
    );
    mirror.#watch = watch;
    mirror.#ready = watch.ready.then(() => mirror.#markSynced());
    return mirror;
  }

  /** Resolves once the state stored when the mirror opened is in `state`. */
  get ready(): Promise<void> {
    return this.#ready;
  }

  /** The current state. It never changes: a later change gives a new map. */
  get state(): ReadonlyMap<string, T> {
    this.#state ??= new ReadonlyMapView(this.#entries);
    return this.#state;
  }

  /**
   * Calls handler with the state once the mirror is ready, then with each
   * batch of changes. Changes that arrive while handler runs are delivered
   * after it, one per key.
   */
  subscribe(handler: MirrorHandler<T>): MirrorSubscription {
    const subscriber = new Subscriber<T>(this, handler, (error) =>
      this.logger.error({ bucket: this.bucketName, err: error }, "mirror subscriber failed"),
    );
    if (this.#closed) {
      void subscriber.close();
      return subscriber;
    }
    this.#subscribers.add(subscriber);
    subscriber.schedule();
    return {
      synced: subscriber.synced,
      close: async () => {
        this.#subscribers.delete(subscriber);
        await subscriber.close();
      },
    };
  }

  /** True once the stored state is in; subscribers get no delivery before. */
  get synced(): boolean {
    return this.#synced;
  }

  /** Stops following the bucket and ends every subscription. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#watch?.stop();
    const subscribers = [...this.#subscribers];
    this.#subscribers.clear();
    await Promise.all(subscribers.map((subscriber) => subscriber.close()));
  }

  #apply(event: WatchEvent<T>): void {
    if (this.#closed) return;
    const known = this.#entries.has(event.key);
    // The replay includes the delete markers of keys this mirror never held.
    if (event.type === "delete" && !known) return;
    const previous = this.#entries.get(event.key);
    if (this.#state) {
      this.#entries = new Map(this.#entries);
      this.#state = undefined;
    }
    if (event.type === "put") this.#entries.set(event.key, event.value);
    else this.#entries.delete(event.key);
    const value = event.type === "put" ? event.value : undefined;
    for (const subscriber of this.#subscribers) subscriber.record(event.key, previous, value);
  }

  #markSynced(): void {
    if (this.#closed) return;
    this.#synced = true;
    for (const subscriber of this.#subscribers) subscriber.schedule();
  }
}

/** One subscription: its changes not yet delivered, and the delivery in progress. */
class Subscriber<T> implements MirrorSubscription {
  readonly synced: Promise<void>;
  #markSynced!: () => void;
  #awaitingInitial = true;
  #pending = new Map<string, { previous: T | undefined; value: T | undefined }>();
  #scheduled = false;
  #delivering: Promise<void> | undefined;
  #closed = false;

  constructor(
    private readonly mirror: Mirror<T>,
    private readonly handler: MirrorHandler<T>,
    private readonly onError: (error: unknown) => void,
  ) {
    this.synced = new Promise((resolve) => {
      this.#markSynced = resolve;
    });
  }

  /** Notes a change of key; the initial delivery, still to come, will include it anyway. */
  record(key: string, previous: T | undefined, value: T | undefined): void {
    if (this.#closed || this.#awaitingInitial) return;
    const earlier = this.#pending.get(key);
    // Moved to the end, so that changes are in the order of their latest change.
    if (earlier) this.#pending.delete(key);
    this.#pending.set(key, { previous: earlier ? earlier.previous : previous, value });
    this.schedule();
  }

  /**
   * Delivers on a later turn of the event loop, so that the changes the
   * watch hands over together arrive in one delivery.
   */
  schedule(): void {
    if (this.#closed || this.#scheduled || this.#delivering) return;
    if (this.#awaitingInitial ? !this.mirror.synced : this.#pending.size === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#delivering = this.#deliver().finally(() => {
        this.#delivering = undefined;
        this.schedule();
      });
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#pending.clear();
    this.#markSynced();
    await this.#delivering;
  }

  async #deliver(): Promise<void> {
    if (this.#closed) return;
    const initial = this.#awaitingInitial;
    this.#awaitingInitial = false;
    const state = this.mirror.state;
    const changes: MirrorChange<T>[] = [];
    if (initial) {
      for (const [key, value] of state) changes.push({ key, value, previous: undefined });
    } else {
      // Created and deleted since the previous delivery: nothing this subscriber saw changed.
      for (const [key, { previous, value }] of this.#pending)
        if (previous !== undefined || value !== undefined) changes.push({ key, value, previous });
      this.#pending = new Map();
      if (changes.length === 0) return;
    }
    try {
      await this.handler({ initial, state, changes });
    } catch (error) {
      this.onError(error);
    }
    if (initial) this.#markSynced();
  }
}

/** A read-only view of a map that its owner no longer changes. */
class ReadonlyMapView<K, V> implements ReadonlyMap<K, V> {
  readonly #map: ReadonlyMap<K, V>;

  constructor(map: ReadonlyMap<K, V>) {
    this.#map = map;
  }

  get size(): number {
    return this.#map.size;
  }

  get(key: K): V | undefined {
    return this.#map.get(key);
  }

  has(key: K): boolean {
    return this.#map.has(key);
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.#map) callback.call(thisArg, value, key, this);
  }

  entries() {
    return this.#map.entries();
  }

  keys() {
    return this.#map.keys();
  }

  values() {
    return this.#map.values();
  }

  [Symbol.iterator]() {
    return this.#map[Symbol.iterator]();
  }
}
