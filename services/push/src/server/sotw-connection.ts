import type { ServerDuplexStream } from "@grpc/grpc-js";
import type { DiscoveryRequest, DiscoveryResponse } from "@sextant/proto/envoy";
import type { MeshProxy } from "../model/proxy.js";
import type { PushChange, WatchedNames } from "../translate/generator.js";
import {
  Connection,
  type ConnectionHost,
  contentVersion,
  newWatchState,
  resourceVersion,
  sameNames,
  sizeOf,
  type WatchState,
  WILDCARD,
  WILDCARD_WHEN_EMPTY,
  watchedNames,
} from "./connection.js";

const FULL: PushChange = { full: true, endpointHosts: new Set() };

/**
 * A state-of-the-world ADS stream (StreamAggregatedResources). Every
 * response carries the type's whole set. As Envoy defines the protocol:
 * - a request without a nonce is a new subscription (or a reconnect) and is
 *   always answered;
 * - a nonce other than the last one sent for the type is stale: ignored;
 * - an ACK naming the same resources gets no response; a change of names
 *   gets a full response for the new set;
 * - a NACK (error_detail) is recorded and reported, never re-pushed: the
 *   next response for the type waits for a change of config.
 */
export class SotwConnection extends Connection<DiscoveryRequest> {
  readonly protocol = "sotw";

  constructor(
    proxy: MeshProxy,
    host: ConnectionHost,
    private readonly stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
  ) {
    super(proxy, host, stream);
  }

  handle(request: DiscoveryRequest): void {
    const { typeUrl } = request;
    if (!this.served(typeUrl)) return;
    const names = requestedNames(request);
    const state = this.watched.get(typeUrl);
    if (!request.responseNonce) {
      // A new subscription, or a proxy reconnecting with the version it had.
      const fresh = newWatchState(names);
      fresh.versionAcked = request.versionInfo || undefined;
      this.watched.set(typeUrl, fresh);
      this.respond(typeUrl, fresh, FULL, undefined, true);
      return;
    }
    if (!state || request.responseNonce !== state.nonceSent) {
      this.host.expiredNonce(this, typeUrl);
      return;
    }
    if (request.errorDetail) {
      this.host.nacked(this, typeUrl, state, request.responseNonce, request.errorDetail.message);
      return;
    }
    state.versionAcked = request.versionInfo;
    if (!sameNames(state.names, names)) {
      state.names = names;
      this.respond(typeUrl, state, FULL, undefined, true);
    }
    this.host.acked(this, typeUrl);
  }

  push(typeUrl: string, change: PushChange, startedAt: number): void {
    const state = this.watched.get(typeUrl);
    if (state) this.respond(typeUrl, state, change, startedAt, false);
  }

  /** Sends the type's whole set if it changed (or always, answering a request). */
  private respond(
    typeUrl: string,
    state: WatchState,
    change: PushChange,
    startedAt: number | undefined,
    always: boolean,
  ): void {
    if (!always && !this.host.needsPush(this, typeUrl, state.names, change)) return;
    const resources = this.host.generate(this, typeUrl, state.names);
    if (!resources) return;
    const version = contentVersion(resources);
    if (!always && version === state.versionSent) return;
    const nonce = this.nextNonce();
    this.stream.write({
      versionInfo: version,
      resources: resources.map((r) => r.resource),
      canary: false,
      typeUrl,
      nonce,
      controlPlane: undefined,
    });
    state.nonceSent = nonce;
    state.versionSent = version;
    state.sent = resources;
    state.held = new Map(resources.map((r) => [r.name, { version: resourceVersion(r), resource: r }]));
    this.host.responded(this, typeUrl, sizeOf(resources), startedAt);
  }
}

/**
 * The names of a SotW request. "*" means every resource (with any names
 * beside it: those too); so does an empty list for listeners and clusters
 * (Envoy's legacy wildcard), while for routes and endpoints an empty list
 * means "none": the proxy dropped its last one.
 */
function requestedNames(request: DiscoveryRequest): WatchedNames {
  const wildcard =
    request.resourceNames.includes(WILDCARD) ||
    (request.resourceNames.length === 0 && WILDCARD_WHEN_EMPTY.has(request.typeUrl));
  return watchedNames(wildcard, request.resourceNames);
}
