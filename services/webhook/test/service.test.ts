import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { describe, it } from "node:test";
import { startService } from "@sextant/runtime";
import { eventually, freePort } from "@sextant/testing";
import { webhookService } from "../src/main.js";
import { post, selfSignedCert } from "./helpers.js";

describe("webhook service", () => {
  const ready = async (port: number) =>
    eventually(async () => (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200);

  it("starts and is ready without TLS files (admission not served), and without NATS, which it does not use", async () => {
    const service = await startService(webhookService, {
      // Nothing listens here: the webhook must not try to connect.
      NATS_URL: "nats://127.0.0.1:1",
      HTTP_PORT: "0",
      LOG_LEVEL: "silent",
      OTEL_SDK_DISABLED: "true",
    });
    try {
      await ready(service.httpPort);
    } finally {
      await service.stop();
    }
  });

  it("serves admission on HTTPS_PORT with TLS files, and metrics with istiod's names", async () => {
    const tls = selfSignedCert();
    const httpsPort = await freePort();
    const service = await startService(webhookService, {
      HTTP_PORT: "0",
      HTTPS_PORT: String(httpsPort),
      TLS_CERT_FILE: tls.certFile,
      TLS_KEY_FILE: tls.keyFile,
      LOG_LEVEL: "silent",
      OTEL_SDK_DISABLED: "true",
    });
    try {
      await ready(service.httpPort);
      const res = await post(httpsPort, "/validate", "{}", tls.cert);
      assert.equal(res.status, 400);
      const metrics = await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text();
      assert.match(metrics, /galley_validation_http_error\{status="400",service="webhook"\} 1/);
      assert.match(metrics, /sidecar_injection_requests_total/);
    } finally {
      await service.stop();
      rmSync(tls.dir, { recursive: true, force: true });
    }
  });
});
