import { createHash, randomUUID } from "node:crypto";
import type { SpiffeId } from "@sextant/identity";
import type { Logger } from "@sextant/observability";
import type { MeshProxy } from "../model/proxy.js";
import type { GeneratedResource, PushChange, WatchedNames } from "../model/types.js";
import type { SendQueueHooks, SendQueueState } from "./send-queue.js";

/** A proxy's last rejection of a type. */
export interface NackRecord {
  readonly version: string;
  readonly nonce: string;
  readonly message: string;
  readonly at: Date;
}

/** A resource a proxy holds, with its version; `resource` is unknown until push has built it for this stream. */
export interface HeldResource {
  readonly version: string;
  readonly resource?: GeneratedResource;
}

/** What one stream knows about one type: the subscription, the ACK/NACK state and what the proxy holds. */
export interface WatchState {
  /**
   * The subscription, as on the wire: "*" alone is a wildcard; a set names
   * resources, and may hold "*" beside them (a wildcard plus names, which
   * delta allows). See {@link isWildcard} and {@link namedOf}.
   */
  names: WatchedNames;
  nonceSent?: string;
  /** The version of the type's whole set after the last response (SotW's version_info, delta's system_version_info). */
  versionSent?: string;
  versionAcked?: string;
  /** The trace id of the last config change built into the last response, and into the last one ACKed (`sextantctl trace`). */
  traceIdSent?: string;
  traceIdAcked?: string;
  lastNack?: NackRecord;
  /** The resources of the last response, for NACK tracing. */
  sent: readonly GeneratedResource[];
  /**
   * What the proxy holds after the responses so far, by name: all of the
   * last response in SotW, the sum of the responses in delta (which diffs
   * against it). config_dump shows it.
   */
  held: Map<string, HeldResource>;
  /** What the proxy held when it last ACKed: what it runs, for /debug/proxy_diff (undefined before the first ACK). */
  ackedHeld?: ReadonlyMap<string, HeldResource>;
}

/** A new subscription's state. */
export function newWatchState(names: WatchedNames): WatchState {
  return { names, sent: [], held: new Map() };
}

/**
 * Where a connection's resources come from: the xDS type table, and
 * generation from the current snapshot through the shared cache.
 */
export interface ResourceSource {
  /** True if the proxy's kind has a generator for the type; requests for other types are not answered. */
  serves(proxy: MeshProxy, typeUrl: string): boolean;
  /** True if an empty first subscription to the type means "*" (Envoy's legacy wildcard). */
  wildcardWhenEmpty(typeUrl: string): boolean;
  /** True if a SotW push that is not full sends only the type's changed resources (EDS). */
  changedOnlyInSotw(typeUrl: string): boolean;
  /** True if a change may affect the subscription (the generator's cheap check). */
  needsPush(proxy: MeshProxy, typeUrl: string, names: WatchedNames, change: PushChange): boolean;
  /**
   * The type's resources for a subscription, each name once; undefined if
   * none can be built (no generator, or no snapshot yet).
   */
  generate(proxy: MeshProxy, typeUrl: string, names: WatchedNames): GeneratedResource[] | undefined;
}

/**
 * What a connection reports of its stream: the bookkeeping both protocol
 * variants share (metrics, status events, NACK reports). The DiscoveryServer
 * implements it.
 */
export interface StreamCallbacks {
  readonly logger: Logger;
  /** Records a response sent: its size, the push's convergence time (startedAt of a push), the proxy's status. */
  responded(connection: Connection, typeUrl: string, bytes: number, startedAt: number | undefined): void;
  /** Records the ACK of the latest response. */
  acked(connection: Connection, typeUrl: string): void;
  /** Records, logs and reports the NACK of the latest response (nonce): never re-pushed. */
  nacked(connection: Connection, typeUrl: string, state: WatchState, nonce: string, message: string): void;
  /** Counts a request that answers a response other than the latest (its ACK or NACK is ignored). */
  expiredNonce(connection: Connection, typeUrl: string): void;
  /** What every stream's send queue reports. */
  readonly sendQueue: SendQueueHooks;
}

let streams = 0;

/**
 * One xDS stream from one proxy, state-of-the-world or incremental (the
 * subclasses). A node may hold several (a reconnect overlapping the old
 * stream). The server opens it from the stream's first request, hands it
 * every request in order, and asks it to push changes, type by type.
 */
export abstract class Connection<Request = unknown> {
  readonly id = `${++streams}-${randomUUID().slice(0, 8)}`;
  readonly connectedAt = new Date();
  readonly watched = new Map<string, WatchState>();
  /** Which protocol variant the stream speaks. */
  abstract readonly protocol: "sotw" | "delta";
  /**
   * The SPIFFE identity of the client certificate, when the stream came in
   * on the mTLS port (whose TLS verified the certificate against the mesh's
   * roots and whose authorizer matched it to the node). Undefined on the
   * plaintext port, where nothing is proven: such a proxy is served but never
   * auto-registered. Set by the server as it opens the connection.
   */
  verifiedIdentity: SpiffeId | undefined;
  #nonces = 0;
  readonly #stream: { end(): void };
  readonly #sendQueue: SendQueueState;

  constructor(
    readonly proxy: MeshProxy,
    protected readonly resources: ResourceSource,
    protected readonly callbacks: StreamCallbacks,
    stream: { end(): void },
    /** The stream's send queue, through which the subclass sends every response. */
    sendQueue: SendQueueState,
  ) {
    this.#stream = stream;
    this.#sendQueue = sendQueue;
  }

  /** Responses held back because the proxy does not take them (by type), and how many its transport has not taken. */
  get sendQueue(): Pick<SendQueueState, "held" | "unflushed"> {
    return this.#sendQueue;
  }

  /** Resolves once the transport took every response so far, or the stream closed. */
  flushed(): Promise<void> {
    return this.#sendQueue.flushed();
  }

  /** Resolves once no response is held back (each handed to the transport), or the stream closed. */
  unblocked(): Promise<void> {
    return this.#sendQueue.unblocked();
  }

  /** The stream is gone: drops the responses it did not take. */
  streamClosed(): void {
    this.#sendQueue.close();
  }

  /** Handles one request of the stream (the first included, once the connection is open). */
  abstract handle(request: Request): void;

  /** Sends what a change alters of one watched type, if anything. */
  abstract push(typeUrl: string, change: PushChange, startedAt: number): void;

  /** Ends the stream from the server side; the proxy reconnects (to this replica or another). */
  close(): void {
    this.#stream.end();
  }

  /** What push would send now for a watched type (undefined if it cannot build it): /debug/proxy_diff compares it with what the proxy ACKed. */
  generateNow(typeUrl: string): GeneratedResource[] | undefined {
    const state = this.watched.get(typeUrl);
    return state ? this.resources.generate(this.proxy, typeUrl, state.names) : undefined;
  }

  /** A nonce no other response of this replica has carried. */
  protected nextNonce(): string {
    return `${this.id}-${++this.#nonces}`;
  }

  /** True (after a debug line) if the type has a generator for this proxy; otherwise its requests go unanswered. */
  protected served(typeUrl: string): boolean {
    if (this.resources.serves(this.proxy, typeUrl)) return true;
    this.callbacks.logger.debug(
      { proxy: this.proxy.id, typeUrl },
      "no generator for this type; not answering",
    );
    return false;
  }
}

/** The name of a wildcard subscription. */
export const WILDCARD = "*";

/** A subscription from a wildcard flag and names, in {@link WatchState.names}' form. */
export function watchedNames(wildcard: boolean, names: Iterable<string>): WatchedNames {
  const named = new Set(names);
  named.delete(WILDCARD);
  if (!wildcard) return named;
  if (named.size === 0) return WILDCARD;
  return named.add(WILDCARD);
}

/** True if the subscription includes the wildcard. */
export function isWildcard(names: WatchedNames): boolean {
  return names === WILDCARD || names.has(WILDCARD);
}

/** The names a subscription asks for by name, without the wildcard. */
export function namedOf(names: WatchedNames): ReadonlySet<string> {
  if (names === WILDCARD) return new Set();
  if (!names.has(WILDCARD)) return names;
  const named = new Set(names);
  named.delete(WILDCARD);
  return named;
}

/** True if two subscriptions name the same resources. */
export function sameNames(a: WatchedNames, b: WatchedNames): boolean {
  if (isWildcard(a) !== isWildcard(b)) return false;
  const [namedA, namedB] = [namedOf(a), namedOf(b)];
  return namedA.size === namedB.size && [...namedA].every((name) => namedB.has(name));
}

/**
 * The version of a type's set of resources (SotW's version_info, delta's
 * system_version_info): a hash of their names and {@link resourceVersion}s,
 * so replicas with the same inputs send the same versions, and a proxy that
 * reconnects elsewhere sees no change.
 */
export function contentVersion(resources: readonly GeneratedResource[]): string {
  const hash = createHash("sha256");
  for (const resource of [...resources].sort(byName)) {
    hash.update(resource.name).update("\u0000").update(resourceVersion(resource)).update("\u0001");
  }
  return hash.digest("hex").slice(0, 16);
}

// Generated resources are immutable and shared between proxies through the
// XdsCache, so each one is hashed once, not once per proxy and response.
const resourceVersions = new WeakMap<GeneratedResource, string>();

/** The version of one resource (delta's per-resource version): a hash of its name and bytes. */
export function resourceVersion(resource: GeneratedResource): string {
  let version = resourceVersions.get(resource);
  if (version === undefined) {
    const hash = createHash("sha256").update(resource.name).update("\u0000").update(resource.resource.value);
    version = hash.digest("hex").slice(0, 16);
    resourceVersions.set(resource, version);
  }
  return version;
}

/** The size of a response's resources in bytes, for pilot_xds_config_size_bytes. */
export function sizeOf(resources: readonly GeneratedResource[]): number {
  return resources.reduce((size, r) => size + r.resource.value.length, 0);
}

function byName(a: { name: string }, b: { name: string }): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
