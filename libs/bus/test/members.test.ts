import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { createLogger } from "@sextant/observability";
import { eventually, NATS_TOPOLOGIES, type NatsTopology, startNatsTopology } from "@sextant/testing";
import { Buckets, type Bus, connectBus, listMembers } from "../src/index.js";
import { MemberRecorder } from "../src/members.js";

const logger = createLogger({ service: "bus-test", level: "silent" });

for (const kind of NATS_TOPOLOGIES) {
  describe(`membership records in sextant-members (${kind})`, () => {
    let nats: NatsTopology;
    let bus: Bus;

    before(async () => {
      nats = await startNatsTopology(kind);
      bus = await connectBus({ url: nats.url, name: "members-test", logger, replicas: nats.replicas });
    });
    after(async () => {
      await bus?.close();
      await nats?.dispose();
    });

    it("keeps each process's record while it runs, rewriting it so that the bucket's TTL does not expire it", async () => {
      const push0 = new MemberRecorder(
        () => bus,
        { service: "push", version: "1.2.3", instance: "push-0" },
        logger,
        50,
      );
      const ingest = new MemberRecorder(
        () => bus,
        { service: "ingest", version: "1.2.3", instance: "ingest.a" },
        logger,
      );
      await push0.start();
      await ingest.start();
      try {
        const members = await listMembers(bus);
        assert.deepEqual(
          members.map(({ service, version, instance }) => ({ service, version, instance })),
          [
            { service: "ingest", version: "1.2.3", instance: "ingest.a" },
            { service: "push", version: "1.2.3", instance: "push-0" },
          ],
        );
        // A refresh is a new write (a later `refreshed`), which restarts the key's max age.
        const first = members.find((member) => member.service === "push")!;
        await eventually(
          async () =>
            (await listMembers(bus)).find((member) => member.service === "push")!.refreshed > first.refreshed,
          { message: "push-0's record was never rewritten" },
        );
        const stream = await (await jetstreamManager(bus.nc)).streams.info(`KV_${Buckets.members.name}`);
        assert.equal(stream.config.max_age, 30_000 * 1_000_000);
      } finally {
        await push0.stop();
      }
      // A stopped process's record is deleted at once.
      assert.deepEqual(
        (await listMembers(bus)).map((member) => member.instance),
        ["ingest.a"],
      );
      await ingest.stop();
    });
  });
}
