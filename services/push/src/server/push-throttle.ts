/** What a {@link PushThrottle} reports (the DiscoveryServer records them as metrics). */
export interface PushThrottleHooks {
  /** A push found every slot taken and waits for one. */
  throttled(): void;
  /** A push got its slot: seconds it waited for one (istiod: pilot_proxy_queue_time). */
  dequeued(waitedSeconds: number): void;
  /** Slots in use or pushes waiting changed. */
  changed(inFlight: number, waiting: number): void;
}

/**
 * PushThrottle bounds the pushes in flight at once (istiod's
 * concurrentPushLimit, PILOT_PUSH_THROTTLE). Initial pushes of new streams
 * and pushes of changes share its slots, and pushes waiting for one are
 * served first come first served, so a burst of reconnects is served in
 * arrival order and no stream is starved by later ones.
 */
export class PushThrottle {
  #inFlight = 0;
  #peak = 0;
  #throttled = 0;
  readonly #waiting: Array<{ readonly start: () => void; readonly queuedAt: number }> = [];

  constructor(
    readonly limit: number,
    private readonly hooks?: PushThrottleHooks,
  ) {}

  /** Runs task in a slot once one is free (FIFO), holding the slot until task settles. */
  async run<T>(task: () => T | Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await task();
    } finally {
      this.release();
    }
  }

  /** Slots in use, pushes waiting, the most slots ever in use at once, and pushes that had to wait. */
  get stats(): { inFlight: number; waiting: number; peak: number; throttled: number } {
    return {
      inFlight: this.#inFlight,
      waiting: this.#waiting.length,
      peak: this.#peak,
      throttled: this.#throttled,
    };
  }

  private acquire(): Promise<void> {
    if (this.#inFlight < this.limit && this.#waiting.length === 0) {
      this.take();
      this.hooks?.dequeued(0);
      return Promise.resolve();
    }
    this.#throttled += 1;
    this.hooks?.throttled();
    return new Promise((resolve) => {
      this.#waiting.push({ start: resolve, queuedAt: performance.now() });
      this.hooks?.changed(this.#inFlight, this.#waiting.length);
    });
  }

  private release(): void {
    this.#inFlight -= 1;
    const next = this.#waiting.shift();
    if (!next) {
      this.hooks?.changed(this.#inFlight, this.#waiting.length);
      return;
    }
    // The slot passes to the longest waiting push.
    this.take();
    this.hooks?.dequeued((performance.now() - next.queuedAt) / 1000);
    next.start();
  }

  private take(): void {
    this.#inFlight += 1;
    this.#peak = Math.max(this.#peak, this.#inFlight);
    this.hooks?.changed(this.#inFlight, this.#waiting.length);
  }
}
