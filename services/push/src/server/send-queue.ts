/** The writable side of a gRPC stream: write's callback runs once the transport took the message. */
export interface WritableStream<Message> {
  write(message: Message, callback: (error?: Error | null) => void): boolean;
}

/** What a {@link SendQueue} reports (the DiscoveryServer records them as metrics). */
export interface SendQueueHooks {
  /** A message the transport took: seconds from write to its callback (istiod: pilot_xds_send_time). */
  sent(seconds: number): void;
  /** An unsent response replaced by a newer one of its type. */
  superseded(typeUrl: string): void;
  /** Messages held or in the transport changed by delta (a gauge over every stream). */
  depth(delta: number): void;
}

/** What a connection shows and controls of its send queue, whatever its message type. */
export interface SendQueueState {
  readonly held: ReadonlyMap<string, unknown>;
  readonly unflushed: number;
  flushed(): Promise<void>;
  unblocked(): Promise<void>;
  close(): void;
}

/**
 * Messages a stream may have in its transport at once before newer ones are
 * held back. HTTP/2 flow control stops a peer that does not read after one
 * window; past this, what the peer has not taken waits here, one per type.
 */
export const MAX_UNFLUSHED = 8;

/**
 * SendQueue is one stream's bounded send queue. A message goes to the
 * transport while fewer than {@link MAX_UNFLUSHED} wait there to be taken;
 * after that, each type holds at most one unsent message, and a newer one of
 * the same type replaces it (or is merged into it, for delta's diffs), so a
 * proxy that stops reading costs a bounded amount of memory however many
 * pushes it misses, and gets the latest state once it reads again. Held
 * messages go out in the order their types were first held (the push
 * order) as the transport takes earlier ones.
 */
export class SendQueue<Message> implements SendQueueState {
  readonly #held = new Map<string, Message>();
  #unflushed = 0;
  #closed = false;
  readonly #flushWaiters: Array<() => void> = [];
  readonly #unblockWaiters: Array<() => void> = [];

  constructor(
    private readonly stream: WritableStream<Message>,
    private readonly hooks: SendQueueHooks,
    /** Folds a newer message into an unsent one of the same type; without it the newer replaces it. */
    private readonly merge?: (unsent: Message, newer: Message) => Message,
  ) {}

  /** Sends a message, or holds it (replacing an unsent one of its type) while the transport is full. */
  send(typeUrl: string, message: Message): void {
    if (this.#closed) return;
    if (this.#held.size === 0 && this.#unflushed < MAX_UNFLUSHED) {
      this.write(message);
      return;
    }
    const unsent = this.#held.get(typeUrl);
    if (unsent === undefined) {
      this.#held.set(typeUrl, message);
      this.hooks.depth(1);
      return;
    }
    this.hooks.superseded(typeUrl);
    this.#held.set(typeUrl, this.merge ? this.merge(unsent, message) : message);
  }

  /** Messages held back, by type. */
  get held(): ReadonlyMap<string, Message> {
    return this.#held;
  }

  /** Messages written to the transport that it has not taken yet. */
  get unflushed(): number {
    return this.#unflushed;
  }

  /** Resolves once nothing is held or waiting in the transport, or the stream closed. */
  flushed(): Promise<void> {
    if (this.#closed || (this.#unflushed === 0 && this.#held.size === 0)) return Promise.resolve();
    return new Promise((resolve) => this.#flushWaiters.push(resolve));
  }

  /**
   * Resolves once nothing is held back, every message handed to the
   * transport (as gRPC-Go's Send returns once its message fits the
   * transport's window), or the stream closed.
   */
  unblocked(): Promise<void> {
    if (this.#closed || this.#held.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#unblockWaiters.push(resolve));
  }

  /** The stream is gone: drops what is held and releases every waiter. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.hooks.depth(-(this.#held.size + this.#unflushed));
    this.#held.clear();
    this.#unflushed = 0;
    this.wake();
  }

  private write(message: Message): void {
    this.#unflushed += 1;
    this.hooks.depth(1);
    const start = performance.now();
    this.stream.write(message, () => {
      if (this.#closed) return;
      this.#unflushed -= 1;
      this.hooks.depth(-1);
      this.hooks.sent((performance.now() - start) / 1000);
      this.drain();
    });
  }

  /** Moves held messages to the transport as it takes earlier ones. */
  private drain(): void {
    for (const [typeUrl, message] of this.#held) {
      if (this.#unflushed >= MAX_UNFLUSHED) return;
      this.#held.delete(typeUrl);
      this.hooks.depth(-1);
      this.write(message);
    }
    if (this.#held.size === 0) release(this.#unblockWaiters.splice(0));
    if (this.#unflushed === 0) release(this.#flushWaiters.splice(0));
  }

  private wake(): void {
    release(this.#unblockWaiters.splice(0));
    release(this.#flushWaiters.splice(0));
  }
}

function release(waiters: Array<() => void>): void {
  for (const resolve of waiters) resolve();
}
