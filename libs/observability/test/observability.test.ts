import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import {
  Counter,
  createLogger,
  createMetricsRegistry,
  ReadinessGate,
  startHealthServer,
  startTelemetry,
} from "../src/index.js";

describe("logger", () => {
  it("writes one JSON object per line with level name and service, and redacts tokens", async () => {
    const destination = new PassThrough();
    const lines: string[] = [];
    destination.on("data", (chunk: Buffer) => lines.push(...chunk.toString().trim().split("\n")));
    const logger = createLogger({ service: "ca", destination });
    logger.info({ token: "secret-jwt", identity: "spiffe://cluster.local/ns/default/sa/x" }, "issued");
    await new Promise((resolve) => setImmediate(resolve));
    const line = JSON.parse(lines[0] ?? "{}");
    assert.equal(line.level, "info");
    assert.equal(line.service, "ca");
    assert.equal(line.msg, "issued");
    assert.equal(line.token, "[redacted]");
    assert.ok(!lines[0]?.includes("secret-jwt"));
  });
});

describe("health server", () => {
  it("serves /ready by its conditions and /metrics as Prometheus text", async () => {
    const registry = createMetricsRegistry("test");
    const applies = new Counter({
      name: "sextant_test_applies_total",
      help: "applies",
      registers: [registry],
    });
    applies.inc(3);
    const readiness = new ReadinessGate();
    readiness.require("nats");
    readiness.require("initial sync");
    const server = await startHealthServer({
      port: 0,
      host: "127.0.0.1",
      registry,
      readiness,
      routes: { "/debug/echo": () => ({ hello: "world" }) },
    });
    const base = `http://127.0.0.1:${server.port}`;
    try {
      let ready = await fetch(`${base}/ready`);
      assert.equal(ready.status, 503);
      assert.deepEqual(await ready.json(), { ready: false, pending: ["initial sync", "nats"] });
      readiness.done("nats");
      readiness.done("initial sync");
      ready = await fetch(`${base}/ready`);
      assert.equal(ready.status, 200);

      const metrics = await fetch(`${base}/metrics`);
      assert.match(metrics.headers.get("content-type") ?? "", /text\/plain/);
      assert.match(await metrics.text(), /sextant_test_applies_total\{service="test"\} 3/);

      assert.deepEqual(await (await fetch(`${base}/debug/echo`)).json(), { hello: "world" });
      assert.equal((await fetch(`${base}/nope`)).status, 404);
      assert.equal((await fetch(`${base}/ready`, { method: "POST" })).status, 405);

      // A service's own API shares the port; /metrics and /ready stay the server's.
      server.mount((request, response) =>
        response.writeHead(201).end(`api ${request.method} ${request.url}`),
      );
      const api = await fetch(`${base}/v1/apply`, { method: "POST", body: "x" });
      assert.equal(api.status, 201);
      assert.equal(await api.text(), "api POST /v1/apply");
      assert.equal((await fetch(`${base}/ready`)).status, 200);
      server.mount(undefined);
      assert.equal((await fetch(`${base}/v1/apply`)).status, 404);
    } finally {
      await server.close();
    }
  });
});

describe("telemetry", () => {
  it("does nothing when OTEL_SDK_DISABLED=true", async () => {
    const telemetry = await startTelemetry("test", { OTEL_SDK_DISABLED: "true" });
    assert.equal(telemetry.enabled, false);
    await telemetry.shutdown();
  });
});
