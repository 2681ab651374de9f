import { setTimeout as sleep } from "node:timers/promises";
import {
  ExponentialBackoff,
  type GeneratorFn,
  halfJitterGenerator,
  type IBackoff,
  type IExponentialBackoffOptions,
  noJitterGenerator,
} from "cockatiel";

/**
 * How retries are spaced: the first delay, doubled after each failure up to
 * the most. A policy with initialMs equal to maxMs is a fixed delay.
 */
export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  /**
   * Spreads the delays, so that replicas that failed together do not come
   * back in step: "none" (exact), "half" (drawn from the upper half of the
   * delay) or "fifth" (within 20 % either side of it).
   */
  readonly jitter?: "none" | "half" | "fifth";
}

/** cockatiel has no ±20 % generator; this one scales its exact delay. */
const fifthJitterGenerator: GeneratorFn<number> = (attempts, options) => {
  const [delay, next] = noJitterGenerator(attempts, options);
  return [Math.round(delay * (0.8 + Math.random() * 0.4)), next];
};

const GENERATORS: Record<NonNullable<BackoffPolicy["jitter"]>, GeneratorFn<number>> = {
  none: noJitterGenerator,
  half: halfJitterGenerator,
  fifth: fifthJitterGenerator,
};

/**
 * The delays of a policy, one failure at a time. cockatiel computes them;
 * this holds its immutable backoff between failures that arrive as events
 * (a watch error, a failed key), where no retry loop exists to hold it.
 */
export class Backoff {
  readonly #factory: ExponentialBackoff<number>;
  #current: IBackoff<unknown> | undefined;
  #failures = 0;

  constructor(readonly policy: BackoffPolicy) {
    const options: Partial<IExponentialBackoffOptions<number>> = {
      initialDelay: policy.initialMs,
      maxDelay: policy.maxMs,
      generator: GENERATORS[policy.jitter ?? "none"],
    };
    this.#factory = new ExponentialBackoff(options);
  }

  /** Failures since the last reset. */
  get failures(): number {
    return this.#failures;
  }

  /** Counts a failure and returns the delay before the next attempt. */
  next(): number {
    this.#failures += 1;
    this.#current = (this.#current ?? this.#factory).next(undefined as never);
    return this.#current.duration;
  }

  /** Back to the first delay, after a success. */
  reset(): void {
    this.#failures = 0;
    this.#current = undefined;
  }
}

/** Options of {@link retry}. */
export interface RetryOptions {
  readonly backoff: BackoffPolicy;
  /** Stops retrying, during an attempt's wait too; retry then resolves undefined. */
  readonly signal?: AbortSignal;
  /** Told of each failure before its wait (to log it, or count it). */
  readonly onFailure?: (error: unknown, retryInMs: number) => void;
  /** False for an error that retrying cannot help: retry then rejects with it. */
  readonly retryable?: (error: unknown) => boolean;
  /** Whether the waits keep the process alive (default true: something awaits the result). */
  readonly keepAlive?: boolean;
  /** Asked after each wait: false stops retrying (e.g. the lease is gone), and retry resolves undefined. */
  readonly continueWhile?: () => boolean;
}

/**
 * Calls fn until it resolves, waiting the policy's delay after each failure.
 * Resolves fn's result, or undefined once the signal aborts.
 */
export async function retry<T>(fn: () => Promise<T>, options: RetryOptions): Promise<T | undefined> {
  const backoff = new Backoff(options.backoff);
  const { signal } = options;
  while (!signal?.aborted) {
    try {
      return await fn();
    } catch (error) {
      if (signal?.aborted) return undefined;
      if (options.retryable && !options.retryable(error)) throw error;
      const delay = backoff.next();
      options.onFailure?.(error, delay);
      const waited = await sleep(delay, true, { signal, ref: options.keepAlive ?? true }).catch(() => false);
      if (!waited || (options.continueWhile && !options.continueWhile())) return undefined;
    }
  }
  return undefined;
}
