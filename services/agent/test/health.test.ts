import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { JsonAnswer, ReadinessGate } from "@sextant/observability";
import { istioReadyRoute } from "../src/health.js";

describe("/healthz/ready", () => {
  test("answers as /ready does: 503 with what is pending, then 200", async () => {
    const readiness = new ReadinessGate();
    readiness.require("identity");
    readiness.require("sds");
    const route = istioReadyRoute(readiness);
    const pending = await route();
    assert.ok(pending instanceof JsonAnswer);
    assert.equal(pending.status, 503);
    assert.deepEqual(pending.body, { ready: false, pending: ["identity", "sds"] });
    readiness.done("identity");
    readiness.done("sds");
    assert.deepEqual(await route(), { ready: true, pending: [] });
  });
});
