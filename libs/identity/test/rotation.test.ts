import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MIN_ROTATION_DELAY_MS, rotationDelayMs } from "../src/index.js";

const HOUR = 3600_000;
const now = Date.UTC(2026, 0, 1);
const fresh = (lifetimeMs: number) => ({ notAfter: new Date(now + lifetimeMs) });

describe("rotation schedule", () => {
  test("with Istio's defaults a fresh 24 h certificate rotates after 12 h, give or take 1% of its life", () => {
    const policy = { gracePeriodRatio: 0.5, gracePeriodRatioJitter: 0.01 };
    assert.equal(
      rotationDelayMs(fresh(24 * HOUR), policy, now, now, () => 0.5),
      12 * HOUR,
    );
    // random() = 0 and 1 are the ends of the jitter: ratio 0.49 and 0.51.
    assert.equal(
      rotationDelayMs(fresh(24 * HOUR), policy, now, now, () => 0),
      24 * HOUR * 0.51,
    );
    assert.equal(
      rotationDelayMs(fresh(24 * HOUR), policy, now, now, () => 1),
      24 * HOUR * 0.49,
    );
  });

  test("counts the lifetime from when the certificate arrived, not from its backdated notBefore", () => {
    const policy = { gracePeriodRatio: 0.5, gracePeriodRatioJitter: 0 };
    // A 60 s certificate whose notBefore the CA set a minute back: due 30 s after it arrived.
    assert.equal(rotationDelayMs(fresh(60_000), policy, now, now), 30_000);
  });

  test("time spent since it arrived shortens the wait", () => {
    const policy = { gracePeriodRatio: 0.25, gracePeriodRatioJitter: 0 };
    assert.equal(rotationDelayMs(fresh(4 * HOUR), policy, now, now + HOUR), 2 * HOUR);
  });

  test("a rotation already due waits the minimum, never a tight loop", () => {
    const policy = { gracePeriodRatio: 0.5, gracePeriodRatioJitter: 0 };
    assert.equal(rotationDelayMs(fresh(HOUR), policy, now, now + 2 * HOUR), MIN_ROTATION_DELAY_MS);
  });

  test("a 90-day certificate waits 45 days: longer than one setTimeout can", () => {
    const policy = { gracePeriodRatio: 0.5, gracePeriodRatioJitter: 0 };
    assert.equal(rotationDelayMs(fresh(90 * 24 * HOUR), policy, now, now), 45 * 24 * HOUR);
  });
});
