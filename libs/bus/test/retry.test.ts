// The write path across a leader change, made deterministic: a JetStream
// client whose publishes fail the way they do during an election (the
// answer lost, or the request never served), in front of a real nats-server.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type JetStreamClient, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { errors, RequestError } from "@nats-io/nats-core";
import { createLogger } from "@sextant/observability";
import { ConfigResource } from "@sextant/proto";
import { type NatsServerFixture, startNatsServer } from "@sextant/testing";
import {
  type Bus,
  BusUnavailableError,
  connectBus,
  defineBucket,
  type RetryPolicy,
  RevisionConflictError,
  TypedBucket,
} from "../src/index.js";
import { isTransient } from "../src/retry.js";

const logger = createLogger({ service: "bus-retry-test", level: "silent" });
const quick: RetryPolicy = {
  deadlineMs: 2_000,
  attemptTimeoutMs: 500,
  initialBackoffMs: 10,
  maxBackoffMs: 50,
};

type Publish = JetStreamClient["publish"];
/** What a fake attempt does: forward it (and maybe lose the answer), or fail without sending. */
type Fault = "answer-lost" | "not-served" | "other-id" | undefined;

const resource = (name: string, spec: Record<string, unknown> = {}) =>
  ConfigResource.fromPartial({ kind: "VirtualService", apiVersion: "networking.istio.io/v1", name, spec });

describe("KV writes retried across a leader change", () => {
  let nats: NatsServerFixture;
  let bus: Bus;
  let count = 0;

  before(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ url: nats.url, name: "bus-retry-test", logger });
  });
  after(async () => {
    await bus?.close();
    await nats?.dispose();
  });

  /** A bucket whose publishes go through faults: attempt n suffers faults[n-1]. */
  async function faultyBucket(faults: Fault[], policy = quick) {
    const spec = defineBucket(`retry-${process.pid}-${++count}`, ConfigResource, "test bucket");
    await bus.bucket(spec); // created as the services create it
    const realKv = await new Kvm(bus.js).open(spec.name);
    // A lagging replica: the next `reads` gets answer the key at `revision`
    // (0: a replica that never saw it) rather than its last record.
    const lagging = { reads: 0, revision: 0 };
    const kv = new Proxy(realKv, {
      get: (target, property) =>
        property === "get"
          ? async (key: string) => {
              if (lagging.reads === 0) return target.get(key);
              lagging.reads--;
              if (lagging.revision === 0) return null;
              // The key as it was: an older revision (its value does not matter here).
              const current = await target.get(key);
              return (
                current && { operation: current.operation, value: current.value, revision: lagging.revision }
              );
            }
          : Reflect.get(target, property),
    });
    const attempts: Array<{ msgID?: string; fault: Fault }> = [];
    const publish: Publish = async (subject, payload, options) => {
      const fault = faults[attempts.length];
      attempts.push({ msgID: options?.msgID, fault });
      if (fault === "not-served") throw new errors.TimeoutError();
      if (fault === "other-id") {
        return bus.js.publish(subject, payload, { ...options, msgID: `${options?.msgID}-other` });
      }
      const ack = await bus.js.publish(subject, payload, options);
      if (fault === "answer-lost") throw new errors.TimeoutError();
      return ack;
    };
    const js = new Proxy(bus.js, {
      get: (target, property) => (property === "publish" ? publish : Reflect.get(target, property)),
    });
    const jsm = await jetstreamManager(bus.nc);
    const bucket = new TypedBucket(spec, kv, logger, { js, jsm, retry: policy });
    const stream = async () => (await jsm.streams.info(`KV_${spec.name}`)).state;
    return { bucket, attempts, stream, lagging, plain: await bus.bucket(spec) };
  }

  it("answers a retry of a write that landed with the revision it landed at, storing it once", async () => {
    const { bucket, attempts, stream } = await faultyBucket(["answer-lost", "answer-lost"]);
    const put = await bucket.put("k", resource("r", { v: 1 }));
    assert.deepEqual(put, { revision: 1, changed: true });
    assert.equal(attempts.length, 3);
    // One message id for the whole write: the server recognised the retries.
    assert.equal(new Set(attempts.map((attempt) => attempt.msgID)).size, 1);
    assert.equal((await stream()).last_seq, 1);
    assert.deepEqual((await bucket.get("k"))?.value.spec, { v: 1 });
  });

  it("retries a write that was never served until it lands", async () => {
    const { bucket, attempts, stream, plain } = await faultyBucket([undefined, "not-served", "not-served"]);
    await bucket.put("k", resource("r", { v: 1 }));
    const put = await bucket.put("k", resource("r", { v: 2 }));
    assert.deepEqual(put, { revision: 2, changed: true });
    assert.equal(attempts.length, 4);
    assert.equal((await stream()).last_seq, 2);
    assert.deepEqual((await plain.get("k"))?.value.spec, { v: 2 });
  });

  it("recognises its own write by message id when a retry finds the key moved on", async () => {
    // The second attempt carries another id, as a retry the server can no
    // longer match would: it fails on the revision, and the key's last
    // record, the first attempt's, is ours.
    const { bucket, stream } = await faultyBucket(["answer-lost", "other-id"]);
    assert.deepEqual(await bucket.put("k", resource("r")), { revision: 1, changed: true });
    assert.equal((await stream()).last_seq, 1);
  });

  it("deletes once across a lost answer", async () => {
    const { bucket, stream } = await faultyBucket([undefined, "answer-lost"]);
    await bucket.put("k", resource("r"));
    assert.equal(await bucket.delete("k"), true);
    assert.equal(await bucket.get("k"), undefined);
    assert.equal((await stream()).last_seq, 2);
  });

  it("asks again when a lagging replica answers a read with less than its own last write", async () => {
    const { bucket, lagging } = await faultyBucket([]);
    const first = await bucket.put("k", resource("r", { v: 1 }));
    const second = await bucket.put("k", resource("r", { v: 2 }));
    Object.assign(lagging, { reads: 2, revision: first.revision });
    assert.equal((await bucket.get("k"))?.revision, second.revision);
    assert.equal(lagging.reads, 0);
    // A replica that never saw the key: the delete still finds it.
    Object.assign(lagging, { reads: 2, revision: 0 });
    assert.equal(await bucket.delete("k"), true);
    assert.equal(await bucket.get("k"), undefined);
  });

  it("does not retry a conflict, and never writes over a newer revision", async () => {
    const { bucket, attempts, plain } = await faultyBucket([]);
    const first = await plain.put("k", resource("r", { v: 1 }));
    await plain.put("k", resource("r", { v: 2 }));
    await assert.rejects(
      bucket.put("k", resource("r", { v: 3 }), { expectedRevision: first.revision }),
      RevisionConflictError,
    );
    assert.equal(attempts.length, 0);
    const stale = { key: "k", value: resource("r", { v: 1 }), revision: first.revision };
    await assert.rejects(bucket.putOver("k", resource("r", { v: 3 }), stale), RevisionConflictError);
    assert.equal(attempts.length, 1);
    assert.deepEqual((await plain.get("k"))?.value.spec, { v: 2 });
  });

  it("fails clearly at the deadline when JetStream stays unavailable, storing nothing", async () => {
    const faults: Fault[] = Array.from({ length: 1_000 }, () => "not-served");
    const { bucket, stream } = await faultyBucket(faults, { ...quick, deadlineMs: 300 });
    await assert.rejects(bucket.put("k", resource("r")), (error: unknown) => {
      assert.ok(error instanceof BusUnavailableError, String(error));
      assert.match(error.message, /write of retry-\d+-\d+\/k failed after \d+ attempts/);
      assert.ok(error.cause instanceof errors.TimeoutError);
      return true;
    });
    assert.equal((await stream()).messages, 0);
  });

  it("retries only what a leader change answers", () => {
    assert.equal(isTransient(new errors.TimeoutError()), true);
    assert.equal(isTransient(new errors.NoRespondersError("$KV.x.k")), true);
    assert.equal(
      isTransient(new RequestError("no responders", { cause: new errors.NoRespondersError("x") })),
      true,
    );
    assert.equal(
      isTransient(Object.assign(new Error("JetStream system temporarily unavailable"), { status: 503 })),
      true,
    );
    assert.equal(isTransient(new errors.ClosedConnectionError()), false);
    assert.equal(isTransient(new Error("wrong last sequence: 2")), false);
    assert.equal(isTransient(new RevisionConflictError("k", 1)), false);
  });
});
