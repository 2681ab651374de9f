import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TokenBuckets } from "../src/token-buckets.js";

describe("TokenBuckets", () => {
  it("gives each key its burst, then one token per refill period, and other keys theirs", () => {
    let now = 0;
    const buckets = new TokenBuckets({ burst: 2, refillMs: 500, now: () => now });
    assert.equal(buckets.tryTake("a"), 0);
    assert.equal(buckets.tryTake("a"), 0);
    assert.equal(buckets.tryTake("a"), 500, "empty: a token is 500 ms away");
    assert.equal(buckets.tryTake("b"), 0, "another key is not held back");
    now = 200;
    assert.equal(buckets.waitMs("a"), 300);
    now = 500;
    assert.equal(buckets.tryTake("a"), 0);
    assert.equal(buckets.tryTake("a"), 500);
  });

  it("take counts even with no token left, and never below empty", () => {
    let now = 0;
    const buckets = new TokenBuckets({ burst: 1, refillMs: 1000, now: () => now });
    for (let i = 0; i < 5; i++) buckets.take("a");
    assert.equal(buckets.waitMs("a"), 1000);
    now = 1000;
    assert.equal(buckets.waitMs("a"), 0);
  });

  it("forgets keys whose buckets have grown back, so idle keys cost no memory", () => {
    let now = 0;
    const buckets = new TokenBuckets({ burst: 2, refillMs: 100, now: () => now });
    for (let i = 0; i < 1000; i++) buckets.take(`identity-${i}`);
    assert.equal(buckets.size, 1000);
    now = 1_000;
    buckets.take("late");
    assert.equal(buckets.size, 1, "the rested buckets were dropped");
  });

  it("keeps at most maxKeys, forgetting the least recently used", () => {
    const buckets = new TokenBuckets({ burst: 1, refillMs: 1000, maxKeys: 2, now: () => 0 });
    for (const key of ["a", "b", "c"]) buckets.take(key);
    assert.equal(buckets.size, 2);
    assert.equal(buckets.waitMs("a"), 0, "the oldest is forgotten");
    assert.equal(buckets.waitMs("c"), 1000);
  });

  it("refuses a burst below 1 or a refill period that is not positive", () => {
    assert.throws(() => new TokenBuckets({ burst: 0, refillMs: 1000 }), RangeError);
    assert.throws(() => new TokenBuckets({ burst: 1, refillMs: 0 }), RangeError);
  });
});
