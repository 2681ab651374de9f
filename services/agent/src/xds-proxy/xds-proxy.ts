import {
  type ChannelCredentials,
  type ChannelOptions,
  Client,
  type ClientDuplexStream,
  status as GrpcStatus,
  Metadata,
  type ServerDuplexStream,
  type ServiceDefinition,
  type StatusObject,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import type { Logger } from "@sextant/observability";
import { AggregatedDiscoveryServiceService } from "@sextant/proto/envoy";

/** The raw bytes of a message, never decoded: the proxy must not depend on what push sends. */
const passthrough = (bytes: Buffer): Buffer => bytes;

const ADS_METHODS = {
  streamAggregatedResources: AggregatedDiscoveryServiceService.streamAggregatedResources.path,
  deltaAggregatedResources: AggregatedDiscoveryServiceService.deltaAggregatedResources.path,
} as const;

/**
 * envoy.service.discovery.v3.AggregatedDiscoveryService with byte-for-byte
 * serializers: the proxy forwards messages it never parses.
 */
export const PASSTHROUGH_ADS_SERVICE: ServiceDefinition = Object.fromEntries(
  Object.entries(ADS_METHODS).map(([name, path]) => [
    name,
    {
      path,
      requestStream: true,
      responseStream: true,
      requestSerialize: passthrough,
      requestDeserialize: passthrough,
      responseSerialize: passthrough,
      responseDeserialize: passthrough,
    },
  ]),
);

/**
 * The upstream channel's options. xDS responses of a large mesh exceed
 * grpc-js's default 4 MiB receive limit; push decides what to send, the proxy
 * only relays it. Keepalives find a dead push behind a silent network.
 */
const UPSTREAM_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.max_receive_message_length": -1,
  "grpc.keepalive_time_ms": 30_000,
  "grpc.keepalive_timeout_ms": 10_000,
};

/** Options of {@link XdsProxy}. */
export interface XdsProxyOptions {
  /** push's mTLS ADS address (XDS_ADDR). */
  upstreamAddress: string;
  /** Called once, when the first stream opens: the workload's mTLS credentials (tests pass insecure ones). */
  credentials: () => ChannelCredentials;
  logger: Logger;
}

/**
 * The xDS proxy: every ADS stream a local client (Envoy, or a proxyless gRPC
 * app) opens becomes one stream to push over mTLS with the workload's
 * certificate. Messages pass as raw bytes in both directions, with flow
 * control: a slow reader on one side slows the other. Either side ending
 * ends the other: the client's half-close and cancellation reach push, and
 * push's status (code and message, e.g. PERMISSION_DENIED from XDS_AUTH)
 * reaches the client.
 */
export class XdsProxy {
  readonly #options: XdsProxyOptions;
  readonly #upstreams = new Set<ClientDuplexStream<Buffer, Buffer>>();
  #client: Client | undefined;

  constructor(options: XdsProxyOptions) {
    this.#options = options;
  }

  /** The number of streams being relayed. */
  get streams(): number {
    return this.#upstreams.size;
  }

  /** The gRPC implementation, for {@link PASSTHROUGH_ADS_SERVICE}. */
  implementation(): UntypedServiceImplementation {
    return Object.fromEntries(
      Object.entries(ADS_METHODS).map(([name, path]) => [
        name,
        (call: ServerDuplexStream<Buffer, Buffer>) => this.#relay(call, path),
      ]),
    );
  }

  /** Cancels every upstream stream and closes the channel to push. */
  close(): void {
    for (const upstream of this.#upstreams) upstream.cancel();
    this.#upstreams.clear();
    this.#client?.close();
    this.#client = undefined;
  }

  #upstreamClient(): Client {
    this.#client ??= new Client(
      this.#options.upstreamAddress,
      this.#options.credentials(),
      UPSTREAM_CHANNEL_OPTIONS,
    );
    return this.#client;
  }

  #relay(downstream: ServerDuplexStream<Buffer, Buffer>, path: string): void {
    const { logger } = this.#options;
    const peer = downstream.getPeer();
    let upstream: ClientDuplexStream<Buffer, Buffer>;
    let client: Client;
    try {
      client = this.#upstreamClient();
      upstream = client.makeBidiStreamRequest(path, passthrough, passthrough, new Metadata());
    } catch (error) {
      logger.error({ err: error, path }, "xDS proxy: cannot open a stream to push");
      downstream.emit("error", {
        code: GrpcStatus.UNAVAILABLE,
        details: `the agent cannot reach push at ${this.#options.upstreamAddress}: ${(error as Error).message}`,
        metadata: new Metadata(),
      });
      return;
    }
    this.#upstreams.add(upstream);
    logger.debug({ peer, path }, "xDS proxy: stream opened");
    let downstreamGone = false;

    // Client to push. write() returning false means push's side is full:
    // stop reading from the client until it drains.
    downstream.on("data", (message: Buffer) => {
      if (!upstream.write(message)) {
        downstream.pause();
        upstream.once("drain", () => downstream.resume());
      }
    });
    // The client half-closed: so does the proxy towards push, which ends the call.
    downstream.on("end", () => upstream.end());
    downstream.on("cancelled", () => {
      downstreamGone = true;
      upstream.cancel();
    });
    // Emitted by the proxy itself when it ends the call with push's status; nothing to do.
    downstream.on("error", () => {});

    // Push to client, the same way round.
    upstream.on("data", (message: Buffer) => {
      if (downstreamGone) return;
      if (!downstream.write(message)) {
        upstream.pause();
        downstream.once("drain", () => upstream.resume());
      }
    });
    // grpc-js ends the readable side before it reports the status, and a
    // non-OK status also comes as an "error" event; the status event is
    // the one place to act, once the messages before it have been relayed.
    upstream.on("error", () => {});
    upstream.on("status", (status: StatusObject) => {
      this.#upstreams.delete(upstream);
      // A replica at its PUSH_MAX_STREAMS: the client's retry should open a
      // new connection, which the push Service may send to another replica.
      // Streams still open on the old channel finish on it.
      if (status.code === GrpcStatus.RESOURCE_EXHAUSTED && this.#client === client) {
        this.#client = undefined;
        client.close();
      }
      const finish = () => {
        if (downstreamGone) return;
        if (status.code === GrpcStatus.OK) {
          downstream.end();
        } else {
          logger.info(
            { peer, path, code: status.code, details: status.details },
            "xDS proxy: push ended the stream",
          );
          downstream.emit("error", { code: status.code, details: status.details, metadata: new Metadata() });
        }
      };
      if (upstream.readableEnded) finish();
      else upstream.once("end", finish);
    });
  }
}
