// The parts of push's flow control on their own: the debounce (with a fake
// clock: pushes are counted, never timed), the per-stream send queue (with a
// transport that takes messages only when the test says so) and the push
// throttle. flow-control-ads.test.ts runs them over real streams.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DeltaDiscoveryResponse } from "@sextant/proto/envoy";
import { Debouncer } from "../src/server/debounce.js";
import { mergeDiffs } from "../src/server/delta-connection.js";
import { PushThrottle } from "../src/server/push-throttle.js";
import { MAX_UNFLUSHED, SendQueue, type SendQueueHooks } from "../src/server/send-queue.js";
import { FakeClock } from "./fake-clock.js";

function debouncer(leadingEdge: boolean, clock: FakeClock, afterMs = 100, maxMs = 1_000) {
  const flushes: number[] = [];
  const debounce = new Debouncer({
    afterMs,
    maxMs,
    leadingEdge,
    clock,
    flush: (firstAt) => flushes.push(firstAt),
  });
  return { debounce, flushes };
}

describe("Debouncer", () => {
  it("pushes the first change after a quiet period at once (leading edge), before any time passes", () => {
    const clock = new FakeClock();
    const { debounce, flushes } = debouncer(true, clock);
    debounce.changed();
    assert.deepEqual(flushes, [0], "flushed without the clock moving");
    assert.deepEqual(debounce.counts, { flushes: 1, leading: 1 });
  });

  it("merges the changes that follow within the window and pushes them once at its end", () => {
    const clock = new FakeClock();
    const { debounce, flushes } = debouncer(true, clock);
    debounce.changed();
    clock.advance(10);
    debounce.changed();
    clock.advance(10);
    debounce.changed();
    assert.equal(flushes.length, 1, "the two followers wait");
    clock.advance(99);
    assert.equal(flushes.length, 1, "still within afterMs of the last change");
    clock.advance(1);
    assert.deepEqual(flushes, [0, 10], "one trailing push, from the first follower");
    assert.deepEqual(debounce.counts, { flushes: 2, leading: 1 });
    // A change within afterMs of that push is still part of the burst.
    clock.advance(50);
    debounce.changed();
    assert.equal(flushes.length, 2);
    clock.advance(100);
    assert.equal(flushes.length, 3);
    // After afterMs of quiet, the next change is pushed at once again.
    clock.advance(100);
    debounce.changed();
    assert.equal(flushes.length, 4);
    assert.equal(debounce.counts.leading, 2);
  });

  it("pushes a burst that never goes quiet at maxMs after its first change", () => {
    const clock = new FakeClock();
    const { debounce, flushes } = debouncer(true, clock, 100, 1_000);
    debounce.changed(); // leading
    for (let t = 0; t < 1_500; t += 50) {
      clock.advance(50);
      debounce.changed();
    }
    // Followers from t=50: the max fires at 1050; then a new window starts.
    assert.equal(flushes[1], 50);
    assert.equal(flushes.length, 2, "one push per maxMs while changes keep coming");
  });

  it("keeps istiod's trailing debounce when leading edge is off: every push waits afterMs", () => {
    const clock = new FakeClock();
    const { debounce, flushes } = debouncer(false, clock);
    debounce.changed();
    assert.equal(flushes.length, 0);
    clock.advance(60);
    debounce.changed();
    clock.advance(99);
    assert.equal(flushes.length, 0, "quiet time restarts at each change");
    clock.advance(1);
    assert.deepEqual(flushes, [0]);
    clock.advance(1_000);
    debounce.changed();
    assert.equal(flushes.length, 1, "no leading edge after quiet either");
    clock.advance(100);
    assert.equal(flushes.length, 2);
    assert.equal(debounce.counts.leading, 0);
  });

  it("forgets what is pending on reset", () => {
    const clock = new FakeClock();
    const { debounce, flushes } = debouncer(false, clock);
    debounce.changed();
    debounce.reset();
    clock.advance(10_000);
    assert.equal(flushes.length, 0);
    assert.equal(debounce.pending, false);
  });
});

/** A transport that takes a message only when the test calls take(). */
class HeldTransport<Message> {
  readonly written: Message[] = [];
  readonly #callbacks: Array<() => void> = [];
  write(message: Message, callback: () => void): boolean {
    this.written.push(message);
    this.#callbacks.push(callback);
    return true;
  }
  /** The peer reads the oldest message still in the transport. */
  take(): void {
    this.#callbacks.shift()?.();
  }
  get inFlight(): number {
    return this.#callbacks.length;
  }
}

function hooks() {
  const counts = { sent: 0, superseded: 0, depth: 0 };
  const recorded: SendQueueHooks = {
    sent: () => {
      counts.sent += 1;
    },
    superseded: () => {
      counts.superseded += 1;
    },
    depth: (delta) => {
      counts.depth += delta;
    },
  };
  return { counts, recorded };
}

describe("SendQueue", () => {
  it("writes while the transport has room, then holds one message per type, the latest", async () => {
    const transport = new HeldTransport<string>();
    const { counts, recorded } = hooks();
    const queue = new SendQueue(transport, recorded);
    for (let i = 0; i < MAX_UNFLUSHED; i++) queue.send("cds", `cds-${i}`);
    assert.equal(transport.written.length, MAX_UNFLUSHED);
    for (let i = MAX_UNFLUSHED; i < 1_000; i++) {
      queue.send("cds", `cds-${i}`);
      queue.send("eds", `eds-${i}`);
    }
    assert.equal(
      transport.written.length,
      MAX_UNFLUSHED,
      "nothing more reaches a transport that is not read",
    );
    assert.deepEqual(
      [...queue.held],
      [
        ["cds", "cds-999"],
        ["eds", "eds-999"],
      ],
    );
    assert.equal(counts.superseded, 2 * (1_000 - MAX_UNFLUSHED) - 2);
    assert.equal(counts.depth, MAX_UNFLUSHED + 2, "the depth gauge counts what is in the transport and held");

    let flushed = false;
    let unblocked = false;
    const done = queue.flushed().then(() => {
      flushed = true;
    });
    const handedOver = queue.unblocked().then(() => {
      unblocked = true;
    });
    transport.take();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(!unblocked, "one message taken: room for one of the two held");
    transport.take();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(unblocked, "two taken: both held ones are in the transport");
    assert.ok(!flushed, "but the transport still has messages the peer has not read");
    await handedOver;
    // The peer reads again: the held messages follow, in the order their types were first held.
    while (transport.inFlight > 0) transport.take();
    await done;
    assert.ok(flushed);
    assert.deepEqual(transport.written.slice(MAX_UNFLUSHED), ["cds-999", "eds-999"]);
    assert.equal(counts.depth, 0);
    assert.equal(counts.sent, MAX_UNFLUSHED + 2);
  });

  it("sends straight through while the peer keeps up", () => {
    const transport = new HeldTransport<string>();
    const queue = new SendQueue(transport, hooks().recorded);
    for (let i = 0; i < 100; i++) {
      queue.send("lds", `lds-${i}`);
      transport.take();
    }
    assert.equal(transport.written.length, 100);
    assert.equal(queue.held.size, 0);
  });

  it("drops what is held when the stream closes, and releases whoever waits for the flush", async () => {
    const transport = new HeldTransport<string>();
    const { counts, recorded } = hooks();
    const queue = new SendQueue(transport, recorded);
    for (let i = 0; i < MAX_UNFLUSHED + 3; i++) queue.send(`type-${i % 2}`, `m-${i}`);
    const waiting = queue.flushed();
    queue.close();
    await waiting;
    assert.equal(queue.held.size, 0);
    assert.equal(counts.depth, 0);
    queue.send("cds", "after close");
    assert.equal(transport.written.length, MAX_UNFLUSHED);
  });
});

const resource = (name: string, version: string) => ({
  name,
  resourceName: undefined,
  aliases: [],
  version,
  resource: undefined,
  ttl: undefined,
  cacheControl: undefined,
  metadata: undefined,
});

function diff(
  nonce: string,
  resources: Array<[string, string]>,
  removedResources: string[] = [],
): DeltaDiscoveryResponse {
  return {
    systemVersionInfo: nonce,
    resources: resources.map(([name, version]) => resource(name, version)),
    typeUrl: "t",
    removedResources,
    removedResourceNames: [],
    nonce,
    controlPlane: undefined,
  };
}

describe("mergeDiffs (a delta response replacing an unsent one)", () => {
  it("leaves the proxy where both diffs would have: each name's latest fate, nothing of the older lost", () => {
    const older = diff(
      "n1",
      [
        ["a", "1"],
        ["b", "1"],
      ],
      ["c", "d"],
    );
    const newer = diff(
      "n2",
      [
        ["b", "2"],
        ["c", "2"],
      ],
      ["a", "e"],
    );
    const merged = mergeDiffs(older, newer);
    assert.equal(merged.nonce, "n2");
    assert.equal(merged.systemVersionInfo, "n2");
    assert.deepEqual(
      merged.resources.map((r) => [r.name, r.version]),
      [
        ["b", "2"],
        ["c", "2"],
      ],
    );
    assert.deepEqual(merged.removedResources, ["a", "d", "e"]);
  });
});

describe("PushThrottle", () => {
  it("never runs more than its limit at once, and serves waiters first come first served", async () => {
    const throttle = new PushThrottle(3);
    const started: number[] = [];
    const releases: Array<() => void> = [];
    const runs = Array.from({ length: 10 }, (_, i) =>
      throttle.run(
        () =>
          new Promise<void>((resolve) => {
            started.push(i);
            releases.push(resolve);
          }),
      ),
    );
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(started, [0, 1, 2]);
    assert.deepEqual(throttle.stats, { inFlight: 3, waiting: 7, peak: 3, throttled: 7 });
    while (started.length < 10) {
      releases.shift()?.();
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (const release of releases) release();
    await Promise.all(runs);
    assert.deepEqual(started, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "in arrival order");
    assert.equal(throttle.stats.peak, 3);
    assert.equal(throttle.stats.inFlight, 0);
  });
});
