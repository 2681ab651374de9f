// A writer keeps writing while the KV stream's leader changes under it, on a
// real 3-node cluster with an R3 bucket: by step-down and by losing the
// leader's node. Every write must land exactly once, at the revision the
// writer was told, and none may be reported failed.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { createLogger, ReadinessGate } from "@sextant/observability";
import { ConfigResource } from "@sextant/proto";
import { eventually, type NatsClusterFixture, startNatsCluster } from "@sextant/testing";
import {
  Buckets,
  type Bus,
  busRunner,
  connectBus,
  defineBucket,
  listMembers,
  type TypedBucket,
} from "../src/index.js";

const resource = (name: string, spec: Record<string, unknown>) =>
  ConfigResource.fromPartial({ kind: "VirtualService", apiVersion: "networking.istio.io/v1", name, spec });

/** The bucket's logger, counting the writes it retried. */
function countingLogger() {
  const retries: string[] = [];
  const logger = createLogger({
    service: "bus-cluster-test",
    level: (process.env.TEST_LOG_LEVEL as "info") ?? "silent",
  });
  const info = logger.info.bind(logger);
  logger.info = ((object: unknown, message?: string) => {
    if (message?.startsWith("retrying a write")) retries.push(String((object as { key: string }).key));
    return info(object as object, message as string);
  }) as typeof logger.info;
  return { logger, retries };
}

describe("KV writes across a stream leader change on a 3-node cluster", () => {
  let cluster: NatsClusterFixture;
  let bus: Bus;
  const { logger, retries } = countingLogger();

  before(async () => {
    cluster = await startNatsCluster();
    bus = await connectBus({ url: cluster.url, name: "bus-cluster-test", logger, replicas: 3 });
  });
  after(async () => {
    await bus?.close();
    await cluster?.dispose();
  });

  /** The stream's leader once it is another node than previous (undefined: any). */
  const leaderOtherThan = async (stream: string, previous: string | undefined) => {
    let leader: string | undefined;
    await eventually(
      async () => {
        leader = await cluster.streamLeader(stream);
        return leader !== undefined && leader !== previous;
      },
      { timeoutMs: 60_000, message: `no new leader of ${stream} after ${previous}` },
    );
    return leader as string;
  };

  it("lands every write exactly once while the leader steps down and its node is lost", async (t) => {
    const spec = defineBucket(`leader-change-${process.pid}`, ConfigResource, "test bucket");
    const bucket: TypedBucket<ConfigResource> = await bus.bucket(spec);
    const stream = `KV_${spec.name}`;
    const jsm = await jetstreamManager(bus.nc);
    assert.equal((await jsm.streams.info(stream)).config.num_replicas, 3);

    // A watcher follows along, through the same leader changes.
    const seen: Array<{ key: string; revision: number; n: unknown }> = [];
    const watch = await bucket.watch((event) => {
      if (event.type === "put")
        seen.push({ key: event.key, revision: event.revision, n: event.value.spec?.n });
    });
    await watch.ready;

    // The writer: rounds of one write to each of four keys, each value
    // naming its write, until told to stop; what each write was told is kept.
    const keys = ["a", "b", "c", "d"];
    const written: Array<{ key: string; n: number; revision: number }> = [];
    let stop = false;
    const writer = (async () => {
      for (let n = 0; !stop || n % keys.length !== 0; n++) {
        const key = keys[n % keys.length] as string;
        const { revision, changed } = await bucket.put(key, resource(key, { n }));
        assert.equal(changed, true);
        written.push({ key, n, revision });
      }
    })();
    /** Waits for 20 more writes: the writer carries on after each change. */
    const progress = () => {
      const target = written.length + 20;
      return eventually(() => written.length >= target, {
        timeoutMs: 60_000,
        message: "the writer is stuck",
      });
    };

    await progress();
    let leader = await leaderOtherThan(stream, undefined);
    for (let stepDowns = 0; stepDowns < 2; stepDowns++) {
      await bus.nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, undefined, { timeout: 5_000 });
      leader = await leaderOtherThan(stream, leader);
      await progress();
    }
    // The leader's node goes away; the two others elect a leader and the
    // writer (reconnecting if it was on that node) carries on.
    const lost = cluster.nodes.find((node) => node.node.name === leader);
    assert.ok(lost, `no node named ${leader}`);
    await lost.stop();
    leader = await leaderOtherThan(stream, leader);
    await progress();
    await lost.start();
    await progress();
    stop = true;
    await writer;

    // Every write was acknowledged with a revision of its own, and the
    // revisions are the stream's sequences 1..N: nothing stored twice,
    // nothing lost, nothing stored that the writer was not told of.
    const revisions = written.map((write) => write.revision);
    assert.deepEqual(
      revisions,
      Array.from({ length: written.length }, (_, index) => index + 1),
    );
    const state = (await jsm.streams.info(stream)).state;
    assert.equal(state.last_seq, written.length);
    assert.equal(state.messages, keys.length);
    for (const key of keys) {
      const last = written.filter((write) => write.key === key).at(-1);
      const entry = await bucket.get(key);
      assert.equal(entry?.revision, last?.revision, key);
      assert.equal(entry?.value.spec?.n, last?.n, key);
    }
    // The watcher saw each revision at most once, in order, and ends where the writer did.
    await eventually(() => seen.at(-1)?.revision === written.length, {
      timeoutMs: 60_000,
      message: "the watch did not catch up",
    });
    await watch.stop();
    const seenRevisions = seen.map((event) => event.revision);
    assert.deepEqual(
      seenRevisions,
      [...new Set(seenRevisions)].sort((a, b) => a - b),
    );
    for (const event of seen) assert.equal(event.n, written[event.revision - 1]?.n);

    // How many writes the leader changes made retry, for the reader: a
    // change can also fall between two writes, so no count is asserted
    // (test/retry.test.ts covers the retry itself).
    t.diagnostic(`${written.length} writes, ${retries.length} retried attempts`);
  });

  it("reads back every write it made, through a node that does not lead the stream", async () => {
    // A write is acknowledged once two of the three replicas have it; a read
    // answered by the third, which may not have applied it yet, would be
    // stale: a delete right after a put would find no key and do nothing.
    const spec = defineBucket(`read-back-${process.pid}`, ConfigResource, "test bucket");
    await bus.bucket(spec);
    const leader = await leaderOtherThan(`KV_${spec.name}`, undefined);
    const follower = cluster.nodes.find((node) => node.node.name !== leader);
    assert.ok(follower);
    const followerBus = await connectBus({
      url: follower.url,
      name: "bus-cluster-follower",
      logger,
      replicas: 3,
    });
    try {
      const bucket = await followerBus.bucket(spec);
      for (let n = 0; n < 40; n++) {
        const { revision } = await bucket.put("k", resource("k", { n }));
        assert.equal((await bucket.get("k"))?.revision, revision);
        assert.equal(await bucket.delete("k"), true, `write ${n}: the delete did not see the put`);
      }
      // The follower misses writes while it is down, and is read from as
      // soon as it is back, before it has caught up (nats-io/nats-server#4162).
      const { revision: before } = await bucket.put("k", resource("k", { n: -1 }));
      await follower.stop();
      let last = before;
      for (let n = 0; n < 20; n++) last = (await bucket.put("k", resource("k", { n }))).revision;
      await follower.start();
      // Read at once and again until the follower is current: no read may be older than the last write.
      const reads: number[] = [];
      for (let n = 0; n < 50; n++) reads.push((await bucket.get("k"))?.revision ?? 0);
      assert.deepEqual(new Set(reads), new Set([last]));
    } finally {
      await followerBus.close();
    }
  });

  it("keeps a service's runner writing through the loss of the node it is connected to", async () => {
    // A service's start: R3 buckets from its contract, its membership record.
    const runner = busRunner({
      url: cluster.url,
      name: "cluster-runner",
      logger,
      readiness: new ReadinessGate(),
      service: "probe",
      instance: "probe-0",
      replicas: 3,
      contract: { buckets: { write: [Buckets.config, Buckets.members], read: [] }, subjects: {}, ports: {} },
    });
    await runner.start();
    try {
      const config = await runner.bus.bucket(Buckets.config);
      const info = await (await jetstreamManager(runner.bus.nc)).streams.info(`KV_${Buckets.config.name}`);
      assert.equal(info.config.num_replicas, 3);
      assert.deepEqual(
        (await listMembers(runner.bus)).map((member) => member.instance),
        ["probe-0"],
      );
      await config.put("VirtualService.default.before", resource("before", {}));
      const connectedTo = runner.bus.nc.info?.port;
      const lost = cluster.nodes.find((node) => node.port === connectedTo);
      assert.ok(lost, `the runner is connected to port ${connectedTo}, no node's`);
      await lost.stop();
      try {
        // The same bus, reconnected by itself to a surviving node, writes and reads on.
        const { revision } = await config.put("VirtualService.default.after", resource("after", {}));
        assert.equal((await config.get("VirtualService.default.after"))?.revision, revision);
        assert.notEqual(runner.bus.nc.info?.port, connectedTo);
        assert.equal((await config.get("VirtualService.default.before"))?.value.name, "before");
      } finally {
        await lost.start();
      }
    } finally {
      await runner.close();
    }
  });
});
