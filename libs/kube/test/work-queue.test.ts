import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { WorkQueue } from "../src/index.js";

/** A paused queue that records the keys it processes. */
function pausedRecorder(): { queue: WorkQueue<string>; seen: string[] } {
  const seen: string[] = [];
  const queue = new WorkQueue<string>({
    process: async (key) => {
      seen.push(key);
    },
    retry: { initialMs: 10, maxMs: 10 },
    paused: true,
  });
  return { queue, seen };
}

describe("WorkQueue", () => {
  it("processes a key added several times while it waits once", async () => {
    const { queue, seen } = pausedRecorder();
    for (const key of ["a", "b", "a", "a", "c", "b"]) queue.add(key);
    queue.resume();
    await queue.idle();
    assert.deepEqual(seen, ["a", "b", "c"]);
  });

  it("queues a key added while it runs again, so the change is not missed", async () => {
    const seen: string[] = [];
    const queue = new WorkQueue<string>({
      process: async (key) => {
        seen.push(key);
        await sleep(5);
      },
      retry: { initialMs: 10, maxMs: 10 },
    });
    queue.add("a");
    await sleep(1);
    queue.add("a");
    await queue.idle();
    assert.deepEqual(seen, ["a", "a"]);
  });

  it("retries a failing key after its backoff, and only that key", async () => {
    const attempts = new Map<string, number>();
    const errors: Array<[string, number | undefined]> = [];
    const queue = new WorkQueue<string>({
      process: async (key) => {
        const n = (attempts.get(key) ?? 0) + 1;
        attempts.set(key, n);
        if (key === "flaky" && n < 3) throw new Error("not yet");
      },
      retry: { initialMs: 20, maxMs: 1_000 },
      onError: (key, _error, retryInMs) => errors.push([key, retryInMs]),
    });
    queue.add("flaky");
    queue.add("steady");
    await queue.idle();
    assert.deepEqual(Object.fromEntries(attempts), { flaky: 3, steady: 1 });
    assert.deepEqual(errors, [
      ["flaky", 20],
      ["flaky", 40],
    ]);
    assert.equal(queue.size, 0);
  });

  it("merges a value added for a waiting key, and keeps a failed value for the retry", async () => {
    const seen: Array<[string, number[]]> = [];
    let failOnce = true;
    const queue = new WorkQueue<string, number[]>({
      process: async (key, value) => {
        seen.push([key, value]);
        if (key === "b" && failOnce) {
          failOnce = false;
          throw new Error("once");
        }
      },
      merge: (waiting, added) => [...waiting, ...added],
      retry: { initialMs: 10, maxMs: 10 },
      paused: true,
    });
    queue.add("a", [1]);
    queue.add("b", [2]);
    queue.add("a", [3]);
    queue.resume();
    await queue.idle();
    assert.deepEqual(seen, [
      ["a", [1, 3]],
      ["b", [2]],
      ["b", [2]],
    ]);
  });

  it("without a retry policy, reports a failure and drops the key", async () => {
    const errors: Array<[string, number | undefined]> = [];
    let calls = 0;
    const queue = new WorkQueue<string>({
      process: async () => {
        calls += 1;
        throw new Error("no");
      },
      onError: (key, _error, retryInMs) => errors.push([key, retryInMs]),
    });
    queue.add("a");
    await queue.idle();
    assert.equal(calls, 1);
    assert.deepEqual(errors, [["a", undefined]]);
  });

  it("runs at most concurrency keys at once", async () => {
    let running = 0;
    let most = 0;
    const queue = new WorkQueue<number>({
      process: async () => {
        running += 1;
        most = Math.max(most, running);
        await sleep(5);
        running -= 1;
      },
      concurrency: 3,
      retry: { initialMs: 10, maxMs: 10 },
    });
    for (let key = 0; key < 20; key++) queue.add(key);
    await queue.idle();
    assert.equal(most, 3);
  });

  it("never processes one key twice at once: a key added during its pass runs after it, with the newest value", async () => {
    const running = new Set<string>();
    let sameKeyAtOnce = false;
    const passes: Array<[string, number]> = [];
    const queue = new WorkQueue<string, number>({
      process: async (key, value) => {
        if (running.has(key)) sameKeyAtOnce = true;
        running.add(key);
        // The first pass is slow, as a write behind a busy NATS would be.
        await sleep(value === 1 && key === "shard" ? 30 : 1);
        passes.push([key, value]);
        running.delete(key);
      },
      concurrency: 4,
    });
    queue.add("shard", 1);
    await sleep(5);
    // Other keys wake more drainers while "shard" is still in its first pass.
    queue.add("shard", 2);
    queue.add("other", 1);
    queue.add("another", 1);
    await queue.idle();
    assert.equal(sameKeyAtOnce, false, "one key was processed by two drainers at once");
    const shard = passes.filter(([key]) => key === "shard").map(([, value]) => value);
    assert.deepEqual(shard, [1, 2], "the newer value is processed after the older pass ends");
  });

  it("runs tasks in order with the keys, one at a time", async () => {
    const order: string[] = [];
    const queue = new WorkQueue<string>({
      process: async (key) => {
        await sleep(2);
        order.push(key);
      },
      retry: { initialMs: 10, maxMs: 10 },
    });
    queue.add("a");
    queue.add("b");
    await queue.run(async () => {
      order.push("task");
    });
    assert.deepEqual(order, ["a", "b", "task"]);
  });

  it("holds keys while paused, and is idle then", async () => {
    const { queue, seen } = pausedRecorder();
    queue.add("a");
    await queue.idle();
    assert.deepEqual(seen, []);
    assert.equal(queue.size, 1);
    queue.resume();
    await queue.idle();
    assert.deepEqual(seen, ["a"]);
  });

  it("forgets waiting keys and retries on close", async () => {
    let calls = 0;
    const queue = new WorkQueue<string>({
      process: async () => {
        calls += 1;
        throw new Error("down");
      },
      retry: { initialMs: 10, maxMs: 10 },
    });
    queue.add("a");
    await sleep(1);
    await queue.close();
    const after = calls;
    await sleep(30);
    assert.equal(calls, after, "no retry after close");
    queue.add("b");
    await queue.idle();
    assert.equal(calls, after, "nothing is added after close");
  });
});
