// A service's bus allows exactly what its contract declares: an undeclared
// bucket or subject, a write to a bucket declared read-only, or a
// subscription outside the declared queue group fails at once.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { createLogger, ReadinessGate } from "@sextant/observability";
import { ConfigResource, NackEvent } from "@sextant/proto";
import type { ServiceContract } from "@sextant/runtime";
import { type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { Buckets, type BusRunner, busRunner, Subjects, UndeclaredUseError } from "../src/index.js";

const logger = createLogger({ service: "bus-contract-test", level: "silent" });

/** A contract shaped like push's: writes one bucket, reads another, publishes one subject, subscribes to one. */
const contract: ServiceContract = {
  buckets: { write: [Buckets.proxyStatus], read: [Buckets.config] },
  subjects: { publish: [Subjects.nack], subscribe: [{ subject: Subjects.registration, queue: "probe" }] },
  ports: {},
};

const undeclared = (use: RegExp) => (error: unknown) =>
  error instanceof UndeclaredUseError && error.service === "probe" && use.test(error.message);

describe("a service's bus holds it to its contract", () => {
  let nats: NatsServerFixture;
  let runner: BusRunner;

  before(async () => {
    nats = await startNatsServer();
    runner = busRunner({
      url: nats.url,
      name: "probe",
      logger,
      readiness: new ReadinessGate(),
      service: "probe",
      contract,
    });
    await runner.start();
  });
  after(async () => {
    await runner?.close();
    await nats?.dispose();
  });

  it("opens the declared buckets at start", async () => {
    // Through the stream, not bus.bucket(), which would create a missing one.
    const streams = (await jetstreamManager(runner.bus.nc)).streams;
    for (const spec of [Buckets.proxyStatus, Buckets.config])
      assert.equal((await streams.info(`KV_${spec.name}`)).config.name, `KV_${spec.name}`);
  });

  it("writes and reads a bucket it declares writing", async () => {
    const status = await runner.bus.bucket(Buckets.proxyStatus);
    await status.put("p1", Buckets.proxyStatus.codec.decode(new Uint8Array()));
    assert.ok(await status.get("p1"));
    assert.equal(await status.delete("p1"), true);
  });

  it("refuses a bucket it does not declare", async () => {
    await assert.rejects(runner.bus.bucket(Buckets.trust), undeclared(/opened bucket sextant-trust/));
  });

  it("reads a bucket it declares reading, and refuses every write to it", async () => {
    const config = await runner.bus.bucket(Buckets.config);
    assert.equal(await config.get("VirtualService.default.x"), undefined);
    const value = ConfigResource.fromPartial({ kind: "VirtualService", name: "x" });
    await assert.rejects(config.put("VirtualService.default.x", value), undeclared(/put on sextant-config/));
    await assert.rejects(
      config.update("VirtualService.default.x", () => value),
      undeclared(/update on sextant-config/),
    );
    await assert.rejects(config.delete("VirtualService.default.x"), undeclared(/delete on sextant-config/));
    assert.equal(await config.get("VirtualService.default.x"), undefined);
  });

  it("publishes only the subjects it declares publishing", () => {
    runner.bus.subject(Subjects.nack).publish(NackEvent.fromPartial({}));
    assert.throws(
      () =>
        runner.bus
          .subject(Subjects.registration)
          .publish(Subjects.registration.codec.decode(new Uint8Array())),
      undeclared(/published to sextant.registration/),
    );
  });

  it("subscribes only as it declares: the subject, in its queue group", () => {
    runner.bus
      .subject(Subjects.registration)
      .subscribe(() => {}, { queue: "probe" })
      .unsubscribe();
    assert.throws(
      () => runner.bus.subject(Subjects.registration).subscribe(() => {}),
      undeclared(/subscribed to sextant.registration,/),
    );
    assert.throws(
      () => runner.bus.subject(Subjects.nack).subscribe(() => {}, { queue: "probe" }),
      undeclared(/subscribed to sextant.nack in queue probe/),
    );
  });

  it("refuses a contract naming a bucket outside the catalog", () => {
    assert.throws(
      () =>
        busRunner({
          url: nats.url,
          name: "x",
          logger,
          readiness: new ReadinessGate(),
          service: "probe",
          contract: { buckets: { read: [{ name: "sextant-elsewhere" }] }, ports: {} },
        }),
      /sextant-elsewhere, which is not in @sextant\/bus's catalog/,
    );
  });
});
