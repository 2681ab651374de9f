import { status as GrpcStatus, Metadata, type ServerDuplexStream } from "@grpc/grpc-js";
import type { Logger } from "@sextant/observability";
import type { ConfigRef } from "@sextant/proto";
import {
  type AggregatedDiscoveryServiceServer,
  type DiscoveryRequest,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { XdsCache } from "../cache/xds-cache.js";
import { InvalidNodeError, type MeshProxy, parseProxy } from "../model/proxy.js";
import type { PushContext } from "../model/push-context.js";
import type { PushChange } from "../translate/generator.js";
import { GENERATORS } from "../translate/generators.js";
import { Connection, contentVersion, requestedNames, sameNames, type WatchState } from "./connection.js";
import { typeLabel, type XdsMetrics } from "./metrics.js";
import { PushQueue } from "./push-queue.js";

/** Types are pushed in this order, as istiod does: clusters and endpoints before the listeners and routes that use them. */
const PUSH_ORDER = [
  TypeUrl.Cluster,
  TypeUrl.ClusterLoadAssignment,
  TypeUrl.Listener,
  TypeUrl.RouteConfiguration,
];

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

/** Decides whether a stream may serve the proxy it named; returns why not, or undefined. */
export type StreamAuthorizer = (
  stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
  proxy: MeshProxy,
) => string | undefined;

/** Options of {@link DiscoveryServer}. */
export interface DiscoveryServerOptions {
  logger: Logger;
  metrics: XdsMetrics;
  /** The current snapshot; undefined until the initial sync is done. */
  context: () => PushContext | undefined;
  events: DiscoveryServerEvents;
  concurrency: number;
}

/**
 * DiscoveryServer serves state-of-the-world ADS (istiod's DiscoveryServer).
 * It knows streams, nonces and ACK/NACK; how resources are built is the
 * generators' business. The protocol, as Envoy defines it:
 * - a request without a nonce is a new subscription (or a reconnect) and is
 *   always answered;
 * - a nonce other than the last one sent for the type is stale: ignored;
 * - an ACK naming the same resources gets no response; a change of names
 *   gets a full response for the new set;
 * - a NACK (error_detail) is recorded and reported, never re-pushed: the
 *   next response for the type waits for a change of config.
 */
export class DiscoveryServer {
  readonly #connections = new Map<string, Connection>();
  readonly #cache = new XdsCache();
  #cacheVersion = "";
  readonly #queue: PushQueue;

  constructor(private readonly options: DiscoveryServerOptions) {
    this.#queue = new PushQueue(options.concurrency, (id, change, startedAt) =>
      this.pushTo(id, change, startedAt),
    );
  }

  /**
   * The gRPC implementation of envoy.service.discovery.v3.AggregatedDiscoveryService.
   * Each port gets its own: the mTLS port passes an authorizer (XDS_AUTH).
   */
  implementation(authorize?: StreamAuthorizer): AggregatedDiscoveryServiceServer {
    return {
      streamAggregatedResources: (stream) => this.serve(stream, authorize),
      deltaAggregatedResources: (stream) => {
        endWithStatus(
          stream,
          GrpcStatus.UNIMPLEMENTED,
          "incremental (delta) xDS is not served yet; use state-of-the-world ADS",
        );
      },
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

  /** Closes every stream. */
  closeAll(): void {
    for (const connection of this.#connections.values()) connection.close();
  }

  get cacheStats() {
    return this.#cache.stats;
  }

  private serve(
    stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
    authorize: StreamAuthorizer | undefined,
  ): void {
    let connection: Connection | undefined;
    // Requests of one stream are handled one at a time, in order.
    let handling: Promise<void> = Promise.resolve();
    const close = () => {
      if (!connection || !this.#connections.has(connection.id)) return;
      this.#connections.delete(connection.id);
      this.options.metrics.connected.dec();
      this.options.events.disconnected(connection);
    };
    stream.on("data", (request: DiscoveryRequest) => {
      handling = handling
        .then(() => {
          if (!connection) {
            connection = this.open(stream, request, authorize);
            if (!connection) return;
          }
          this.handle(connection, request);
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

  private open(
    stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
    request: DiscoveryRequest,
    authorize: StreamAuthorizer | undefined,
  ): Connection | undefined {
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
    const connection = new Connection(proxy, stream);
    this.#connections.set(connection.id, connection);
    this.options.metrics.connected.inc();
    this.options.logger.info({ proxy: proxy.id, kind: proxy.kind, stream: connection.id }, "proxy connected");
    this.options.events.connected(connection);
    return connection;
  }

  private handle(connection: Connection, request: DiscoveryRequest): void {
    const { typeUrl } = request;
    const generator = GENERATORS[connection.proxy.kind].get(typeUrl);
    if (!generator) {
      this.options.logger.debug(
        { proxy: connection.proxy.id, typeUrl },
        "no generator for this type; not answering",
      );
      return;
    }
    const names = requestedNames(request);
    let state = connection.watched.get(typeUrl);
    if (!request.responseNonce) {
      // A new subscription, or a proxy reconnecting with the version it had.
      state = { names, sent: [], versionAcked: request.versionInfo || undefined };
      connection.watched.set(typeUrl, state);
      this.respond(connection, typeUrl, state, { full: true, endpointHosts: new Set() }, undefined, true);
      return;
    }
    if (!state || request.responseNonce !== state.nonceSent) {
      this.options.metrics.expiredNonces.inc({ type: typeLabel(typeUrl) });
      return;
    }
    if (request.errorDetail) {
      this.recordNack(connection, typeUrl, state, request);
      return;
    }
    state.versionAcked = request.versionInfo;
    if (!sameNames(state.names, names)) {
      state.names = names;
      this.respond(connection, typeUrl, state, { full: true, endpointHosts: new Set() }, undefined, true);
    }
    this.options.events.changed(connection);
  }

  private recordNack(
    connection: Connection,
    typeUrl: string,
    state: WatchState,
    request: DiscoveryRequest,
  ): void {
    const message = request.errorDetail?.message ?? "";
    state.lastNack = {
      version: state.versionSent ?? "",
      nonce: request.responseNonce,
      message,
      at: new Date(),
    };
    this.options.metrics.rejects.inc({ type: typeLabel(typeUrl) });
    // Trace the rejection to the resources the message names, or else to every resource of the response.
    const named = state.sent.filter((resource) => message.includes(resource.name));
    const culprits = named.length > 0 ? named : state.sent;
    const configs = new Map<string, ConfigRef>();
    for (const resource of culprits) {
      for (const ref of resource.sources) configs.set(`${ref.kind}/${ref.namespace}/${ref.name}`, ref);
    }
    this.options.logger.warn(
      { proxy: connection.proxy.id, type: typeLabel(typeUrl), version: state.versionSent, nack: message },
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

  /** Pushes one change to one connection: every watched type whose generator cares, in istiod's order. */
  private pushTo(id: string, change: PushChange, startedAt: number): void {
    const connection = this.#connections.get(id);
    if (!connection) return;
    const types = [...connection.watched.keys()].sort(
      (a, b) => PUSH_ORDER.indexOf(a) - PUSH_ORDER.indexOf(b),
    );
    for (const typeUrl of types) {
      const state = connection.watched.get(typeUrl)!;
      this.respond(connection, typeUrl, state, change, startedAt, false);
    }
  }

  private respond(
    connection: Connection,
    typeUrl: string,
    state: WatchState,
    change: PushChange,
    startedAt: number | undefined,
    always: boolean,
  ): void {
    const generator = GENERATORS[connection.proxy.kind].get(typeUrl);
    const push = this.options.context();
    if (!generator || !push) return;
    if (!always && !generator.needsPush(change, state.names)) return;
    if (push.configVersion !== this.#cacheVersion) {
      this.#cache.clear();
      this.#cacheVersion = push.configVersion;
    }
    const resources = generator.generate({ push, proxy: connection.proxy, cache: this.#cache }, state.names);
    const version = contentVersion(resources);
    if (!always && version === state.versionSent) return;
    const size = connection.send(typeUrl, state, resources, version);
    const type = typeLabel(typeUrl);
    this.options.metrics.pushes.inc({ type });
    this.options.metrics.configSize.observe({ type }, size);
    if (startedAt !== undefined) this.options.metrics.convergence.observe((Date.now() - startedAt) / 1000);
    this.options.events.changed(connection);
  }
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
