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

interface Bucket {
  allowance: number;
  at: number;
}

/**
 * Limits failed authentications per source address with a token bucket:
 * each failure takes one from the address's allowance of `burst`, which
 * grows back by one every `refillMs`. An address with nothing left is
 * refused before its token is even looked at, so guessing tokens runs at
 * the refill rate at most, while other addresses are served as usual.
 */
export class FailureLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private readonly now: () => number;
  private readonly maxAddresses: number;

  constructor(private readonly options: FailureLimiterOptions) {
    this.now = options.now ?? Date.now;
    this.maxAddresses = options.maxAddresses ?? 10_000;
  }

  /** Seconds until the address may try again, or undefined if it may now. */
  refused(address: string): number | undefined {
    const bucket = this.current(address);
    if (!bucket || bucket.allowance >= 1) return undefined;
    return Math.max(1, Math.ceil(((1 - bucket.allowance) * this.options.refillMs) / 1000));
  }

  /** Counts a failed authentication from the address. */
  failed(address: string): void {
    const bucket = this.current(address) ?? { allowance: this.options.burst, at: this.now() };
    bucket.allowance = Math.max(0, bucket.allowance - 1);
    this.buckets.delete(address);
    this.buckets.set(address, bucket);
    // Map order is insertion order: the first keys are the least recently failed.
    for (const oldest of this.buckets.keys()) {
      if (this.buckets.size <= this.maxAddresses) break;
      this.buckets.delete(oldest);
    }
  }

  /** The address's bucket refilled to now; undefined (and forgotten) once full again. */
  private current(address: string): Bucket | undefined {
    const bucket = this.buckets.get(address);
    if (!bucket) return undefined;
    const now = this.now();
    bucket.allowance = Math.min(
      this.options.burst,
      bucket.allowance + (now - bucket.at) / this.options.refillMs,
    );
    bucket.at = now;
    if (bucket.allowance >= this.options.burst) {
      this.buckets.delete(address);
      return undefined;
    }
    return bucket;
  }
}
