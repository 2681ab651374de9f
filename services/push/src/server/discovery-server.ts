import { status as GrpcStatus, Metadata, type ServerDuplexStream } from "@grpc/grpc-js";
import { spiffeIdOfPeer } from "@sextant/identity";
import type { Logger } from "@sextant/observability";
import type { ConfigRef } from "@sextant/proto";
import type { AggregatedDiscoveryServiceServer } from "@sextant/proto/envoy";
import type { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { XdsCache } from "../cache/xds-cache.js";
import { InvalidNodeError, type MeshProxy, parseProxy } from "../model/proxy.js";
import type { PushContext } from "../model/push-context.js";
import type { PushChange } from "../model/types.js";
import type { EnvoyFilterFailures } from "../translate/envoyfilter/failures.js";
import type { Connection, StreamCallbacks, WatchState } from "./connection.js";
import { DeltaConnection } from "./delta-connection.js";
import { GeneratedResources } from "./generated-resources.js";
import type { XdsMetrics } from "./metrics.js";
import { PushQueue } from "./push-queue.js";
import { PushThrottle } from "./push-throttle.js";
import { SotwConnection } from "./sotw-connection.js";
import type { XdsTypeTable } from "./xds-type-table.js";

/** What the server tells the rest of push about. */
export interface DiscoveryServerEvents {
  /** A stream opened (after its first request named the node). */
  connected(connection: Connection): void;
  /** A stream closed. */
  disconnected(connection: Connection): void;
  /** A proxy's sync state changed (a response, an ACK, a NACK). */
  changed(connection: Connection): void;
  /** A proxy rejected a response; configs are the resources it was built from. */
  nacked(
    connection: Connection,
    typeUrl: string,
    resourceNames: string[],
    message: string,
    configs: ConfigRef[],
  ): void;
}

/** Decides whether a stream (of either variant) may serve the proxy it named; returns why not, or undefined. */
export type StreamAuthorizer = (
  stream: Pick<ServerDuplexStream<unknown, unknown>, "getAuthContext" | "getPeer">,
  proxy: MeshProxy,
) => string | undefined;

/** Options of {@link DiscoveryServer}. */
export interface DiscoveryServerOptions {
  logger: Logger;
  metrics: XdsMetrics;
  /** The xDS types served: their generators, push order, metric labels and wildcard rules. */
  types: XdsTypeTable;
  /** Generated resources shared by every proxy; the server empties it when the config version changes. */
  cache: XdsCache;
  /** The current snapshot; undefined until the initial sync is done. */
  context: () => PushContext | undefined;
  events: DiscoveryServerEvents;
  /** Follows config changes to every proxy's answer (status/change-tracer.ts); none in some tests. */
  tracer?: StreamTracer;
  /** Pushes in flight at once, initial pushes included (PUSH_THROTTLE). */
  concurrency: number;
  /** How long a push waits for a slow stream's transport before giving up its slot (PUSH_SEND_TIMEOUT); 5 s if not given. */
  sendTimeoutMs?: number;
  /** Where refused EnvoyFilter patches are reported (translate/envoyfilter/failures.ts); none in some tests. */
  envoyFilterFailures?: EnvoyFilterFailures;
  /** Streams served at once, over both ports and both variants; 0 or none: no limit (PUSH_MAX_STREAMS). */
  maxStreams?: number;
}

/** What a change's trace learns from the streams: each response, ACK and NACK, and each push decided. */
export interface StreamTracer {
  sent(connection: Connection, typeUrl: string): void;
  acked(connection: Connection, typeUrl: string): void;
  nacked(connection: Connection, typeUrl: string, message: string): void;
  pushed(connection: Connection): void;
}

/**
 * DiscoveryServer serves ADS in both of Envoy's protocol variants
 * (istiod's DiscoveryServer): state-of-the-world and incremental (delta).
 * It opens streams, schedules pushes and keeps the bookkeeping they share:
 * metrics, status events and NACK reports. What each variant sends and when
 * is its Connection's business ({@link SotwConnection}, {@link DeltaConnection});
 * which types exist and how their resources are built is the type table's
 * ({@link XdsTypeTable}), whose generators run through the cache it is given.
 */
export class DiscoveryServer {
  readonly #connections = new Map<string, Connection>();
  readonly #queue: PushQueue;
  readonly #throttle: PushThrottle;
  readonly #resources: GeneratedResources;
  readonly #callbacks: StreamCallbacks;
  /** Streams accepted and not yet closed, identified or not: what PUSH_MAX_STREAMS bounds. */
  #streams = 0;

  constructor(private readonly options: DiscoveryServerOptions) {
    const { metrics } = options;
    this.#throttle = new PushThrottle(options.concurrency, {
      throttled: () => metrics.throttled.inc(),
      dequeued: (waited) => metrics.queueTime.observe(waited),
      changed: (inFlight, waiting) => {
        metrics.throttleInFlight.set(inFlight);
        metrics.throttleWaiting.set(waiting);
      },
    });
    this.#queue = new PushQueue(options.concurrency, (id, change, startedAt) =>
      this.#throttle.run(() => this.pushTo(id, change, startedAt)),
    );
    this.#resources = new GeneratedResources(
      options.types,
      options.cache,
      options.context,
      options.logger,
      options.envoyFilterFailures,
    );
    // What connections of either variant report to the server.
    this.#callbacks = {
      logger: options.logger,
      responded: (connection, typeUrl, bytes, startedAt) => {
        const type = options.types.label(typeUrl);
        options.metrics.pushes.inc({ type });
        options.metrics.configSize.observe({ type }, bytes);
        if (startedAt !== undefined) options.metrics.convergence.observe((Date.now() - startedAt) / 1000);
        options.tracer?.sent(connection, typeUrl);
        options.events.changed(connection);
      },
      acked: (connection, typeUrl) => {
        options.tracer?.acked(connection, typeUrl);
        options.events.changed(connection);
      },
      nacked: (connection, typeUrl, state, nonce, message) =>
        this.recordNack(connection, typeUrl, state, nonce, message),
      expiredNonce: (_connection, typeUrl) =>
        options.metrics.expiredNonces.inc({ type: options.types.label(typeUrl) }),
      sendQueue: {
        sent: (seconds) => metrics.sendTime.observe(seconds),
        superseded: (typeUrl) => metrics.superseded.inc({ type: options.types.label(typeUrl) }),
        depth: (delta) => metrics.sendQueueDepth.inc(delta),
      },
    };
  }

  /**
   * The gRPC implementation of envoy.service.discovery.v3.AggregatedDiscoveryService.
   * Each port gets its own: the mTLS port passes an authorizer (XDS_AUTH).
   */
  implementation(authorize?: StreamAuthorizer): AggregatedDiscoveryServiceServer {
    return {
      streamAggregatedResources: (stream) =>
        this.serve(
          stream,
          authorize,
          (proxy) => new SotwConnection(proxy, this.#resources, this.#callbacks, stream),
        ),
      deltaAggregatedResources: (stream) =>
        this.serve(
          stream,
          authorize,
          (proxy) => new DeltaConnection(proxy, this.#resources, this.#callbacks, stream),
        ),
    };
  }

  /** Every open stream on this replica. */
  connections(): Connection[] {
    return [...this.#connections.values()];
  }

  /** Schedules a push of change to every connected proxy; the queue merges repeats per proxy. */
  push(change: PushChange, startedAt: number): void {
    for (const id of this.#connections.keys()) this.#queue.enqueue(id, change, startedAt);
  }

  /** Resolves once every scheduled push has been sent (tests and benchmarks). */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  /** The push throttle's slots in use, pushes waiting, the most slots ever in use, and pushes that waited. */
  get throttle(): PushThrottle["stats"] {
    return this.#throttle.stats;
  }

  /** Closes every stream. */
  closeAll(): void {
    for (const connection of this.#connections.values()) connection.close();
  }

  /** The xDS types this server serves. */
  get types(): XdsTypeTable {
    return this.options.types;
  }

  /**
   * Runs one stream of either variant: its first request opens the
   * connection (or refuses the stream), then every request goes to it.
   */
  private serve<Request extends { node?: Node | undefined; typeUrl: string }>(
    stream: ServerDuplexStream<Request, unknown>,
    authorize: StreamAuthorizer | undefined,
    connect: (proxy: MeshProxy) => Connection<Request>,
  ): void {
    if (this.refusedForLimit(stream)) return;
    let streamOpen = true;
    this.#streams++;
    let connection: Connection<Request> | undefined;
    // Requests of one stream are handled one at a time, in order.
    let handling: Promise<void> = Promise.resolve();
    const handle = (request: Request) => {
      if (!connection) {
        connection = this.open(stream, request, authorize, connect);
        if (!connection) return;
      }
      connection.handle(request);
    };
    const close = () => {
      if (streamOpen) {
        streamOpen = false;
        this.#streams--;
      }
      connection?.streamClosed();
      if (!connection || !this.#connections.has(connection.id)) return;
      this.#connections.delete(connection.id);
      this.options.metrics.connected.dec();
      this.options.events.disconnected(connection);
    };
    stream.on("data", (request: Request) => {
      handling = handling
        .then(() => {
          // A type's first request on a stream is an initial push, the whole
          // set: it takes a throttle slot, in arrival order, as change pushes
          // do, so a burst of reconnects cannot flood the event loop and the
          // memory with every stream's full config at once.
          if (connection?.watched.has(request.typeUrl)) return handle(request);
          return this.#throttle.run(() => {
            handle(request);
            if (connection) {
              this.options.metrics.pushTriggers.inc({ type: "proxyrequest" });
              return this.untilSent(connection.flushed());
            }
          });
        })
        .catch((error) =>
          this.options.logger.error({ err: error, proxy: connection?.proxy.id }, "xDS request failed"),
        );
    });
    stream.on("end", () => {
      close();
      stream.end();
    });
    stream.on("error", close);
    stream.on("close", close);
    stream.on("cancelled", close);
  }

  /**
   * Ends a new stream at once with RESOURCE_EXHAUSTED when PUSH_MAX_STREAMS
   * are open, before its first request is read: the client retries, and
   * over a new connection may reach another replica. Streams already open
   * are not touched. Logged at debug only: under a reconnect storm a line
   * per refusal would add to the overload; the metric counts them.
   */
  private refusedForLimit(stream: ServerDuplexStream<unknown, unknown>): boolean {
    const max = this.options.maxStreams ?? 0;
    if (max <= 0 || this.#streams < max) return false;
    this.options.metrics.streamLimitRefusals.inc();
    this.options.logger.debug(
      { peer: stream.getPeer(), max },
      "refusing an xDS stream: PUSH_MAX_STREAMS reached",
    );
    endWithStatus(
      stream,
      GrpcStatus.RESOURCE_EXHAUSTED,
      `this push replica serves at most ${max} xDS streams (PUSH_MAX_STREAMS); connect to another replica`,
    );
    return true;
  }

  /** Reads the node of a stream's first request and authorizes it; undefined if the stream was refused. */
  private open<Request extends { node?: Node | undefined }>(
    stream: ServerDuplexStream<Request, unknown>,
    request: Request,
    authorize: StreamAuthorizer | undefined,
    connect: (proxy: MeshProxy) => Connection<Request>,
  ): Connection<Request> | undefined {
    let proxy: MeshProxy;
    try {
      proxy = parseProxy(request.node);
    } catch (error) {
      if (!(error instanceof InvalidNodeError)) throw error;
      this.options.logger.warn({ node: request.node?.id, reason: error.message }, "refusing an xDS stream");
      endWithStatus(stream, GrpcStatus.INVALID_ARGUMENT, error.message);
      return undefined;
    }
    const refusal = authorize?.(stream, proxy);
    if (refusal) {
      this.options.logger.warn(
        { proxy: proxy.id, peer: stream.getPeer(), reason: refusal },
        "refusing an xDS stream",
      );
      this.options.metrics.authorizationFailures.inc();
      endWithStatus(stream, GrpcStatus.PERMISSION_DENIED, refusal);
      return undefined;
    }
    const connection = connect(proxy);
    // Only a port with an authorizer (mTLS, client certificate required and
    // verified) proves who the peer is.
    if (authorize) connection.verifiedIdentity = spiffeIdOfPeer(stream.getAuthContext()?.sslPeerCertificate);
    this.#connections.set(connection.id, connection);
    this.options.metrics.connected.inc();
    this.options.logger.info(
      { proxy: proxy.id, kind: proxy.kind, protocol: connection.protocol, stream: connection.id },
      "proxy connected",
    );
    this.options.events.connected(connection);
    return connection;
  }

  /**
   * Pushes one change to one connection: every watched type, in the table's
   * order; each decides what to send. Resolves (freeing the throttle slot)
   * once nothing is held back, as gRPC-Go's Send returns once its message
   * fits the transport: at once for a proxy that reads, up to
   * PUSH_SEND_TIMEOUT for one that does not. An initial push, the whole
   * config, holds its slot until the transport took every byte, which is
   * what paces a burst of reconnects.
   */
  private pushTo(id: string, change: PushChange, startedAt: number): Promise<void> | undefined {
    const connection = this.#connections.get(id);
    if (!connection) return;
    this.options.metrics.pushTriggers.inc({ type: triggerOf(change) });
    for (const { typeUrl } of this.options.types.types) {
      if (connection.watched.has(typeUrl)) connection.push(typeUrl, change, startedAt);
    }
    this.options.tracer?.pushed(connection);
    if (connection.sendQueue.held.size > 0) return this.untilSent(connection.unblocked());
  }

  /**
   * Resolves when sent does, or after PUSH_SEND_TIMEOUT: a proxy that does
   * not read keeps its slot no longer than that, and its stream stays open
   * with its newest responses held, one per type. (istiod 1.30 holds the
   * slot for as long as Send blocks; its former PILOT_XDS_SEND_TIMEOUT
   * failed the stream instead.)
   */
  private async untilSent(sent: Promise<void>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), this.options.sendTimeoutMs ?? 5_000);
    });
    if (await Promise.race([sent.then(() => false), timedOut])) this.options.metrics.writeTimeouts.inc();
    clearTimeout(timer);
  }

  /** Records a NACK and reports it, traced to the config resources that built what was rejected. */
  private recordNack(
    connection: Connection,
    typeUrl: string,
    state: WatchState,
    nonce: string,
    message: string,
  ): void {
    state.lastNack = { version: state.versionSent ?? "", nonce, message, at: new Date() };
    this.options.tracer?.nacked(connection, typeUrl, message);
    this.options.metrics.rejects.inc({ type: this.options.types.label(typeUrl) });
    // Trace the rejection to the resources the message names, or else to every resource of the response.
    const named = state.sent.filter((resource) => message.includes(resource.name));
    const culprits = named.length > 0 ? named : state.sent;
    const configs = new Map<string, ConfigRef>();
    for (const resource of culprits) {
      for (const ref of resource.sources) configs.set(`${ref.kind}/${ref.namespace}/${ref.name}`, ref);
    }
    this.options.logger.warn(
      {
        proxy: connection.proxy.id,
        protocol: connection.protocol,
        type: this.options.types.label(typeUrl),
        version: state.versionSent,
        nack: message,
      },
      "proxy rejected config",
    );
    this.options.events.nacked(
      connection,
      typeUrl,
      culprits.map((r) => r.name),
      message,
      [...configs.values()],
    );
    this.options.events.changed(connection);
  }
}

/** The reason of a push, as istiod's pilot_push_triggers labels it. */
function triggerOf(change: PushChange): string {
  if (change.full) return "config";
  if (change.secrets && change.secrets.size > 0) return "secret";
  return "endpoint";
}

/**
 * Ends a server stream with a gRPC status. grpc-js sends the status of an
 * "error" event emitted on the call; destroy() would only reset the stream.
 */
function endWithStatus(
  stream: { emit(event: "error", status: object): boolean },
  code: GrpcStatus,
  details: string,
): void {
  stream.emit("error", { code, details, metadata: new Metadata() });
}
