// PushInputs' debounce over real NATS deliveries, on a clock that moves only
// when the test says: a change after quiet is pushed (with its config
// changes, for traces) without the clock moving; the changes after it wait
// for the window; endpoint changes skip it when EDS debounce is off. Pushes
// are counted, never timed.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Bus, encodeKey } from "@sextant/bus";
import { createLogger, ReadinessGate } from "@sextant/observability";
import { eventually, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { type ConfigChangeRef, PushInputs } from "../src/inputs/push-inputs.js";
import type { PushChange } from "../src/model/types.js";
import { FakeClock } from "./fake-clock.js";
import { putConfig, registerService, testBus } from "./harness.js";

const AFTER_MS = 100;

function inputs(bus: Bus, clock: FakeClock, edsDebounce: boolean) {
  const pushes: PushChange[] = [];
  const built: ConfigChangeRef[][] = [];
  const pushInputs = new PushInputs({
    bus: () => bus,
    logger: createLogger({ service: "test", level: "silent" }),
    readiness: new ReadinessGate(),
    domainSuffix: "cluster.local",
    debounceAfterMs: AFTER_MS,
    debounceMaxMs: 10_000,
    debounceLeadingEdge: true,
    edsDebounce,
    clock,
    onPush: (change) => pushes.push(change),
    onConfigBuilt: (changes) => built.push([...changes]),
  });
  return { pushInputs, pushes, built };
}

const virtualService = (name: string) => ({
  kind: "VirtualService",
  name,
  spec: { hosts: ["reviews"], http: [{ route: [{ destination: { host: "reviews" } }] }] },
});

describe("PushInputs debounce", () => {
  let nats: NatsServerFixture;
  let bus: Bus;

  before(async () => {
    nats = await startNatsServer();
    bus = await testBus(nats.url);
    await registerService(bus, "reviews.default.svc.cluster.local", { name: "grpc", number: 9080 }, []);
  });
  after(async () => {
    await bus.close();
    await nats.stop();
  });

  it("pushes a change after quiet at once, and merges the ones that follow until the window ends", async () => {
    const clock = new FakeClock();
    const { pushInputs, pushes, built } = inputs(bus, clock, true);
    await pushInputs.start();
    try {
      await putConfig(bus, virtualService("first"));
      await eventually(() => pushes.length === 1, { message: "pushed with the clock standing still" });
      assert.equal(pushes[0]?.full, true);
      assert.deepEqual(
        built[0]?.map((change) => change.key),
        [encodeKey("VirtualService", "default", "first")],
        "its config change reaches the trace",
      );

      await putConfig(bus, virtualService("second"));
      await putConfig(bus, virtualService("third"));
      // Both deliveries are in: still one push, the followers wait for the window.
      await eventually(() => pushInputs.debounceState.pendingConfigChanges === 2);
      assert.equal(pushes.length, 1);
      clock.advance(AFTER_MS);
      assert.equal(pushes.length, 2, "one push for both followers");
      assert.deepEqual(built[1]?.map((change) => change.key).sort(), [
        encodeKey("VirtualService", "default", "second"),
        encodeKey("VirtualService", "default", "third"),
      ]);
      assert.deepEqual(pushInputs.debounceState, { flushes: 2, leading: 1, pendingConfigChanges: 0 });
    } finally {
      await pushInputs.close();
    }
  });

  it("pushes endpoint changes at once beside a pending config push when EDS debounce is off", async () => {
    const clock = new FakeClock();
    const { pushInputs, pushes } = inputs(bus, clock, false);
    await pushInputs.start();
    try {
      await putConfig(bus, virtualService("leading"));
      await eventually(() => pushes.length === 1);
      await putConfig(bus, virtualService("pending"));
      await registerService(bus, "ratings.default.svc.cluster.local", { name: "grpc", number: 9080 }, [
        { address: "10.0.0.9", port: 9080, labels: {} },
      ]);
      await eventually(() => pushes.some((push) => !push.full && push.endpointHosts.size > 0), {
        message: "the endpoint change went out without the clock moving",
      });
      const endpointPush = pushes.find((push) => !push.full);
      assert.deepEqual([...(endpointPush?.endpointHosts ?? [])], ["ratings.default.svc.cluster.local"]);
      clock.advance(AFTER_MS);
      assert.equal(pushes.at(-1)?.full, true, "the config and service changes follow at the window's end");
    } finally {
      await pushInputs.close();
    }
  });
});
