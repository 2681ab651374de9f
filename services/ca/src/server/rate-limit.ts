import { TokenBuckets } from "@sextant/runtime";

/** CreateCertificate's allowance per SPIFFE identity, and how the refusal describes it. */
export interface IdentityRateLimit {
  readonly buckets: TokenBuckets;
  readonly description: string;
}

/** Identities remembered at once; idle ones are forgotten as soon as their burst has grown back. */
const MAX_IDENTITIES = 100_000;

/**
 * A token bucket per identity: `burst` requests at once, then `perMinute`.
 * undefined when perMinute is 0 (CA_RATE_LIMIT_PER_IDENTITY=0: no limit).
 */
export function identityRateLimit(
  perMinute: number,
  burst: number,
  now?: () => number,
): IdentityRateLimit | undefined {
  if (perMinute === 0) return undefined;
  return {
    buckets: new TokenBuckets({
      burst,
      refillMs: 60_000 / perMinute,
      maxKeys: MAX_IDENTITIES,
      ...(now ? { now } : {}),
    }),
    description: `at most ${perMinute} a minute after a burst of ${burst} (CA_RATE_LIMIT_PER_IDENTITY, CA_RATE_LIMIT_BURST)`,
  };
}
