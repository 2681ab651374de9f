// Flow control over real ADS streams: a proxy that stops reading its stream
// never holds back the others and costs bounded memory (its unsent
// responses are replaced by newer ones, one per type), and a burst of
// reconnects is served through the push throttle without ever exceeding it.
// Nothing here is timed: pushes, slots and queued responses are counted.
import assert from "node:assert/strict";
import { type ClientHttp2Stream, connect } from "node:http2";
import { describe, it } from "node:test";
import { createLogger, Registry } from "@sextant/observability";
import {
  AggregatedDiscoveryServiceService,
  DeltaDiscoveryRequest,
  DeltaDiscoveryResponse,
  DiscoveryRequest,
  DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { eventually, metricValue, startGrpcServer } from "@sextant/testing";
import { XdsCache } from "../src/cache/xds-cache.js";
import type { PushContext } from "../src/model/push-context.js";
import { DiscoveryServer } from "../src/server/discovery-server.js";
import { XdsMetrics } from "../src/server/metrics.js";
import { MAX_UNFLUSHED } from "../src/server/send-queue.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { contextOf } from "./golden-inputs.js";
import { AdsTestClient, grpcNode } from "./harness.js";

const servicesUpTo = (count: number) =>
  Array.from({ length: count }, (_, i) => ({
    hostname: `svc-${i}.default.svc.cluster.local`,
    namespace: "default",
    name: `svc-${i}`,
    ports: [{ name: "grpc", number: 9080 }],
  }));
const clusterOf = (i: number) => `outbound|9080||svc-${i}.default.svc.cluster.local`;

function server(context: () => PushContext, concurrency: number, sendTimeoutMs?: number) {
  const registry = new Registry();
  const discovery = new DiscoveryServer({
    logger: createLogger({ service: "test", level: "silent" }),
    metrics: new XdsMetrics(registry),
    types: XDS_TYPES,
    cache: new XdsCache(),
    context,
    events: { connected: () => {}, disconnected: () => {}, changed: () => {}, nacked: () => {} },
    concurrency,
    ...(sendTimeoutMs === undefined ? {} : { sendTimeoutMs }),
  });
  return { discovery, registry };
}

/** One gRPC message: the 5-byte length prefix, then the bytes. */
function grpcFrame(bytes: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + bytes.length);
  frame.writeUInt32BE(bytes.length, 1);
  frame.set(bytes, 5);
  return frame;
}

/**
 * A raw HTTP/2 ADS stream that sends one request and does not read what
 * comes back until resume(): HTTP/2 flow control stops the server's writes
 * once the stream's window is full, as with a proxy that hangs.
 */
class StalledStream<Response> {
  readonly #session;
  readonly #stream: ClientHttp2Stream;
  #buffer = Buffer.alloc(0);
  readonly responses: Response[] = [];

  constructor(
    address: string,
    method: "StreamAggregatedResources" | "DeltaAggregatedResources",
    request: Uint8Array,
    private readonly decode: (bytes: Uint8Array) => Response,
  ) {
    this.#session = connect(`http://${address}`);
    this.#stream = this.#session.request({
      ":method": "POST",
      ":path": `/envoy.service.discovery.v3.AggregatedDiscoveryService/${method}`,
      "content-type": "application/grpc",
      te: "trailers",
    });
    // The server's shutdown at the end of the test resets the session: expected, not a failure.
    this.#session.on("error", () => {});
    this.#stream.on("error", () => {});
    this.#stream.write(grpcFrame(request));
    this.#stream.pause();
  }

  /** Reads again, decoding every response that arrives. */
  resume(): void {
    this.#stream.on("data", (chunk: Buffer) => {
      this.#buffer = Buffer.concat([this.#buffer, chunk]);
      while (this.#buffer.length >= 5 && this.#buffer.length >= 5 + this.#buffer.readUInt32BE(1)) {
        const length = this.#buffer.readUInt32BE(1);
        this.responses.push(this.decode(this.#buffer.subarray(5, 5 + length)));
        this.#buffer = this.#buffer.subarray(5 + length);
      }
    });
    this.#stream.resume();
  }

  close(): void {
    this.#stream.close();
    this.#session.close();
  }
}

describe("ADS flow control", () => {
  it("keeps pushing to a healthy proxy while another does not read, holding only its latest response", async () => {
    // 400 clusters of ~250 bytes: one response is more than an HTTP/2 window.
    let services = 400;
    let push = contextOf({ services: servicesUpTo(services) });
    const changes = 2 * MAX_UNFLUSHED + 4;
    const names = Array.from({ length: services + changes }, (_, i) => clusterOf(i));
    // Two slots: the stalled proxy's push may hold one until PUSH_SEND_TIMEOUT (short here, not measured).
    const { discovery, registry } = server(() => push, 2, 50);
    const grpc = await startGrpcServer([
      { definition: AggregatedDiscoveryServiceService, implementation: discovery.implementation() },
    ]);
    const request = (pod: string) =>
      DiscoveryRequest.fromPartial({ node: grpcNode(pod), typeUrl: TypeUrl.Cluster, resourceNames: names });
    const stalled = new StalledStream(
      grpc.address,
      "StreamAggregatedResources",
      DiscoveryRequest.encode(request("stalled")).finish(),
      DiscoveryResponse.decode,
    );
    const healthy = new AdsTestClient(grpc.address);
    try {
      const stalledConnection = await eventually(() =>
        discovery.connections().find((c) => c.proxy.id.includes("stalled")),
      );
      healthy.send(request("healthy"));
      let response = await healthy.next();
      assert.equal(response.resources.length, services);
      healthy.send({ typeUrl: TypeUrl.Cluster, resourceNames: names, responseNonce: response.nonce });

      for (let change = 0; change < changes; change++) {
        services += 1;
        push = contextOf({ services: servicesUpTo(services) });
        discovery.push({ full: true, endpointHosts: new Set() }, Date.now());
        response = await healthy.next();
        assert.equal(response.resources.length, services, "the healthy proxy gets every change");
        healthy.send({
          typeUrl: TypeUrl.Cluster,
          resourceNames: names,
          versionInfo: response.versionInfo,
          responseNonce: response.nonce,
        });
      }
      const healthyConnection = discovery.connections().find((c) => c.proxy.id.includes("healthy"));
      await eventually(
        () => healthyConnection?.watched.get(TypeUrl.Cluster)?.versionAcked === response.versionInfo,
        { message: "the healthy proxy ACKs the last" },
      );
      await discovery.idle();

      // The stalled proxy's queue is bounded: the transport's few, then one per type, the latest.
      const { held, unflushed } = stalledConnection.sendQueue;
      assert.ok(unflushed <= MAX_UNFLUSHED, `${unflushed} responses in the transport`);
      assert.deepEqual([...held.keys()], [TypeUrl.Cluster], "one held response, for its one type");
      const latest = held.get(TypeUrl.Cluster) as DiscoveryResponse;
      assert.equal(latest.versionInfo, response.versionInfo, "the held one is the latest");
      const metrics = await registry.metrics();
      assert.ok(metricValue(metrics, "sextant_xds_send_superseded", 'type="cds"') > 0);
      assert.ok(metricValue(metrics, "pilot_xds_write_timeout") > 0, "its pushes gave up their slots");
      assert.ok(metricValue(metrics, "sextant_xds_send_queue_depth") <= MAX_UNFLUSHED + 1);

      // Once it reads again it converges on the latest, without the responses that were replaced.
      stalled.resume();
      await eventually(() => stalled.responses.at(-1)?.versionInfo === response.versionInfo);
      assert.ok(stalled.responses.length <= MAX_UNFLUSHED + 1, `${stalled.responses.length} responses`);
      assert.ok(stalled.responses.length < changes + 1);
      assert.equal(stalled.responses.at(-1)?.resources.length, services);
    } finally {
      stalled.close();
      healthy.close();
      await grpc.close();
    }
  });

  it("merges a delta proxy's unsent diffs: once it reads again it holds every resource, none lost", async () => {
    let services = 400;
    let push = contextOf({ services: servicesUpTo(services) });
    const changes = 2 * MAX_UNFLUSHED + 4;
    const names = Array.from({ length: services + changes }, (_, i) => clusterOf(i));
    const { discovery, registry } = server(() => push, 2, 50);
    const grpc = await startGrpcServer([
      { definition: AggregatedDiscoveryServiceService, implementation: discovery.implementation() },
    ]);
    const request = DeltaDiscoveryRequest.fromPartial({
      node: grpcNode("stalled-delta"),
      typeUrl: TypeUrl.Cluster,
      resourceNamesSubscribe: names,
    });
    const stalled = new StalledStream(
      grpc.address,
      "DeltaAggregatedResources",
      DeltaDiscoveryRequest.encode(request).finish(),
      DeltaDiscoveryResponse.decode,
    );
    try {
      const connection = await eventually(() =>
        discovery.connections().find((c) => c.proxy.id.includes("stalled-delta")),
      );
      // Each change adds one cluster: each diff carries only it, so a diff replaced rather than merged would lose one.
      for (let change = 0; change < changes; change++) {
        services += 1;
        push = contextOf({ services: servicesUpTo(services) });
        discovery.push({ full: true, endpointHosts: new Set() }, Date.now());
        await discovery.idle();
      }
      assert.deepEqual([...connection.sendQueue.held.keys()], [TypeUrl.Cluster]);
      assert.ok(metricValue(await registry.metrics(), "sextant_xds_send_superseded", 'type="cds"') > 0);

      stalled.resume();
      const held = new Set<string>();
      await eventually(() => {
        for (const response of stalled.responses.splice(0)) {
          for (const name of response.removedResources) held.delete(name);
          for (const resource of response.resources) held.add(resource.name);
        }
        return held.size === services;
      });
      assert.deepEqual(
        [...held].sort(),
        names.slice(0, services).sort(),
        "every cluster, the ones of replaced diffs too",
      );
    } finally {
      stalled.close();
      await grpc.close();
    }
  });

  it("serves a burst of reconnects through the throttle: all converge, never more than its limit in flight", async () => {
    const streams = 300;
    const limit = 20;
    let services = 5;
    let push = contextOf({ services: servicesUpTo(services) });
    const names = Array.from({ length: services + 1 }, (_, i) => clusterOf(i));
    const { discovery, registry } = server(() => push, limit);
    const grpc = await startGrpcServer([
      { definition: AggregatedDiscoveryServiceService, implementation: discovery.implementation() },
    ]);
    const clients = Array.from({ length: streams }, () => new AdsTestClient(grpc.address));
    try {
      // Every stream opens at once, as after a replica restart.
      clients.forEach((client, i) => {
        client.send({ node: grpcNode(`burst-${i}`), typeUrl: TypeUrl.Cluster, resourceNames: names });
      });
      const initial = await Promise.all(clients.map((client) => client.next(60_000)));
      for (const [i, response] of initial.entries()) {
        assert.equal(response.resources.length, services);
        clients[i]?.send({
          typeUrl: TypeUrl.Cluster,
          resourceNames: names,
          versionInfo: response.versionInfo,
          responseNonce: response.nonce,
        });
      }
      assert.ok(discovery.throttle.throttled > 0, "the burst had to wait for slots");
      assert.ok(discovery.throttle.peak <= limit, `peak ${discovery.throttle.peak} slots in use`);

      // Then a change reaches all of them through the same slots.
      services += 1;
      push = contextOf({ services: servicesUpTo(services) });
      discovery.push({ full: true, endpointHosts: new Set() }, Date.now());
      const changed = await Promise.all(clients.map((client) => client.next(60_000)));
      assert.ok(changed.every((response) => response.resources.length === services));
      await discovery.idle();
      assert.ok(discovery.throttle.peak <= limit, `peak ${discovery.throttle.peak} slots in use`);
      assert.equal(discovery.throttle.inFlight, 0);
      const metrics = await registry.metrics();
      assert.equal(metricValue(metrics, "pilot_push_triggers", 'type="proxyrequest"'), streams);
      assert.equal(metricValue(metrics, "pilot_push_triggers", 'type="config"'), streams);
      assert.ok(metricValue(metrics, "sextant_push_throttled") > 0);
      assert.equal(metricValue(metrics, "sextant_push_throttle_in_flight"), 0);
    } finally {
      for (const client of clients) client.close();
      await grpc.close();
    }
  });
});
