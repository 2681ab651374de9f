/** The timers a {@link Debouncer} uses; tests pass a fake clock. */
export interface DebounceClock {
  now(): number;
  setTimer(callback: () => void, ms: number): unknown;
  clearTimer(timer: unknown): void;
}

const realClock: DebounceClock = {
  now: () => Date.now(),
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (timer) => clearTimeout(timer as NodeJS.Timeout),
};

/** Options of {@link Debouncer}. */
export interface DebounceOptions {
  /** Quiet time after a change before the merged changes are flushed (istiod: PILOT_DEBOUNCE_AFTER). */
  afterMs: number;
  /** Longest a burst can delay a flush, from its first change (istiod: PILOT_DEBOUNCE_MAX). */
  maxMs: number;
  /**
   * Flush a change that follows a quiet period at once, and debounce only
   * the changes that follow it within afterMs. Off: istiod's trailing
   * debounce, where every change waits at least afterMs.
   */
  leadingEdge: boolean;
  /** Called with the time of the burst's first change; the caller keeps what the changes were. */
  flush(firstAt: number): void;
  clock?: DebounceClock;
}

/**
 * Debouncer turns a stream of change notifications into flushes. Trailing
 * (istiod): a flush after afterMs without a change, or maxMs after the
 * burst's first change. Leading edge: a change that arrives after at least
 * afterMs without one is flushed at once; the changes that follow within
 * afterMs of a flush are merged and flushed trailing, so a lone change pays
 * no debounce and a burst still costs one push per window.
 */
export class Debouncer {
  readonly #clock: DebounceClock;
  #firstAt: number | undefined;
  #quietTimer: unknown;
  #maxTimer: unknown;
  /** Runs for afterMs after each flush: while it does, a change is part of the same burst. */
  #windowTimer: unknown;
  #flushes = 0;
  #leadingFlushes = 0;

  constructor(private readonly options: DebounceOptions) {
    this.#clock = options.clock ?? realClock;
  }

  /** Flushes so far, and how many of them were leading-edge (for tests and /metrics). */
  get counts(): { flushes: number; leading: number } {
    return { flushes: this.#flushes, leading: this.#leadingFlushes };
  }

  /** True if changes are waiting for a flush. */
  get pending(): boolean {
    return this.#firstAt !== undefined;
  }

  /** Records a change: flushes it at once after a quiet period (leading edge), or schedules the flush. */
  changed(): void {
    const now = this.#clock.now();
    const quiet = this.#firstAt === undefined && this.#windowTimer === undefined;
    this.#firstAt ??= now;
    if (this.options.leadingEdge && quiet) {
      this.#leadingFlushes += 1;
      this.flushNow();
      return;
    }
    if (this.#quietTimer !== undefined) this.#clock.clearTimer(this.#quietTimer);
    this.#quietTimer = this.#clock.setTimer(() => this.flushNow(), this.options.afterMs);
    this.#maxTimer ??= this.#clock.setTimer(() => this.flushNow(), this.options.maxMs);
  }

  /** Flushes what is pending now, if anything. */
  flushNow(): void {
    this.cancelTimers();
    const firstAt = this.#firstAt;
    this.#firstAt = undefined;
    if (firstAt === undefined) return;
    this.#flushes += 1;
    if (this.options.leadingEdge) {
      if (this.#windowTimer !== undefined) this.#clock.clearTimer(this.#windowTimer);
      this.#windowTimer = this.#clock.setTimer(() => {
        this.#windowTimer = undefined;
      }, this.options.afterMs);
    }
    this.options.flush(firstAt);
  }

  /** Forgets what is pending (the caller folded it into something else) and stops every timer. */
  reset(): void {
    this.cancelTimers();
    if (this.#windowTimer !== undefined) this.#clock.clearTimer(this.#windowTimer);
    this.#windowTimer = undefined;
    this.#firstAt = undefined;
  }

  private cancelTimers(): void {
    if (this.#quietTimer !== undefined) this.#clock.clearTimer(this.#quietTimer);
    if (this.#maxTimer !== undefined) this.#clock.clearTimer(this.#maxTimer);
    this.#quietTimer = undefined;
    this.#maxTimer = undefined;
  }
}
