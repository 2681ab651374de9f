import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { DEBUG_TOKEN, eventually } from "@sextant/testing";
import { runCli } from "./capture.js";
import { FakeProxy, grpcSubscriptions } from "./fake-proxy.js";
import { HOST, type ProxyMesh, startProxyMesh } from "./mesh.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./otlp-receiver.js";

/**
 * The spans of a change leave through OTLP when a collector is configured:
 * ingest and push run the OpenTelemetry SDK with nothing but the standard
 * OTEL_EXPORTER_OTLP_ENDPOINT (so its default exporter, OTLP/HTTP with
 * protobuf), pointed at a receiver in this test.
 */
describe("a change's spans exported through OTLP", () => {
  let receiver: OtlpReceiver;
  let mesh: ProxyMesh;
  let proxy: FakeProxy;

  before(async () => {
    receiver = await startOtlpReceiver();
    mesh = await startProxyMesh(1, 1000, {
      OTEL_SDK_DISABLED: "false",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      // The batch processor's delay (5 s by default) only slows the test down.
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_METRICS_EXPORTER: "none",
      OTEL_LOGS_EXPORTER: "none",
    });
    proxy = new FakeProxy(mesh.xdsAddresses[0]!, "ratings", grpcSubscriptions(HOST, 9080));
  });
  after(async () => {
    proxy?.close();
    await mesh?.close();
    await receiver?.close();
  });

  it("carries ingest's config.store span and push's build, send and ACK spans of one change under one trace id", async () => {
    // Let the proxy get its first config, so that the change below is sent to it.
    await eventually(
      async () =>
        / SYNCED +SYNCED +SYNCED +SYNCED /.test(
          (await runCli(["--push", mesh.pushUrls[0]!, "--token", DEBUG_TOKEN, "proxy-status"])).stdout,
        ),
      { timeoutMs: 30_000, message: "the proxy never got its first config" },
    );
    await mesh.apply(`apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: ${HOST}
  trafficPolicy:
    connectionPool: {tcp: {connectTimeout: 7s}}
`);
    const trace = (await (
      await fetch(`${mesh.ingestUrl}/v1/trace/DestinationRule/default/reviews`)
    ).json()) as {
      stored: { traceId: string; spanId: string };
    };
    const traceId: string = trace.stored.traceId;
    const linked = (name: string) => (span: ReceivedSpan) =>
      span.service === "push" && span.name === name && span.links.some((link) => link.traceId === traceId);
    await eventually(
      async () =>
        receiver.spans.some((span) => span.name === "config.store" && span.traceId === traceId) &&
        ["push.build", "xds.send", "xds.ack"].every((name) => receiver.spans.some(linked(name))),
      { timeoutMs: 30_000, message: `not every span of trace ${traceId} arrived` },
    );
    const store = receiver.spans.find((span) => span.name === "config.store" && span.traceId === traceId)!;
    assert.equal(store.service, "ingest");
    assert.equal(store.spanId, trace.stored.spanId);
    // Push's spans link to the store span itself (a build may carry several changes, each its own trace).
    for (const name of ["push.build", "xds.send", "xds.ack"])
      assert.ok(
        receiver.spans
          .find(linked(name))!
          .links.some((link) => link.traceId === traceId && link.spanId === store.spanId),
        name,
      );
    assert.deepEqual([...receiver.contentTypes], ["application/x-protobuf"]);
  });
});
