import { after, before } from "node:test";
import { Buckets, type Bus, connectBus, encodeKey } from "@sextant/bus";
import { createLogger, Registry } from "@sextant/observability";
import {
  type ConfigResource,
  EndpointShard,
  HealthStatus,
  Protocol,
  Resolution,
  Service,
} from "@sextant/proto";
import {
  AggregatedDiscoveryServiceService,
  type DiscoveryRequest,
  type DiscoveryResponse,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { type StartedService, startService } from "@sextant/runtime";
import {
  debugTokenEnv,
  freePort,
  type GrpcServerFixture,
  type NatsServerFixture,
  startGrpcServer,
  startNatsServer,
} from "@sextant/testing";
import { XdsCache } from "../src/cache/xds-cache.js";
import { pushService } from "../src/main.js";
import {
  DiscoveryServer,
  type DiscoveryServerOptions,
  type StreamAuthorizer,
} from "../src/server/discovery-server.js";
import { XdsMetrics } from "../src/server/metrics.js";
import type { PushSettings } from "../src/settings.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { RecordingStream } from "./recording-stream.js";

/** A push replica started in-process. */
export interface PushFixture {
  readonly xdsAddress: string;
  readonly httpUrl: string;
  readonly service: StartedService<PushSettings>;
  stop(): Promise<void>;
}

/** Starts push against natsUrl on free ports. */
export async function startPush(natsUrl: string, env: Record<string, string> = {}): Promise<PushFixture> {
  const xdsPort = await freePort();
  const service = await startService(pushService, {
    NATS_URL: natsUrl,
    HTTP_PORT: "0",
    // The tests of push alone speak plaintext xDS: on here (off by default).
    XDS_PLAINTEXT_ENABLED: "true",
    XDS_PORT: String(xdsPort),
    XDS_TLS_ENABLED: "false",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    PUSH_DEBOUNCE_AFTER: "20",
    STATUS_FLUSH_MS: "50",
    // /debug/* accepts DEBUG_HEADERS' token.
    ...debugTokenEnv(),
    ...env,
  });
  return {
    xdsAddress: `127.0.0.1:${xdsPort}`,
    httpUrl: `http://127.0.0.1:${service.httpPort}`,
    service,
    stop: () => service.stop(),
  };
}

/** What pushForSuite gives a describe block's tests: push's addresses, a bus client, and clients closed for them. */
export interface PushSuite {
  readonly xdsAddress: string;
  readonly httpUrl: string;
  readonly natsUrl: string;
  readonly bus: Bus;
  /** Closes closer after the suite's tests, before push stops. */
  closeAfter<T extends { close(): void }>(closer: T): T;
  /** A new ADS client on push, closed after the suite's tests. */
  adsClient(): AdsTestClient;
}

/**
 * A nats-server, a bus client and push, shared by the enclosing describe block's tests (call it in the
 * describe body). Before them, seed writes to the bus what push finds when it starts, and push starts with
 * env; after them, the clients given to closeAfter close, then push, the bus client and nats-server stop.
 */
export function pushForSuite(
  options: { seed?: (bus: Bus) => Promise<void>; env?: Record<string, string> } = {},
): PushSuite {
  let nats: NatsServerFixture | undefined;
  let bus: Bus | undefined;
  let push: PushFixture | undefined;
  const closers: Array<{ close(): void }> = [];
  before(async () => {
    nats = await startNatsServer();
    bus = await testBus(nats.url);
    await options.seed?.(bus);
    push = await startPush(nats.url, options.env);
  });
  after(async () => {
    for (const closer of closers) closer.close();
    await push?.stop();
    await bus?.close();
    await nats?.dispose();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("pushForSuite: read before the suite's before() ran");
    return value;
  };
  const suite: PushSuite = {
    get xdsAddress() {
      return started(push).xdsAddress;
    },
    get httpUrl() {
      return started(push).httpUrl;
    },
    get natsUrl() {
      return started(nats).url;
    },
    get bus() {
      return started(bus);
    },
    closeAfter(closer) {
      closers.push(closer);
      return closer;
    },
    adsClient: () => suite.closeAfter(new AdsTestClient(suite.xdsAddress)),
  };
  return suite;
}

/**
 * push's ADS server alone, without NATS or main: a DiscoveryServer over `context` on a free port, with
 * push's xDS types, a fresh cache and metrics, no event handlers and one initial push at a time unless
 * options say otherwise; `authorize` refuses streams as XDS_AUTH would. Tests push through `discovery`.
 */
export async function startDiscoveryServer(
  options: Pick<DiscoveryServerOptions, "context"> & Partial<DiscoveryServerOptions>,
  authorize?: StreamAuthorizer,
): Promise<GrpcServerFixture & { discovery: DiscoveryServer }> {
  const discovery = new DiscoveryServer({
    logger: createLogger({ service: "test", level: "silent" }),
    metrics: new XdsMetrics(new Registry()),
    types: XDS_TYPES,
    cache: new XdsCache(),
    events: { connected: () => {}, disconnected: () => {}, changed: () => {}, nacked: () => {} },
    concurrency: 1,
    ...options,
  });
  const server = await startGrpcServer([
    { definition: AggregatedDiscoveryServiceService, implementation: discovery.implementation(authorize) },
  ]);
  return { ...server, discovery };
}

/** A bus client of the test's own. */
export function testBus(url: string): Promise<Bus> {
  return connectBus({ url, name: "push-test", logger: createLogger({ service: "test", level: "silent" }) });
}

/** Registers a service with one port and the given endpoints (what discovery would write). */
export async function registerService(
  bus: Bus,
  host: string,
  port: { name: string; number: number },
  endpoints: Array<{ address: string; port: number; labels: Record<string, string>; healthy?: boolean }>,
): Promise<void> {
  const [name = host, namespace = "default"] = host.split(".");
  await (await bus.bucket(Buckets.services)).put(
    encodeKey(namespace, host),
    Service.fromPartial({
      hostname: host,
      namespace,
      name,
      ports: [{ ...port, protocol: Protocol.PROTOCOL_GRPC }],
      resolution: Resolution.RESOLUTION_STATIC,
    }),
  );
  await (await bus.bucket(Buckets.endpoints)).put(
    encodeKey(namespace, host, "test"),
    EndpointShard.fromPartial({
      hostname: host,
      namespace,
      shard: "test",
      endpoints: endpoints.map((e) => ({
        address: e.address,
        ports: { [port.name]: e.port },
        labels: e.labels,
        namespace,
        health:
          e.healthy === false ? HealthStatus.HEALTH_STATUS_UNHEALTHY : HealthStatus.HEALTH_STATUS_HEALTHY,
      })),
    }),
  );
}

/** Stores a config resource as ingest would (spec in canonical JSON). */
export async function putConfig(
  bus: Bus,
  resource: Partial<ConfigResource> & { kind: string; name: string },
): Promise<void> {
  const namespace = resource.namespace ?? "default";
  const bucket = await bus.bucket(Buckets.config);
  const key = encodeKey(resource.kind, namespace, resource.name);
  const current = await bucket.get(key);
  await bucket.put(key, {
    apiVersion: "networking.istio.io/v1",
    labels: {},
    annotations: {},
    revision: 0,
    spec: {},
    ...resource,
    namespace,
    generation: (current?.value.generation ?? 0) + 1,
  });
}

/**
 * A hand-rolled ADS client: it sends exactly the requests a test writes and
 * queues every response, so tests can check the protocol step by step.
 */
export class AdsTestClient extends RecordingStream<DiscoveryRequest, DiscoveryResponse> {
  constructor(address: string) {
    super(address, (client) => client.streamAggregatedResources());
  }

  send(request: Partial<DiscoveryRequest>): void {
    this.stream.write({
      versionInfo: "",
      node: undefined,
      resourceNames: [],
      resourceLocators: [],
      typeUrl: "",
      responseNonce: "",
      errorDetail: undefined,
      ...request,
    });
  }

  /** ACKs response: its type, version and nonce, with resourceNames as the subscription. */
  ack(response: DiscoveryResponse, resourceNames: string[] = []): void {
    this.send({
      typeUrl: response.typeUrl,
      resourceNames,
      versionInfo: response.versionInfo,
      responseNonce: response.nonce,
    });
  }
}

/** The node of an ingress gateway pod (istio=ingressgateway in istio-system), as the agent's `proxy router` sends it. */
export const ingressGatewayNode = Node.fromPartial({
  id: "router~10.244.3.20~istio-ingressgateway-abc.istio-system~istio-system.svc.cluster.local",
  metadata: { NAMESPACE: "istio-system", LABELS: { istio: "ingressgateway" } },
  userAgentName: "test",
});

/** A Gateway on the ingress gateway with an HTTP server for every host on each port. */
export const ingressGatewaySpec = (ports: number[]) => ({
  selector: { istio: "ingressgateway" },
  servers: ports.map((number) => ({
    port: { number, name: `http-${number}`, protocol: "HTTP" },
    hosts: ["*"],
  })),
});

/**
 * Bookinfo at the ingress gateway: reviews (one v1 endpoint on 9080), the Gateway bookinfo-gateway on
 * port 8080, and the VirtualService bookinfo that routes every host through it to reviews.
 */
export async function putBookinfoGateway(bus: Bus): Promise<void> {
  await registerService(bus, "reviews.default.svc.cluster.local", { name: "http", number: 9080 }, [
    { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
  ]);
  await putConfig(bus, { kind: "Gateway", name: "bookinfo-gateway", spec: ingressGatewaySpec([8080]) });
  await putConfig(bus, {
    kind: "VirtualService",
    name: "bookinfo",
    spec: {
      hosts: ["*"],
      gateways: ["bookinfo-gateway"],
      http: [{ route: [{ destination: { host: "reviews", port: { number: 9080 } } }] }],
    },
  });
}

/** The node of a proxyless gRPC client in namespace default. */
export function grpcNode(pod = "client-1", metadata: Record<string, unknown> = {}) {
  return Node.fromPartial({
    id: `sidecar~10.0.0.1~${pod}.default~default.svc.cluster.local`,
    metadata: { GENERATOR: "grpc", NAMESPACE: "default", ...metadata },
    userAgentName: "test",
  });
}
