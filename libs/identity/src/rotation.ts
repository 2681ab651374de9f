/** Istio's SECRET_GRACE_PERIOD_RATIO default: rotate with half the lifetime left. */
export const DEFAULT_GRACE_PERIOD_RATIO = 0.5;
/** Istio's SECRET_GRACE_PERIOD_RATIO_JITTER default. */
export const DEFAULT_GRACE_PERIOD_RATIO_JITTER = 0.01;
/**
 * The shortest wait before a rotation. A certificate whose grace period is
 * already under way (a lifetime shorter than asked for, a slow clock) would
 * otherwise be renewed in a tight loop against the CA.
 */
export const MIN_ROTATION_DELAY_MS = 1_000;

/** How rotation is timed: Istio's grace period ratio and its jitter. */
export interface RotationPolicy {
  gracePeriodRatio: number;
  gracePeriodRatioJitter: number;
}

/**
 * When to rotate a certificate: at notBefore + lifetime * (1 - ratio ± jitter),
 * the jitter drawn uniformly so that workloads started together do not all
 * renew together. With the defaults a fresh 24 h certificate rotates after
 * about 12 h. Returns the delay from now, at least MIN_ROTATION_DELAY_MS.
 */
export function rotationDelayMs(
  validity: { notBefore: Date; notAfter: Date },
  policy: RotationPolicy,
  now = Date.now(),
  random = Math.random,
): number {
  const jitter = (random() * 2 - 1) * policy.gracePeriodRatioJitter;
  const ratio = Math.min(1, Math.max(0, policy.gracePeriodRatio + jitter));
  const lifetime = validity.notAfter.getTime() - validity.notBefore.getTime();
  const rotateAt = validity.notBefore.getTime() + lifetime * (1 - ratio);
  return Math.max(MIN_ROTATION_DELAY_MS, rotateAt - now);
}
