// Timers for background work that must neither keep a process alive on its
// own (unref) nor fire after close (cleared, or cut short by an AbortSignal).
import type { BackoffPolicy } from "@sextant/kube/retry";

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
 * Retries of calls to the CA: from 1 s, doubling up to 30 s, each delay drawn
 * from the upper half of that, so many clients that failed together do not
 * retry together.
 */
export const CA_RETRY: BackoffPolicy = { initialMs: 1_000, maxMs: 30_000, jitter: "half" };
