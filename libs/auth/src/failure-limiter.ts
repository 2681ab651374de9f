import { TokenBuckets } from "@sextant/runtime";

/** Settings of a {@link FailureLimiter}. */
export interface FailureLimiterOptions {
  /** Failures an address may have in a row before it is refused. */
  readonly burst: number;
  /** One more failure is allowed back every this many milliseconds. */
  readonly refillMs: number;
  /** Addresses remembered at most; the oldest are forgotten first. */
  readonly maxAddresses?: number;
  readonly now?: () => number;
}

/**
 * Limits failed authentications per source address with a token bucket:
 * each failure takes one from the address's allowance of `burst`, which
 * grows back by one every `refillMs`. An address with nothing left is
 * refused before its token is even looked at, so guessing tokens runs at
 * the refill rate at most, while other addresses are served as usual.
 */
export class FailureLimiter {
  readonly #buckets: TokenBuckets;

  constructor(options: FailureLimiterOptions) {
    this.#buckets = new TokenBuckets({
      burst: options.burst,
      refillMs: options.refillMs,
      maxKeys: options.maxAddresses ?? 10_000,
      ...(options.now ? { now: options.now } : {}),
    });
  }

  /** Seconds until the address may try again, or undefined if it may now. */
  refused(address: string): number | undefined {
    const waitMs = this.#buckets.waitMs(address);
    return waitMs === 0 ? undefined : Math.max(1, Math.ceil(waitMs / 1000));
  }

  /** Counts a failed authentication from the address. */
  failed(address: string): void {
    this.#buckets.take(address);
  }
}
