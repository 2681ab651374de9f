import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createLogger } from "@sextant/observability";
import { ConfigResource } from "@sextant/proto";
import { eventually, NATS_TOPOLOGIES, type NatsTopology, startNatsTopology } from "@sextant/testing";
import { type Bus, connectBus, defineBucket, type MirrorDelivery } from "../src/index.js";

const logger = createLogger({
  service: "bus-mirror-test",
  level: (process.env.TEST_LOG_LEVEL as "info") ?? "silent",
});

function resource(name: string, generation = 1): ConfigResource {
  return ConfigResource.fromPartial({
    kind: "VirtualService",
    apiVersion: "networking.istio.io/v1",
    namespace: "default",
    name,
    generation,
    spec: { hosts: [name] },
  });
}

/** A delivery reduced to what the assertions compare: key → generation, or null for a delete. */
function summary(delivery: MirrorDelivery<ConfigResource>) {
  return {
    initial: delivery.initial,
    state: Object.fromEntries([...delivery.state].map(([key, value]) => [key, value.generation])),
    changes: delivery.changes.map((change) => [
      change.key,
      change.value?.generation ?? null,
      change.previous?.generation ?? null,
    ]),
  };
}

/** A promise with its resolve function, for holding a subscriber inside its handler. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

for (const kind of NATS_TOPOLOGIES) {
  describe(`bucket.mirror() against a real NATS (${kind})`, () => {
    let nats: NatsTopology;
    let bus: Bus;
    let bucketCount = 0;
    const freshBucket = () =>
      bus.bucket(defineBucket(`mirror-${process.pid}-${++bucketCount}`, ConfigResource, "test bucket"));

    before(async () => {
      nats = await startNatsTopology(kind);
      bus = await connectBus({ url: nats.url, name: "bus-mirror-test", logger, replicas: nats.replicas });
    });
    after(async () => {
      await bus?.close();
      await nats?.dispose();
    });

    it("replays the stored state as an immutable map and as the first delivery", async () => {
      const bucket = await freshBucket();
      await bucket.put("a", resource("a"));
      await bucket.put("b", resource("b"));
      await bucket.put("gone", resource("gone"));
      await bucket.delete("gone");
      const mirror = await bucket.mirror();
      const deliveries: ReturnType<typeof summary>[] = [];
      const subscription = mirror.subscribe((delivery) => {
        deliveries.push(summary(delivery));
      });
      await mirror.ready;
      const state = mirror.state;
      assert.deepEqual([...state.keys()], ["a", "b"]);
      assert.equal(state.get("a")?.name, "a");
      assert.equal("set" in state, false, "the state offers no way to change it");
      await subscription.synced;
      assert.deepEqual(deliveries, [
        {
          initial: true,
          state: { a: 1, b: 1 },
          changes: [
            ["a", 1, null],
            ["b", 1, null],
          ],
        },
      ]);

      await bucket.put("c", resource("c"));
      await eventually(() => mirror.state.has("c"), { message: "the mirror did not follow the put" });
      assert.deepEqual([...state.keys()], ["a", "b"], "a state handed out never changes");
      await mirror.close();
    });

    it("gives a subscriber that comes late the current state first", async () => {
      const bucket = await freshBucket();
      await bucket.put("a", resource("a"));
      const mirror = await bucket.mirror();
      await mirror.ready;
      await bucket.put("a", resource("a", 2));
      await eventually(() => mirror.state.get("a")?.generation === 2);
      const deliveries: ReturnType<typeof summary>[] = [];
      const subscription = mirror.subscribe((delivery) => {
        deliveries.push(summary(delivery));
      });
      await subscription.synced;
      assert.deepEqual(deliveries, [{ initial: true, state: { a: 2 }, changes: [["a", 2, null]] }]);
      await mirror.close();
    });

    it("delivers on an empty bucket, then puts and deletes with the value before", async () => {
      const bucket = await freshBucket();
      const mirror = await bucket.mirror();
      const deliveries: ReturnType<typeof summary>[] = [];
      const subscription = mirror.subscribe((delivery) => {
        deliveries.push(summary(delivery));
      });
      await subscription.synced;
      assert.deepEqual(deliveries, [{ initial: true, state: {}, changes: [] }]);

      await bucket.put("a", resource("a", 1));
      await eventually(() => deliveries.length === 2);
      await bucket.delete("a");
      await eventually(() => deliveries.length === 3);
      assert.deepEqual(deliveries.slice(1), [
        { initial: false, state: { a: 1 }, changes: [["a", 1, null]] },
        { initial: false, state: {}, changes: [["a", null, 1]] },
      ]);
      assert.equal(mirror.state.size, 0);
      await mirror.close();
    });

    it("coalesces the changes of each key while a subscriber is busy, in the order of the latest change", async () => {
      const bucket = await freshBucket();
      await bucket.put("kept", resource("kept", 1));
      await bucket.put("removed", resource("removed", 1));
      const mirror = await bucket.mirror();
      const busy = gate();
      const deliveries: ReturnType<typeof summary>[] = [];
      const subscription = mirror.subscribe(async (delivery) => {
        deliveries.push(summary(delivery));
        if (deliveries.length === 1) await busy.opened;
      });
      await mirror.ready;
      await eventually(() => deliveries.length === 1);

      // While the subscriber still handles its first delivery:
      await bucket.put("kept", resource("kept", 2));
      await bucket.put("added", resource("added", 1));
      await bucket.put("kept", resource("kept", 3));
      await bucket.delete("removed");
      await bucket.put("transient", resource("transient", 1));
      await bucket.delete("transient");
      await bucket.put("added", resource("added", 2));
      await eventually(() => mirror.state.get("added")?.generation === 2 && !mirror.state.has("transient"));
      busy.open();

      await eventually(() => deliveries.length === 2);
      assert.deepEqual(deliveries[1], {
        initial: false,
        state: { kept: 3, added: 2 },
        changes: [
          ["kept", 3, 1],
          ["removed", null, 1],
          ["added", 2, null],
        ],
      });
      await subscription.close();
      await mirror.close();
    });

    it("serves each subscriber at its own pace from one watch", async () => {
      const bucket = await freshBucket();
      const mirror = await bucket.mirror();
      const slow = gate();
      const fastSeen: number[] = [];
      const slowDeliveries: ReturnType<typeof summary>[] = [];
      const fast = mirror.subscribe(async (delivery) => {
        for (const change of delivery.changes) fastSeen.push(change.value?.generation ?? 0);
      });
      const slowSubscription = mirror.subscribe(async (delivery) => {
        slowDeliveries.push(summary(delivery));
        if (slowDeliveries.length === 2) await slow.opened;
      });
      await Promise.all([fast.synced, slowSubscription.synced]);

      for (let generation = 1; generation <= 5; generation++) {
        await bucket.put("k", resource("k", generation));
        await eventually(() => fastSeen.at(-1) === generation, { message: `fast missed ${generation}` });
      }
      slow.open();
      await eventually(() => slowDeliveries.at(-1)?.state.k === 5);
      // The slow one got the first change, then everything after it folded into one.
      assert.deepEqual(
        slowDeliveries.map((delivery) => delivery.changes),
        [[], [["k", 1, null]], [["k", 5, 1]]],
      );
      assert.deepEqual(fastSeen, [1, 2, 3, 4, 5]);
      await mirror.close();
    });

    it("mirrors only the keys of its filter", async () => {
      const bucket = await freshBucket();
      await bucket.put("VirtualService.default.a", resource("a"));
      await bucket.put("DestinationRule.default.a", resource("a"));
      const mirror = await bucket.mirror({ filter: "VirtualService.>" });
      await mirror.ready;
      assert.deepEqual([...mirror.state.keys()], ["VirtualService.default.a"]);
      await mirror.close();
    });

    it("keeps delivering after a handler throws", async () => {
      const bucket = await freshBucket();
      const mirror = await bucket.mirror();
      const seen: string[] = [];
      const subscription = mirror.subscribe((delivery) => {
        for (const change of delivery.changes) seen.push(change.key);
        if (delivery.changes.some((change) => change.key === "bad")) throw new Error("handler failed");
      });
      await subscription.synced;
      await bucket.put("bad", resource("bad"));
      await eventually(() => seen.includes("bad"));
      await bucket.put("good", resource("good"));
      await eventually(() => seen.includes("good"), { message: "a failed handler stopped the deliveries" });
      await mirror.close();
    });

    it("stops delivering once a subscription or the mirror is closed", async () => {
      const bucket = await freshBucket();
      const mirror = await bucket.mirror();
      let closedCount = 0;
      let openCount = 0;
      const closed = mirror.subscribe(() => {
        closedCount++;
      });
      const open = mirror.subscribe(() => {
        openCount++;
      });
      await Promise.all([closed.synced, open.synced]);
      await closed.close();
      await bucket.put("a", resource("a"));
      await eventually(() => openCount === 2);
      assert.equal(closedCount, 1);

      await mirror.close();
      await bucket.put("b", resource("b"));
      const late = mirror.subscribe(() => {
        openCount++;
      });
      await late.synced;
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(openCount, 2, "no delivery after the mirror closed");
      assert.deepEqual([...mirror.state.keys()], ["a"], "the state stays as it was at close");
    });

    it("resolves synced for a subscription closed before the mirror was ready", async () => {
      const bucket = await freshBucket();
      const mirror = await bucket.mirror();
      let called = false;
      const subscription = mirror.subscribe(() => {
        called = true;
      });
      await subscription.close();
      await subscription.synced;
      await mirror.ready;
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(called, false);
      await mirror.close();
    });
  });
}
