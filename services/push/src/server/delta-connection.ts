import type { ServerDuplexStream } from "@grpc/grpc-js";
import { type DeltaDiscoveryRequest, type DeltaDiscoveryResponse, TypeUrl } from "@sextant/proto/envoy";
import type { MeshProxy } from "../model/proxy.js";
import type { GeneratedResource, PushChange } from "../model/types.js";
import {
  Connection,
  contentVersion,
  isWildcard,
  namedOf,
  newWatchState,
  type ResourceSource,
  resourceVersion,
  type StreamCallbacks,
  sizeOf,
  type WatchState,
  WILDCARD,
  watchedNames,
} from "./connection.js";
import { SendQueue } from "./send-queue.js";

/** What a response must say beyond the diff. */
interface Answer {
  /** Answer even with nothing to send: the request subscribed to something. */
  readonly always: boolean;
  /** Names the response must carry whatever the proxy holds: as resources if they exist, else as removed. */
  readonly mention: ReadonlySet<string>;
}

const FULL: PushChange = { full: true, endpointHosts: new Set() };
const NOTHING_ASKED: Answer = { always: false, mention: new Set() };

/**
 * An incremental ADS stream (DeltaAggregatedResources), as Envoy's xDS
 * protocol defines it. Each resource has its own version (a hash of its
 * content); every response is the diff between what the generators return
 * for the subscription and what the proxy holds: the resources whose version
 * changed, and `removed_resources` for those it holds that no longer exist.
 * - The first request of a type is a new subscription, or a reconnect whose
 *   `initial_resource_versions` say what the proxy holds: what it holds at
 *   the current version is not sent again. It is always answered.
 * - `resource_names_subscribe` adds names ("*": the wildcard; an empty first
 *   request for listeners and clusters: the legacy wildcard), each answered
 *   even if the proxy holds it: as a resource, or in `removed_resources` if
 *   it does not exist. `resource_names_unsubscribe` drops names without an
 *   answer, except a name the wildcard may also cover, whose fate the proxy
 *   must be told.
 * - A request carrying the latest nonce is an ACK, or a NACK with
 *   error_detail: recorded and reported, never re-pushed (the proxy is taken
 *   to hold what it rejected, so only a later change sends it again). An
 *   older nonce's ACK or NACK is stale and ignored, but its subscription
 *   changes still count, as the protocol requires.
 * - As istiod does, the endpoints of clusters just sent are sent again too:
 *   Envoy keeps an updated cluster warming until it gets its endpoints,
 *   changed or not.
 */
export class DeltaConnection extends Connection<DeltaDiscoveryRequest> {
  readonly protocol = "delta";
  readonly #send: SendQueue<DeltaDiscoveryResponse>;

  constructor(
    proxy: MeshProxy,
    resources: ResourceSource,
    callbacks: StreamCallbacks,
    stream: ServerDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>,
  ) {
    const send = new SendQueue<DeltaDiscoveryResponse>(stream, callbacks.sendQueue, mergeDiffs);
    super(proxy, resources, callbacks, stream, send);
    this.#send = send;
  }

  handle(request: DeltaDiscoveryRequest): void {
    const { typeUrl } = request;
    if (!this.served(typeUrl)) return;
    const state = this.watched.get(typeUrl);
    if (!state) {
      this.subscribeFirst(request);
      return;
    }
    if (request.responseNonce) this.acknowledge(typeUrl, state, request);
    const answer = this.resubscribe(state, request);
    if (answer) this.respond(typeUrl, state, FULL, undefined, answer);
  }

  push(typeUrl: string, change: PushChange, startedAt: number): void {
    const state = this.watched.get(typeUrl);
    if (state) this.respond(typeUrl, state, change, startedAt, NOTHING_ASKED);
  }

  /** The first request of a type on this stream: a new subscription, or a reconnect. */
  private subscribeFirst(request: DeltaDiscoveryRequest): void {
    const { typeUrl, resourceNamesSubscribe: subscribe, resourceNamesUnsubscribe: unsubscribe } = request;
    const legacyWildcard =
      subscribe.length === 0 && unsubscribe.length === 0 && this.resources.wildcardWhenEmpty(typeUrl);
    const names = new Set(subscribe);
    for (const name of unsubscribe) names.delete(name);
    const state = newWatchState(watchedNames(legacyWildcard || names.has(WILDCARD), names));
    // What a reconnecting proxy already holds; any nonce it sends belongs to its old stream.
    const initial = Object.entries(request.initialResourceVersions);
    for (const [name, version] of initial) state.held.set(name, { version });
    this.watched.set(typeUrl, state);
    const mention = new Set(namedOf(state.names));
    for (const [name] of initial) mention.delete(name);
    this.respond(typeUrl, state, FULL, undefined, { always: true, mention });
  }

  /** An ACK or NACK of the response with the request's nonce. */
  private acknowledge(typeUrl: string, state: WatchState, request: DeltaDiscoveryRequest): void {
    if (request.responseNonce !== state.nonceSent) {
      this.callbacks.expiredNonce(this, typeUrl);
    } else if (request.errorDetail) {
      this.callbacks.nacked(this, typeUrl, state, request.responseNonce, request.errorDetail.message);
    } else {
      state.versionAcked = state.versionSent;
      state.ackedHeld = new Map(state.held);
      this.callbacks.acked(this, typeUrl);
    }
  }

  /**
   * Applies a later request's subscribe and unsubscribe lists. Returns what
   * the answer must say, or undefined if the subscription did not change or
   * needs no answer.
   */
  private resubscribe(state: WatchState, request: DeltaDiscoveryRequest): Answer | undefined {
    const { resourceNamesSubscribe: subscribe, resourceNamesUnsubscribe: unsubscribe } = request;
    if (subscribe.length === 0 && unsubscribe.length === 0) return undefined;
    let wildcard = isWildcard(state.names);
    const named = new Set(namedOf(state.names));
    const mention = new Set<string>();
    for (const name of unsubscribe) {
      if (name === WILDCARD) {
        wildcard = false;
        // The proxy drops what only the wildcard brought.
        for (const held of state.held.keys()) if (!named.has(held)) state.held.delete(held);
      } else if (named.delete(name)) {
        state.held.delete(name);
        // The wildcard may still cover it: the proxy must be told whether to keep it.
        if (wildcard) mention.add(name);
      }
    }
    for (const name of subscribe) {
      if (name === WILDCARD) wildcard = true;
      else {
        named.add(name);
        mention.add(name);
      }
    }
    state.names = watchedNames(wildcard, named);
    if (subscribe.length === 0 && mention.size === 0) return undefined;
    return { always: subscribe.length > 0, mention };
  }

  /** Sends the diff between the type's resources and what the proxy holds, if there is one (or always, if asked). */
  private respond(
    typeUrl: string,
    state: WatchState,
    change: PushChange,
    startedAt: number | undefined,
    answer: Answer,
  ): void {
    const asked = answer.always || answer.mention.size > 0;
    if (!asked && !this.resources.needsPush(this.proxy, typeUrl, state.names, change)) return;
    const resources = this.resources.generate(this.proxy, typeUrl, state.names);
    if (!resources) return;
    const current = new Map(resources.map((r) => [r.name, r]));
    const changed: GeneratedResource[] = [];
    for (const resource of resources) {
      const version = resourceVersion(resource);
      const held = state.held.get(resource.name);
      if (answer.mention.has(resource.name) || held?.version !== version) changed.push(resource);
      // A version a reconnecting proxy reported gets its resource, for config_dump.
      else if (!held.resource) state.held.set(resource.name, { version, resource });
    }
    const removed = [...new Set([...state.held.keys(), ...answer.mention])]
      .filter((name) => !current.has(name))
      .sort();
    if (!answer.always && changed.length === 0 && removed.length === 0) return;

    const nonce = this.nextNonce();
    const systemVersion = contentVersion(resources);
    this.#send.send(typeUrl, {
      systemVersionInfo: systemVersion,
      resources: changed.map((r) => ({
        name: r.name,
        resourceName: undefined,
        aliases: [],
        version: resourceVersion(r),
        resource: r.resource,
        ttl: undefined,
        cacheControl: undefined,
        metadata: undefined,
      })),
      typeUrl,
      removedResources: removed,
      removedResourceNames: [],
      nonce,
      controlPlane: undefined,
    });
    state.nonceSent = nonce;
    state.versionSent = systemVersion;
    state.sent = changed;
    for (const resource of changed) {
      state.held.set(resource.name, { version: resourceVersion(resource), resource });
    }
    for (const name of removed) state.held.delete(name);
    this.callbacks.responded(this, typeUrl, sizeOf(changed), startedAt);
    if (typeUrl === TypeUrl.Cluster && changed.length > 0) this.warmClusters(changed, startedAt);
  }

  /**
   * Sends the endpoints of clusters just sent, changed or not: Envoy warms an
   * added or updated cluster until its load assignment arrives, and in delta
   * it does not always ask again (istiod's forceEDSPush; envoyproxy/envoy#13009).
   */
  private warmClusters(clusters: readonly GeneratedResource[], startedAt: number | undefined): void {
    const state = this.watched.get(TypeUrl.ClusterLoadAssignment);
    if (!state) return;
    const named = namedOf(state.names);
    const mention = new Set(
      clusters.map((cluster) => cluster.name).filter((name) => named.has(name) || state.held.has(name)),
    );
    if (mention.size > 0) {
      this.respond(TypeUrl.ClusterLoadAssignment, state, FULL, startedAt, { always: false, mention });
    }
  }
}

/**
 * Folds a newer diff of a type into one the proxy has not taken yet: the
 * proxy must end up where both would have taken it. A resource the newer
 * diff sends or removes takes its latest fate; the rest of the older diff
 * stays. The nonce and system version are the newer's (what the server
 * records as sent).
 */
export function mergeDiffs(
  unsent: DeltaDiscoveryResponse,
  newer: DeltaDiscoveryResponse,
): DeltaDiscoveryResponse {
  const resources = new Map(unsent.resources.map((resource) => [resource.name, resource]));
  for (const name of newer.removedResources) resources.delete(name);
  for (const resource of newer.resources) resources.set(resource.name, resource);
  const removed = new Set(unsent.removedResources.filter((name) => !resources.has(name)));
  for (const name of newer.removedResources) removed.add(name);
  return { ...newer, resources: [...resources.values()], removedResources: [...removed].sort() };
}
