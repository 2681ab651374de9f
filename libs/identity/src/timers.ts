// Timers for background work that must neither keep a process alive on its
// own (unref) nor fire after close (cleared, or cut short by an AbortSignal).

/** setTimeout's largest delay (about 24.8 days); longer ones fire at once, so they are chained. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** A timer that can be cancelled. */
export interface Timer {
  clear(): void;
}

/**
 * Calls fn after delayMs, which may exceed setTimeout's limit (a 90-day
 * certificate rotates after 45 days). The timer does not keep the process alive.
 */
export function unrefTimeout(fn: () => void, delayMs: number): Timer {
  const fireAt = Date.now() + delayMs;
  let handle: NodeJS.Timeout;
  const arm = () => {
    const left = fireAt - Date.now();
    handle = setTimeout(left > MAX_TIMEOUT_MS ? arm : fn, Math.max(0, Math.min(left, MAX_TIMEOUT_MS)));
    handle.unref();
  };
  arm();
  return { clear: () => clearTimeout(handle) };
}

/**
 * Waits delayMs, or less if signal aborts; resolves false when aborted.
 * `keepAlive: false` lets the process exit meanwhile (background retries);
 * true keeps it alive, for waits something is awaiting (a start()).
 */
export function sleep(
  delayMs: number,
  signal: AbortSignal,
  options: { keepAlive: boolean },
): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(handle);
      resolve(false);
    };
    const handle = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    }, delayMs);
    if (!options.keepAlive) handle.unref();
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Capped exponential backoff with jitter: each delay is drawn from the upper
 * half of min(max, initial * 2^attempt), so many clients that failed together
 * do not retry together.
 */
export class Backoff {
  #attempt = 0;

  constructor(
    private readonly initialMs = 1_000,
    private readonly maxMs = 30_000,
  ) {}

  /** The delay before the next attempt. */
  next(): number {
    const ceiling = Math.min(this.maxMs, this.initialMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return ceiling / 2 + (Math.random() * ceiling) / 2;
  }

  /** Back to the initial delay, after a success. */
  reset(): void {
    this.#attempt = 0;
  }
}
