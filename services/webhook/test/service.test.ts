import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { Buckets, connectBus, encodeKey } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { startService } from "@sextant/runtime";
import { eventually, freePort, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import jsonPatch from "fast-json-patch";
import { webhookService } from "../src/main.js";
import { podAdmissionReview, post, selfSignedCert } from "./helpers.js";

describe("webhook service", () => {
  let nats: NatsServerFixture;
  before(async () => {
    nats = await startNatsServer();
  });
  after(async () => {
    await nats?.dispose();
  });

  const ready = async (port: number) =>
    eventually(async () => (await fetch(`http://127.0.0.1:${port}/ready`)).status === 200);

  it("starts and is ready without TLS files (admission not served) once it has read the ProxyConfigs from NATS", async () => {
    const service = await startService(webhookService, {
      NATS_URL: nats.url,
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

  it("injects the ProxyConfigs ingest stored in sextant-config, and follows their changes", async () => {
    const bus = await connectBus({
      url: nats.url,
      name: "webhook-test",
      logger: createLogger({ service: "test", level: "silent" }),
    });
    const bucket = await bus.bucket(Buckets.config);
    const key = encodeKey("ProxyConfig", "shop", "threads");
    const store = (concurrency: number, generation: number) =>
      bucket.put(key, {
        kind: "ProxyConfig",
        apiVersion: "networking.istio.io/v1beta1",
        namespace: "shop",
        name: "threads",
        labels: {},
        annotations: {},
        generation,
        revision: 0,
        spec: { concurrency, environmentVariables: { FROM: "proxyconfig" } },
      });
    await store(3, 1);
    const tls = selfSignedCert();
    const httpsPort = await freePort();
    const service = await startService(webhookService, {
      NATS_URL: nats.url,
      HTTP_PORT: "0",
      HTTPS_PORT: String(httpsPort),
      TLS_CERT_FILE: tls.certFile,
      TLS_KEY_FILE: tls.keyFile,
      LOG_LEVEL: "silent",
      OTEL_SDK_DISABLED: "true",
    });
    const proxyConfigOf = async () => {
      const review = podAdmissionReview("u1", "shop", {
        metadata: { name: "web-0", labels: { app: "web" } },
        spec: { containers: [{ name: "app", image: "example/web:1" }] },
      });
      const res = await post(httpsPort, "/inject", JSON.stringify(review), tls.cert);
      const patch = JSON.parse(Buffer.from(res.json().response.patch, "base64").toString("utf8"));
      const pod = jsonPatch.applyPatch(structuredClone(review.request.object), patch)
        .newDocument as unknown as {
        spec: {
          containers: Array<{ name: string; env: unknown }>;
          initContainers?: Array<{ name: string; env: unknown }>;
        };
      };
      const proxy = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find(
        (c) => c.name === "istio-proxy",
      )!;
      const env = proxy.env as Array<{ name: string; value: string }>;
      return {
        proxyConfig: JSON.parse(env.find((e) => e.name === "PROXY_CONFIG")!.value),
        from: env.find((e) => e.name === "FROM")?.value,
      };
    };
    try {
      // Ready means the stored ProxyConfigs were read: the first pod already gets them.
      await ready(service.httpPort);
      const first = await proxyConfigOf();
      assert.equal(first.proxyConfig.concurrency, 3);
      assert.equal(first.from, "proxyconfig");
      await store(5, 2);
      await eventually(async () => (await proxyConfigOf()).proxyConfig.concurrency === 5, {
        message: "the changed ProxyConfig reached /inject",
      });
      await bucket.delete(key);
      await eventually(async () => (await proxyConfigOf()).proxyConfig.concurrency === undefined, {
        message: "the deleted ProxyConfig left /inject",
      });
    } finally {
      await service.stop();
      await bus.close();
      rmSync(tls.dir, { recursive: true, force: true });
    }
  });

  it("serves admission on HTTPS_PORT with TLS files, and metrics with istiod's names", async () => {
    const tls = selfSignedCert();
    const httpsPort = await freePort();
    const service = await startService(webhookService, {
      NATS_URL: nats.url,
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
