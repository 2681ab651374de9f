// push's ADS server: one stream's requests, as the gRPC layer hands them
// over, through the DiscoveryServer and its connection state machines
// (state of the world and incremental) against a Bookinfo snapshot. The
// input's first byte picks the variant; the rest is a sequence of
// length-delimited DiscoveryRequest (or DeltaDiscoveryRequest) messages.
// grpc-js fails the stream at a message that does not decode, after push
// handled those before it; a request push refuses ends the stream with a
// gRPC status. Anything push logs as "xDS request failed" (an exception in
// handling) is a failure; nothing is a refusal.
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { prepareDocuments } from "@sextant/ingest/fuzzing";
import { configKey } from "@sextant/model";
import { createLogger, Registry } from "@sextant/observability";
import { type ConfigResource, EndpointShard, Protocol, Resolution, Service } from "@sextant/proto";
import {
  DeltaDiscoveryRequest,
  DiscoveryRequest,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { DiscoveryServer, PushContext, XDS_TYPES, XdsCache, XdsMetrics } from "@sextant/push/fuzzing";
import { decodeStream, encodeFrames, frames, LAST_NONCE } from "../framing.js";
import type { FuzzTarget } from "../target.js";

const SOTW = 0;
const DELTA = 1;

/** A server stream as grpc-js hands it to push, recording what push sends. */
class FakeStream extends EventEmitter {
  readonly sent: Array<DiscoveryResponse & { nonce: string; typeUrl: string }> = [];
  ended = false;
  write(message: DiscoveryResponse & { nonce: string }, callback?: (error?: Error | null) => void): boolean {
    this.sent.push(message);
    if (callback) setImmediate(callback);
    return true;
  }
  end(): void {
    this.ended = true;
  }
  getPeer(): string {
    return "127.0.0.1:1";
  }
  getAuthContext(): object {
    return {};
  }
  sendMetadata(): void {}
}

let server: DiscoveryServer;
const failures: string[] = [];

const BOOKINFO = ["productpage", "details", "reviews", "ratings"];

async function setup(): Promise<void> {
  const sample = (file: string) =>
    readFileSync(new URL(`../../../samples/bookinfo/networking/${file}`, import.meta.url), "utf8");
  const prepared = prepareDocuments(
    [
      sample("destination-rule-all-mtls.yaml"),
      sample("virtual-service-reviews-80-20.yaml"),
      sample("bookinfo-gateway.yaml"),
    ].join("\n---\n"),
    { maxDocuments: 100 },
  );
  if (prepared.errors.length > 0)
    throw new Error(`the snapshot's config is invalid: ${prepared.errors[0]!.message}`);
  const config = new Map<string, ConfigResource>(
    prepared.resources.map(({ resource }) => [configKey(resource), resource]),
  );
  const services = new Map<string, Service>();
  const endpointShards = new Map<string, { hostname: string; endpoints: EndpointShard["endpoints"] }>();
  BOOKINFO.forEach((name, i) => {
    const hostname = `${name}.default.svc.cluster.local`;
    services.set(
      hostname,
      Service.fromPartial({
        hostname,
        namespace: "default",
        name,
        ports: [{ name: "http", number: 9080, protocol: Protocol.PROTOCOL_HTTP }],
        resolution: Resolution.RESOLUTION_STATIC,
      }),
    );
    endpointShards.set(hostname, {
      hostname,
      endpoints: EndpointShard.fromJSON({
        endpoints: [
          {
            address: `10.0.0.${i + 10}`,
            ports: { http: 9080 },
            labels: { app: name, version: "v1" },
            serviceAccount: `bookinfo-${name}`,
            health: "HEALTH_STATUS_HEALTHY",
          },
        ],
      }).endpoints,
    });
  });
  const context = PushContext.build({ config, services, endpointShards, domainSuffix: "cluster.local" });
  server = new DiscoveryServer({
    logger: createLogger({
      service: "fuzz",
      level: "error",
      destination: new Writable({
        write(line, _encoding, done) {
          failures.push(String(line));
          done();
        },
      }),
    }),
    metrics: new XdsMetrics(new Registry()),
    types: XDS_TYPES,
    cache: new XdsCache(),
    context: () => context,
    events: { connected: () => {}, disconnected: () => {}, changed: () => {}, nacked: () => {} },
    concurrency: 4,
  });
}

/** Lets the stream's handling chain, the throttle and the send queue's callbacks run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    const { inFlight, waiting } = server.throttle;
    if (i >= 2 && inFlight === 0 && waiting === 0) return;
  }
}

export const target: FuzzTarget = {
  tokens: [
    TypeUrl.Listener,
    TypeUrl.Cluster,
    TypeUrl.RouteConfiguration,
    TypeUrl.ClusterLoadAssignment,
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
    "sidecar~10.0.0.1~productpage-v1-1.default~default.svc.cluster.local",
    "router~10.0.0.2~ingressgateway-1.istio-system~istio-system.svc.cluster.local",
    "*",
    LAST_NONCE,
    "outbound|9080||reviews.default.svc.cluster.local",
    "inbound|9080||",
    "NAMESPACE",
    "LABELS",
    "GENERATOR",
    "grpc",
    "ISTIO_VERSION",
    "INTERCEPTION_MODE",
    "INSTANCE_IPS",
  ],
  setup,
  async run(input) {
    if (input.length === 0) return;
    const variant = input[0]! % 2;
    const codec = variant === SOTW ? DiscoveryRequest : DeltaDiscoveryRequest;
    const { decoded: requests, broken } = decodeStream<DiscoveryRequest | DeltaDiscoveryRequest>(
      frames(input, 1),
      (bytes) => codec.decode(bytes),
    );
    const stream = new FakeStream();
    const serve = server.implementation();
    if (variant === SOTW) serve.streamAggregatedResources(stream as never);
    else serve.deltaAggregatedResources(stream as never);
    failures.length = 0;
    for (const request of requests) {
      if (stream.ended) break;
      if (request.responseNonce === LAST_NONCE) {
        const last = stream.sent.findLast((response) => response.typeUrl === request.typeUrl);
        request.responseNonce = last?.nonce ?? "";
      }
      stream.emit("data", request);
      await settle();
    }
    // A message that does not decode fails the call in grpc-js: the stream errors out.
    stream.emit(broken ? "error" : "end");
    await settle();
    if (failures.length > 0) throw new Error(`push failed on a request: ${failures.join("\n")}`);
  },
  refusal: () => false,
};

/** Envoy's and a proxyless gRPC client's streams: subscriptions, ACKs, NACKs, a change of names, an unsubscribe. */
export function adsSeeds(): Record<string, Uint8Array> {
  const sidecar = Node.fromPartial({
    id: "sidecar~10.0.0.10~productpage-v1-1.default~default.svc.cluster.local",
    cluster: "productpage.default",
    metadata: {
      NAMESPACE: "default",
      LABELS: { app: "productpage", version: "v1" },
      ISTIO_VERSION: "1.30.3",
      INTERCEPTION_MODE: "REDIRECT",
      INSTANCE_IPS: "10.0.0.10",
      SERVICE_ACCOUNT: "bookinfo-productpage",
      CLUSTER_ID: "Kubernetes",
    },
  });
  const grpc = Node.fromPartial({
    id: "sidecar~10.0.0.11~reviews-v1-1.default~default.svc.cluster.local",
    metadata: { GENERATOR: "grpc", NAMESPACE: "default" },
  });
  const router = Node.fromPartial({
    id: "router~10.0.0.2~istio-ingressgateway-1.istio-system~istio-system.svc.cluster.local",
    metadata: { NAMESPACE: "istio-system", LABELS: { istio: "ingressgateway" } },
  });
  const sotw = (...requests: Partial<DiscoveryRequest>[]) =>
    encodeFrames(
      [SOTW],
      requests.map((r) => DiscoveryRequest.encode(DiscoveryRequest.fromPartial(r)).finish()),
    );
  const delta = (...requests: Partial<DeltaDiscoveryRequest>[]) =>
    encodeFrames(
      [DELTA],
      requests.map((r) => DeltaDiscoveryRequest.encode(DeltaDiscoveryRequest.fromPartial(r)).finish()),
    );
  const reviewsCluster = "outbound|9080||reviews.default.svc.cluster.local";
  return {
    "sotw-sidecar.bin": sotw(
      { node: sidecar, typeUrl: TypeUrl.Cluster },
      { typeUrl: TypeUrl.Cluster, responseNonce: LAST_NONCE, versionInfo: "v" },
      { typeUrl: TypeUrl.Listener },
      { typeUrl: TypeUrl.ClusterLoadAssignment, resourceNames: [reviewsCluster] },
      { typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["9080"] },
      {
        typeUrl: TypeUrl.Listener,
        responseNonce: LAST_NONCE,
        errorDetail: { code: 3, message: "rejected", details: [] },
      },
    ),
    "sotw-grpc.bin": sotw(
      { node: grpc, typeUrl: TypeUrl.Listener, resourceNames: ["reviews.default.svc.cluster.local:9080"] },
      {
        typeUrl: TypeUrl.Listener,
        responseNonce: LAST_NONCE,
        resourceNames: ["reviews.default.svc.cluster.local:9080"],
      },
      { typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["reviews.default.svc.cluster.local:9080"] },
      { typeUrl: TypeUrl.Cluster, resourceNames: [reviewsCluster] },
      { typeUrl: TypeUrl.Cluster, responseNonce: LAST_NONCE, resourceNames: [] },
    ),
    "sotw-router.bin": sotw(
      { node: router, typeUrl: TypeUrl.Cluster },
      { typeUrl: TypeUrl.Listener },
      { typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["http.8080"] },
    ),
    "sotw-bad-node.bin": sotw({ node: Node.fromPartial({ id: "nonsense" }), typeUrl: TypeUrl.Cluster }),
    "delta-sidecar.bin": delta(
      { node: sidecar, typeUrl: TypeUrl.Cluster, resourceNamesSubscribe: ["*"] },
      { typeUrl: TypeUrl.Cluster, responseNonce: LAST_NONCE },
      { typeUrl: TypeUrl.ClusterLoadAssignment, resourceNamesSubscribe: [reviewsCluster] },
      { typeUrl: TypeUrl.ClusterLoadAssignment, resourceNamesUnsubscribe: [reviewsCluster] },
      { typeUrl: TypeUrl.Listener, initialResourceVersions: { virtualOutbound: "x" } },
      {
        typeUrl: TypeUrl.Listener,
        responseNonce: LAST_NONCE,
        errorDetail: { code: 3, message: "rejected", details: [] },
      },
    ),
    "delta-grpc.bin": delta(
      {
        node: grpc,
        typeUrl: TypeUrl.Listener,
        resourceNamesSubscribe: ["reviews.default.svc.cluster.local:9080"],
      },
      { typeUrl: TypeUrl.Listener, responseNonce: LAST_NONCE },
    ),
  };
}
