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
 * When to rotate a certificate: with ratio × its lifetime left, the
 * lifetime counted from when the workload received it (istio-agent's
 * rotateTime, from the secret's CreatedTime: a CA backdates notBefore for
 * clock skew, so counting from notBefore would make a short-lived
 * certificate due on arrival). The ratio has a jitter drawn uniformly, so
 * that workloads started together do not all renew together. With the
 * defaults a fresh 24 h certificate rotates after about 12 h. Returns the
 * delay from now, at least MIN_ROTATION_DELAY_MS.
 */
export function rotationDelayMs(
  certificate: { notAfter: Date },
  policy: RotationPolicy,
  receivedAt: number,
  now = Date.now(),
  random = Math.random,
): number {
  const jitter = (random() * 2 - 1) * policy.gracePeriodRatioJitter;
  const ratio = Math.min(1, Math.max(0, policy.gracePeriodRatio + jitter));
  const notAfter = certificate.notAfter.getTime();
  const rotateAt = notAfter - (notAfter - receivedAt) * ratio;
  return Math.max(MIN_ROTATION_DELAY_MS, rotateAt - now);
}
