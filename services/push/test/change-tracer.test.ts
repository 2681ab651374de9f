// ChangeTracer when a build is pushed before ingest's record of its change
// reaches push (the debounce's leading edge pushes at once): what was sent
// and ACKed is stamped with the change's trace id when the record arrives,
// and a newer change's stamp is never overwritten by an older one's.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { type ConfigTraceRecord, configKey, configTraceKey } from "@sextant/model";
import { createLogger } from "@sextant/observability";
import { Struct } from "@sextant/proto";
import { eventually, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import type { Connection, WatchState } from "../src/server/connection.js";
import { ChangeTracer } from "../src/status/change-tracer.js";

const logger = createLogger({ service: "test", level: "silent" });
const ROUTES = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/** The part of a stream the tracer reads: its proxy's id and per-type watch state. */
function streamOf(proxyId: string): { connection: Connection; state: WatchState } {
  const state = { names: new Set(["*"]), sent: [], held: new Map() } as unknown as WatchState;
  const connection = { proxy: { id: proxyId }, watched: new Map([[ROUTES, state]]) } as unknown as Connection;
  return { connection, state };
}

function ingestRecord(name: string, generation: number, traceId: string): ConfigTraceRecord {
  return {
    kind: "VirtualService",
    namespace: "default",
    name,
    traceId,
    spanId: traceId.slice(0, 16),
    generation,
    deleted: false,
    storedAt: new Date().toISOString(),
    changedBy: "test",
  };
}

describe("ChangeTracer: a build pushed before ingest's record of its change arrives", () => {
  let nats: NatsServerFixture;
  let bus: Bus;
  let tracer: ChangeTracer;

  before(async () => {
    nats = await startNatsServer();
    bus = await connectBus({ url: nats.url, name: "change-tracer-test", logger });
    tracer = new ChangeTracer({ bus: () => bus, logger, replica: "push-a", flushMs: 50 });
    await tracer.start();
  });

  after(async () => {
    await tracer?.close();
    await bus?.close();
    await nats?.stop();
  });

  const traces = () => bus.bucket(Buckets.traces);
  const ref = (name: string) => ({ kind: "VirtualService", namespace: "default", name });

  it("stamps what was sent and ACKed with the change's trace id once the record arrives", async () => {
    const { connection, state } = streamOf("sidecar~10.0.0.1~a.default~default.svc.cluster.local");
    tracer.built([{ key: configKey(ref("reviews")), generation: 1, deleted: false }], Date.now());
    tracer.sent(connection, ROUTES);
    tracer.acked(connection, ROUTES);
    assert.equal(state.traceIdSent, undefined, "no record yet: no trace id to stamp");

    const traceId = "0af7651916cd43dd8448eb211c80319c";
    await (await traces()).put(
      configTraceKey(ref("reviews")),
      Struct.wrap({ ...ingestRecord("reviews", 1, traceId) }),
    );
    await eventually(() => state.traceIdSent === traceId && state.traceIdAcked === traceId);
  });

  it("keeps a newer change's stamp when an older change's record arrives late", async () => {
    const first = streamOf("sidecar~10.0.0.2~b.default~default.svc.cluster.local");
    const second = streamOf("sidecar~10.0.0.3~c.default~default.svc.cluster.local");
    tracer.built([{ key: configKey(ref("ratings")), generation: 4, deleted: false }], Date.now());
    tracer.sent(first.connection, ROUTES);
    tracer.sent(second.connection, ROUTES);

    // A newer change, whose record is there by its build: the first stream's next response carries it.
    const newer = "11111111111111111111111111111111";
    await (await traces()).put(
      configTraceKey(ref("details")),
      Struct.wrap({ ...ingestRecord("details", 2, newer) }),
    );
    tracer.built([{ key: configKey(ref("details")), generation: 2, deleted: false }], Date.now());
    tracer.sent(first.connection, ROUTES);
    await eventually(() => first.state.traceIdSent === newer);

    // The older change's record arrives: the stream still holding it is stamped, the other keeps the newer id.
    const older = "22222222222222222222222222222222";
    await (await traces()).put(
      configTraceKey(ref("ratings")),
      Struct.wrap({ ...ingestRecord("ratings", 4, older) }),
    );
    await eventually(() => second.state.traceIdSent === older);
    assert.equal(first.state.traceIdSent, newer);
  });

  it("ignores a record of another generation", async () => {
    const { connection, state } = streamOf("sidecar~10.0.0.4~d.default~default.svc.cluster.local");
    tracer.built([{ key: configKey(ref("productpage")), generation: 7, deleted: false }], Date.now());
    tracer.sent(connection, ROUTES);
    const stale = "33333333333333333333333333333333";
    await (await traces()).put(
      configTraceKey(ref("productpage")),
      Struct.wrap({ ...ingestRecord("productpage", 6, stale) }),
    );
    const current = "44444444444444444444444444444444";
    await (await traces()).put(
      configTraceKey(ref("productpage")),
      Struct.wrap({ ...ingestRecord("productpage", 7, current) }),
    );
    await eventually(() => state.traceIdSent === current);
  });
});
