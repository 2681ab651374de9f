import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { propagation, ROOT_CONTEXT, TraceFlags, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { createLogger } from "@sextant/observability";
import { ConfigResource, NackEvent } from "@sextant/proto";
import {
  eventually,
  NATS_TOPOLOGIES,
  type NatsTopology,
  serialisesConcurrentConditionalWrites,
  startNatsTopology,
} from "@sextant/testing";
import {
  Buckets,
  type Bus,
  connectBus,
  decodeKey,
  defineBucket,
  encodeKey,
  keyPrefixFilter,
  RevisionConflictError,
  Subjects,
  type TypedBucket,
  type WatchEvent,
} from "../src/index.js";

const logger = createLogger({
  service: "bus-test",
  level: (process.env.TEST_LOG_LEVEL as "info") ?? "silent",
});

function resource(
  name: string,
  spec: Record<string, unknown>,
  labels: Record<string, string> = {},
): ConfigResource {
  return ConfigResource.fromPartial({
    kind: "VirtualService",
    apiVersion: "networking.istio.io/v1",
    namespace: "default",
    name,
    labels,
    spec,
  });
}

for (const kind of NATS_TOPOLOGIES) {
  describe(`bus against a real NATS (${kind})`, () => {
    let nats: NatsTopology;
    let bus: Bus;
    let bucketCount = 0;
    // Each test uses a bucket of its own so that they cannot see each other's writes.
    const freshBucket = () =>
      bus.bucket(defineBucket(`test-${process.pid}-${++bucketCount}`, ConfigResource, "test bucket"));

    before(async () => {
      nats = await startNatsTopology(kind);
      bus = await connectBus({ url: nats.url, name: "bus-test", logger, replicas: nats.replicas });
    });
    after(async () => {
      await bus?.close();
      await nats?.dispose();
    });

    it("creates a bucket with a TTL as its streams' max age, so that its keys expire (sextant-traces)", async () => {
      const spec = defineBucket(`test-${process.pid}-ttl`, ConfigResource, "test bucket", { ttlMs: 60_000 });
      const bucket = await bus.bucket(spec);
      await bucket.put("k", resource("ttl", {}));
      const info = await (await jetstreamManager(bus.nc)).streams.info(`KV_${spec.name}`);
      assert.equal(info.config.max_age, 60_000 * 1_000_000);
      assert.equal(Buckets.traces.ttlMs, 60 * 60 * 1000);
    });

    it("puts and gets a value", async () => {
      const bucket = await freshBucket();
      const put = await bucket.put("a", resource("reviews", { hosts: ["reviews"] }));
      assert.equal(put.changed, true);
      const entry = await bucket.get("a");
      assert.equal(entry?.value.name, "reviews");
      assert.deepEqual(entry?.value.spec, { hosts: ["reviews"] });
      assert.equal(entry?.revision, put.revision);
      assert.equal(await bucket.get("missing"), undefined);
    });

    it("skips a put whose content is unchanged, whatever the key order of maps", async () => {
      const bucket = await freshBucket();
      const first = await bucket.put("k", resource("r", { a: 1, b: { c: 2, d: 3 } }, { x: "1", y: "2" }));
      const second = await bucket.put("k", resource("r", { b: { d: 3, c: 2 }, a: 1 }, { y: "2", x: "1" }));
      assert.deepEqual(second, { revision: first.revision, changed: false });
      const third = await bucket.put("k", resource("r", { a: 2, b: { c: 2, d: 3 } }));
      assert.equal(third.changed, true);
      assert.ok(third.revision > first.revision);
    });

    it("sends no watch event for an unchanged put", async () => {
      const bucket = await freshBucket();
      await bucket.put("k", resource("r", { v: 1 }));
      const events: WatchEvent<ConfigResource>[] = [];
      const watch = await bucket.watch((event) => {
        events.push(event);
      });
      await watch.ready;
      await bucket.put("k", resource("r", { v: 1 }));
      await bucket.put("marker", resource("m", {}));
      await eventually(() => events.some((event) => event.key === "marker"));
      await watch.stop();
      assert.deepEqual(
        events.map((event) => [event.key, event.replay]),
        [
          ["k", true],
          ["marker", false],
        ],
      );
    });

    it("replays the current state, then follows puts and deletes", async () => {
      const bucket = await freshBucket();
      await bucket.put("one", resource("one", {}));
      await bucket.put("two", resource("two", {}));
      await bucket.put("gone", resource("gone", {}));
      await bucket.delete("gone");

      const state = new Map<string, string>();
      const replayed: string[] = [];
      const watch = await bucket.watch((event) => {
        if (event.replay && event.type === "put") replayed.push(event.key);
        if (event.type === "put") state.set(event.key, event.value.name);
        else state.delete(event.key);
      });
      await watch.ready;
      assert.deepEqual(replayed.sort(), ["one", "two"]);
      assert.deepEqual([...state.keys()].sort(), ["one", "two"]);

      await bucket.put("three", resource("three", {}));
      assert.equal(await bucket.delete("one"), true);
      assert.equal(await bucket.delete("never-existed"), false);
      await eventually(() => state.has("three") && !state.has("one"), { message: "live updates not seen" });
      await watch.stop();
      assert.deepEqual([...state.keys()].sort(), ["three", "two"]);
    });

    it("is ready at once on an empty bucket, and lists entries by key filter", async () => {
      const bucket = await freshBucket();
      const watch = await bucket.watch(() => {});
      await watch.ready;
      await watch.stop();
      assert.deepEqual(await bucket.list(), []);
      await bucket.put(encodeKey("VirtualService", "default", "reviews"), resource("reviews", {}));
      await bucket.put(encodeKey("VirtualService", "prod", "reviews"), resource("reviews", {}));
      await bucket.put(encodeKey("DestinationRule", "default", "reviews"), resource("reviews", {}));
      const listed = await bucket.list(keyPrefixFilter("VirtualService"));
      assert.deepEqual(listed.map((entry) => decodeKey(entry.key)[1]).sort(), ["default", "prod"]);
    });

    it("writes over an entry already read, without rewriting unchanged content or losing a race", async () => {
      const bucket = await freshBucket();
      assert.equal((await bucket.putOver("k", resource("r", { v: 1 }), undefined)).changed, true);
      const read = await bucket.get("k");
      assert.deepEqual(await bucket.putOver("k", resource("r", { v: 1 }), read), {
        revision: read!.revision,
        changed: false,
      });
      const written = await bucket.putOver("k", resource("r", { v: 2 }), read);
      assert.equal(written.changed, true);
      // `read` is now stale: another write over it must fail, not overwrite v2.
      await assert.rejects(bucket.putOver("k", resource("r", { v: 3 }), read), RevisionConflictError);
      await assert.rejects(bucket.putOver("k", resource("r", { v: 3 }), undefined), RevisionConflictError);
      assert.deepEqual((await bucket.get("k"))?.value.spec, { v: 2 });
    });

    it("refuses a write at a stale revision", async () => {
      const bucket = await freshBucket();
      const { revision } = await bucket.put("k", resource("r", { n: 0 }));
      await bucket.put("k", resource("r", { n: 1 }), { expectedRevision: revision });
      await assert.rejects(
        bucket.put("k", resource("r", { n: 2 }), { expectedRevision: revision }),
        RevisionConflictError,
      );
      await assert.rejects(
        bucket.put("new", resource("r", {}), { expectedRevision: 5 }),
        RevisionConflictError,
      );
    });

    // Only where the server serialises them: see NatsTopology (a 3-node
    // cluster of nats-server before 2.9.21 lets several such writes win).
    if (serialisesConcurrentConditionalWrites(kind))
      it("serialises concurrent conditional creates and updates", async () => {
        const bucket = await freshBucket();
        // Both writers read revision 0 ("absent"); the second create loses the race.
        const racers = await Promise.allSettled([
          bucket.put("raced", resource("a", {}), { expectedRevision: 0 }),
          bucket.put("raced", resource("b", {}), { expectedRevision: 0 }),
        ]);
        assert.equal(racers.filter((r) => r.status === "fulfilled").length, 1);
        const lost = racers.find((r) => r.status === "rejected");
        assert.ok(lost?.status === "rejected" && lost.reason instanceof RevisionConflictError, String(lost));

        const increments = 12;
        await Promise.all(
          Array.from({ length: increments }, () =>
            bucket.update(
              "counter",
              (current) => resource("c", { n: ((current?.spec?.n as number) ?? 0) + 1 }),
              50,
            ),
          ),
        );
        assert.equal((await bucket.get("counter"))?.value.spec?.n, increments);
      });

    it("logs and skips a value that does not decode, and keeps watching", async () => {
      const bucket = await freshBucket();
      // Bytes that are not a ConfigResource: field 1 with wire type 7 is invalid.
      await jetstream(bus.nc).publish(`$KV.${bucket.name}.bad`, new Uint8Array([0x0f, 0xff, 0xff]));
      const seen: string[] = [];
      const watch = await bucket.watch((event) => {
        seen.push(event.key);
      });
      await watch.ready;
      await bucket.put("good", resource("good", {}));
      await eventually(() => seen.includes("good"));
      await watch.stop();
      assert.deepEqual(seen, ["good"]);
    });

    it("resumes after its consumer is removed, missing nothing and repeating nothing", async () => {
      const bucket = await freshBucket();
      await bucket.put("a", resource("a", {}));
      const seen: string[] = [];
      const watch = await bucket.watch((event) => {
        seen.push(event.key);
      });
      await watch.ready;
      const jsm = await jetstreamManager(bus.nc);
      for await (const consumer of jsm.consumers.list(`KV_${bucket.name}`)) {
        await jsm.consumers.delete(`KV_${bucket.name}`, consumer.name);
      }
      await bucket.put("b", resource("b", {}));
      await eventually(() => seen.includes("b"), { timeoutMs: 20_000, message: "watch did not resume" });
      await bucket.put("c", resource("c", {}));
      await eventually(() => seen.includes("c"));
      await watch.stop();
      assert.deepEqual(seen, ["a", "b", "c"]);
    });

    it("publishes typed events with the trace context in headers", async () => {
      propagation.setGlobalPropagator(new W3CTraceContextPropagator());
      try {
        const received: Array<{
          value: NackEvent;
          traceId: string | undefined;
          headers: Record<string, string>;
        }> = [];
        const subject = bus.subject(Subjects.nack);
        const subscription = subject.subscribe((event) => {
          received.push({
            value: event.value,
            traceId: trace.getSpanContext(event.traceContext)?.traceId,
            headers: event.headers,
          });
        });
        await bus.nc.flush();
        const traceId = "0af7651916cd43dd8448eb211c80319c";
        const parent = trace.setSpanContext(ROOT_CONTEXT, {
          traceId,
          spanId: "b7ad6b7169203331",
          traceFlags: TraceFlags.SAMPLED,
        });
        // No context manager is registered in tests, so pass the context explicitly.
        subject.publish(
          NackEvent.fromPartial({
            proxyId: "sidecar~10.0.0.1~a.default~default.svc.cluster.local",
            message: "bad",
          }),
          parent,
        );
        await eventually(() => received.length === 1);
        subscription.unsubscribe();
        assert.equal(received[0]?.value.message, "bad");
        assert.equal(received[0]?.traceId, traceId);
        assert.match(
          received[0]?.headers.traceparent ?? "",
          /^00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01$/,
        );
      } finally {
        propagation.disable();
      }
    });

    it("keeps its data across a nats-server restart and reconnects by itself", async () => {
      const bucket: TypedBucket<ConfigResource> = await bus.bucket(Buckets.config);
      await bucket.put(encodeKey("VirtualService", "default", "reviews"), resource("reviews", { v: 1 }));
      const seen: Array<[string, number | undefined]> = [];
      const watch = await bucket.watch((event) => {
        seen.push([event.type, event.type === "put" ? (event.value.spec?.v as number) : undefined]);
      });
      await watch.ready;

      await nats.restart();

      // The same client, with no help from the test, reconnects and writes again.
      await eventually(
        async () => (await bucket.get(encodeKey("VirtualService", "default", "reviews")))?.value,
        {
          timeoutMs: 20_000,
          message: "value not readable after the restart",
        },
      );
      const after = await bucket.get(encodeKey("VirtualService", "default", "reviews"));
      assert.deepEqual(after?.value.spec, { v: 1 });
      await eventually(
        async () => {
          await bucket.put(encodeKey("VirtualService", "default", "reviews"), resource("reviews", { v: 2 }));
          return true;
        },
        { timeoutMs: 20_000, message: "put failed after the restart" },
      );
      await eventually(() => seen.some(([, v]) => v === 2), {
        timeoutMs: 20_000,
        message: "watch missed the update after the restart",
      });
      await watch.stop();
      // Replayed v1 once, then v2 once: nothing lost, nothing delivered twice.
      assert.deepEqual(seen, [
        ["put", 1],
        ["put", 2],
      ]);
    });
  });
}

describe("keys", () => {
  it("encodes names with dots unambiguously and decodes them back", () => {
    const a = encodeKey("Service", "default", "reviews.default.svc.cluster.local");
    const b = encodeKey("Service", "default.reviews", "default.svc.cluster.local");
    assert.notEqual(a, b);
    assert.equal(a.split(".").length, 3);
    assert.deepEqual(decodeKey(a), ["Service", "default", "reviews.default.svc.cluster.local"]);
    assert.deepEqual(decodeKey(b), ["Service", "default.reviews", "default.svc.cluster.local"]);
    assert.deepEqual(decodeKey(encodeKey("", "_x", "ü*>")), ["", "_x", "ü*>"]);
    assert.match(encodeKey("a_b", "c d"), /^[A-Za-z0-9_.-]+$/);
  });

  it("rejects a token that no encoding produces", () => {
    assert.throws(() => decodeKey("a b"), /not an encoded key segment/);
  });
});
