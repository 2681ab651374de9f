import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Backoff, retry } from "../src/index.js";

describe("Backoff", () => {
  it("doubles from the first delay up to the most, and starts over after a reset", () => {
    const backoff = new Backoff({ initialMs: 200, maxMs: 5_000 });
    const delays = Array.from({ length: 7 }, () => backoff.next());
    assert.deepEqual(delays, [200, 400, 800, 1_600, 3_200, 5_000, 5_000]);
    assert.equal(backoff.failures, 7);
    backoff.reset();
    assert.equal(backoff.failures, 0);
    assert.equal(backoff.next(), 200);
  });

  it("is a fixed delay when the first and the most are equal", () => {
    const backoff = new Backoff({ initialMs: 500, maxMs: 500 });
    assert.deepEqual([backoff.next(), backoff.next(), backoff.next()], [500, 500, 500]);
  });

  it("spreads delays over the upper half with half jitter, within a fifth with fifth jitter", () => {
    for (let run = 0; run < 50; run++) {
      const half = new Backoff({ initialMs: 1_000, maxMs: 30_000, jitter: "half" });
      const fifth = new Backoff({ initialMs: 200, maxMs: 30_000, jitter: "fifth" });
      for (const ceiling of [1_000, 2_000, 4_000]) {
        const delay = half.next();
        assert.ok(delay >= ceiling / 2 && delay <= ceiling, `${delay} in [${ceiling / 2}, ${ceiling}]`);
      }
      for (const base of [200, 400, 800]) {
        const delay = fifth.next();
        assert.ok(delay >= base * 0.8 && delay <= base * 1.2, `${delay} within 20 % of ${base}`);
      }
    }
  });
});

describe("retry", () => {
  it("calls until it succeeds, telling each failure and its delay", async () => {
    let calls = 0;
    const failures: Array<[string, number]> = [];
    const result = await retry(
      async () => {
        calls += 1;
        if (calls < 3) throw new Error(`failure ${calls}`);
        return "done";
      },
      {
        backoff: { initialMs: 5, maxMs: 20 },
        onFailure: (error, retryInMs) => failures.push([(error as Error).message, retryInMs]),
      },
    );
    assert.equal(result, "done");
    assert.deepEqual(failures, [
      ["failure 1", 5],
      ["failure 2", 10],
    ]);
  });

  it("resolves undefined once its signal aborts, without waiting out the delay", async () => {
    const controller = new AbortController();
    const started = Date.now();
    const result = retry(
      async () => {
        throw new Error("down");
      },
      { backoff: { initialMs: 60_000, maxMs: 60_000 }, signal: controller.signal },
    );
    setTimeout(() => controller.abort(), 20);
    assert.equal(await result, undefined);
    assert.ok(Date.now() - started < 5_000);
  });

  it("stops once continueWhile says so after a wait", async () => {
    let calls = 0;
    const result = await retry(
      async () => {
        calls += 1;
        throw new Error("down");
      },
      { backoff: { initialMs: 1, maxMs: 1 }, continueWhile: () => calls < 3 },
    );
    assert.equal(result, undefined);
    assert.equal(calls, 3);
  });

  it("rejects with an error that retrying cannot help", async () => {
    let calls = 0;
    await assert.rejects(
      retry(
        async () => {
          calls += 1;
          throw new Error("forbidden");
        },
        {
          backoff: { initialMs: 1, maxMs: 1 },
          retryable: (error) => (error as Error).message !== "forbidden",
        },
      ),
      /forbidden/,
    );
    assert.equal(calls, 1);
  });
});
