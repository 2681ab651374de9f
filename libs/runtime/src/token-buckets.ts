/** Settings of {@link TokenBuckets}. */
export interface TokenBucketsOptions {
  /** Tokens a key has when it is new or has rested: what it may spend at once. */
  readonly burst: number;
  /** One token grows back every this many milliseconds, up to `burst`. */
  readonly refillMs: number;
  /** Keys remembered at most; past it the least recently used is forgotten (and gets a full bucket again). */
  readonly maxKeys?: number;
  readonly now?: () => number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * A token bucket per key (a source address, an identity), for rate limits
 * that must not let one key starve the others. Memory stays bounded: a
 * bucket that has grown back to `burst` is the same as none and is dropped,
 * the least recently used ones first as keys are used, and never more than
 * `maxKeys` are kept.
 */
export class TokenBuckets {
  // Map order is insertion order; a key is re-inserted on each use, so the first are the least recently used.
  readonly #buckets = new Map<string, Bucket>();
  readonly #now: () => number;
  readonly #maxKeys: number;

  constructor(private readonly options: TokenBucketsOptions) {
    if (!(options.burst >= 1) || !(options.refillMs > 0))
      throw new RangeError("TokenBuckets needs a burst of at least 1 and a positive refill period");
    this.#now = options.now ?? Date.now;
    this.#maxKeys = options.maxKeys ?? 10_000;
  }

  /** Milliseconds until the key has a whole token; 0 if it has one now. */
  waitMs(key: string): number {
    const bucket = this.#current(key);
    if (!bucket || bucket.tokens >= 1) return 0;
    return Math.ceil((1 - bucket.tokens) * this.options.refillMs);
  }

  /** Spends a token of the key's, going no lower than none (a failure is counted even when none is left). */
  take(key: string): void {
    const bucket = this.#current(key) ?? { tokens: this.options.burst, at: this.#now() };
    bucket.tokens = Math.max(0, bucket.tokens - 1);
    this.#buckets.delete(key);
    this.#buckets.set(key, bucket);
    this.#evict();
  }

  /** Spends a token if the key has one and returns 0; otherwise spends nothing and returns the milliseconds to wait. */
  tryTake(key: string): number {
    const wait = this.waitMs(key);
    if (wait === 0) this.take(key);
    return wait;
  }

  /** Keys remembered now (for tests and metrics). */
  get size(): number {
    return this.#buckets.size;
  }

  /** The key's bucket grown back to now; undefined (and forgotten) once full. */
  #current(key: string): Bucket | undefined {
    const bucket = this.#buckets.get(key);
    if (!bucket) return undefined;
    this.#refill(bucket);
    if (bucket.tokens >= this.options.burst) {
      this.#buckets.delete(key);
      return undefined;
    }
    return bucket;
  }

  #refill(bucket: Bucket): void {
    const now = this.#now();
    bucket.tokens = Math.min(this.options.burst, bucket.tokens + (now - bucket.at) / this.options.refillMs);
    bucket.at = now;
  }

  /** Drops the least recently used buckets while they are full again, and any beyond maxKeys. */
  #evict(): void {
    for (const [key, bucket] of this.#buckets) {
      if (this.#buckets.size > this.#maxKeys) {
        this.#buckets.delete(key);
        continue;
      }
      this.#refill(bucket);
      if (bucket.tokens < this.options.burst) break;
      this.#buckets.delete(key);
    }
  }
}
