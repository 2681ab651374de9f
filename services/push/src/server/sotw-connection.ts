import type { ServerDuplexStream } from "@grpc/grpc-js";
import type { DiscoveryRequest, DiscoveryResponse } from "@sextant/proto/envoy";
import type { MeshProxy } from "../model/proxy.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../model/types.js";
import {
  Connection,
  contentVersion,
  type HeldResource,
  newWatchState,
  type ResourceSource,
  resourceVersion,
  type StreamCallbacks,
  sameNames,
  sizeOf,
  type WatchState,
  WILDCARD,
  watchedNames,
} from "./connection.js";
import { SendQueue } from "./send-queue.js";

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
  readonly #send: SendQueue<DiscoveryResponse>;

  constructor(
    proxy: MeshProxy,
    resources: ResourceSource,
    callbacks: StreamCallbacks,
    stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
  ) {
    // An unsent response is replaced by a newer one of its type: each carries the whole set.
    const send = new SendQueue<DiscoveryResponse>(stream, callbacks.sendQueue);
    super(proxy, resources, callbacks, stream, send);
    this.#send = send;
  }

  handle(request: DiscoveryRequest): void {
    const { typeUrl } = request;
    if (!this.served(typeUrl)) return;
    const names = requestedNames(request, this.resources.wildcardWhenEmpty(typeUrl));
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
      this.callbacks.expiredNonce(this, typeUrl);
      return;
    }
    if (request.errorDetail) {
      this.callbacks.nacked(this, typeUrl, state, request.responseNonce, request.errorDetail.message);
      return;
    }
    state.versionAcked = request.versionInfo;
    state.ackedHeld = new Map(state.held);
    if (!sameNames(state.names, names)) {
      state.names = names;
      this.respond(typeUrl, state, FULL, undefined, true);
    }
    this.callbacks.acked(this, typeUrl);
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
    if (!always && !this.resources.needsPush(this.proxy, typeUrl, state.names, change)) return;
    const resources = this.resources.generate(this.proxy, typeUrl, state.names);
    if (!resources) return;
    const version = contentVersion(resources);
    if (!always && version === state.versionSent) return;
    // A partial response only if no response of the type is held back
    // unsent: this one replaces it in the send queue, and must then carry
    // what it did.
    const partial =
      !always &&
      !change.full &&
      this.resources.changedOnlyInSotw(typeUrl) &&
      !this.sendQueue.held.has(typeUrl);
    const resourcesSent = (partial && changedResources(resources, state.held)) || resources;
    const nonce = this.nextNonce();
    this.#send.send(typeUrl, {
      versionInfo: version,
      resources: resourcesSent.map((r) => r.resource),
      canary: false,
      typeUrl,
      nonce,
      controlPlane: undefined,
    });
    state.nonceSent = nonce;
    state.versionSent = version;
    state.sent = resourcesSent;
    // What the proxy holds: the whole set (all of the last response, or the
    // changed resources over what it held: the same set).
    state.held = new Map(resources.map((r) => [r.name, { version: resourceVersion(r), resource: r }]));
    this.callbacks.responded(this, typeUrl, sizeOf(resourcesSent), startedAt);
  }
}

/**
 * The resources whose version differs from what the proxy holds; undefined
 * if the proxy holds a resource the set no longer has (only a whole
 * response removes one) or holds nothing yet.
 */
function changedResources(
  resources: readonly GeneratedResource[],
  held: ReadonlyMap<string, HeldResource>,
): GeneratedResource[] | undefined {
  if (held.size === 0) return undefined;
  const names = new Set(resources.map((r) => r.name));
  for (const name of held.keys()) if (!names.has(name)) return undefined;
  return resources.filter((r) => held.get(r.name)?.version !== resourceVersion(r));
}

/**
 * The names of a SotW request. "*" means every resource (with any names
 * beside it: those too); so does an empty list for a type whose table entry
 * says so (Envoy's legacy wildcard: listeners and clusters), while for the
 * others (routes, endpoints) an empty list means "none": the proxy dropped
 * its last one.
 */
function requestedNames(request: DiscoveryRequest, wildcardWhenEmpty: boolean): WatchedNames {
  const wildcard =
    request.resourceNames.includes(WILDCARD) || (request.resourceNames.length === 0 && wildcardWhenEmpty);
  return watchedNames(wildcard, request.resourceNames);
}
