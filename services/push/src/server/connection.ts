import { createHash, randomUUID } from "node:crypto";
import type { ServerDuplexStream } from "@grpc/grpc-js";
import { type DiscoveryRequest, type DiscoveryResponse, TypeUrl } from "@sextant/proto/envoy";
import type { MeshProxy } from "../model/proxy.js";
import type { GeneratedResource, WatchedNames } from "../translate/generator.js";

/** A proxy's last rejection of a type. */
export interface NackRecord {
  readonly version: string;
  readonly nonce: string;
  readonly message: string;
  readonly at: Date;
}

/** What one stream knows about one type: the subscription and the ACK/NACK state. */
export interface WatchState {
  names: WatchedNames;
  nonceSent?: string;
  versionSent?: string;
  versionAcked?: string;
  lastNack?: NackRecord;
  /** The resources of the last response, for NACK tracing and config_dump. */
  sent: readonly GeneratedResource[];
}

let streams = 0;

/** One ADS stream from one proxy. A node may hold several (a reconnect overlapping the old stream). */
export class Connection {
  readonly id = `${++streams}-${randomUUID().slice(0, 8)}`;
  readonly connectedAt = new Date();
  readonly watched = new Map<string, WatchState>();
  #nonces = 0;

  constructor(
    readonly proxy: MeshProxy,
    private readonly stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>,
  ) {}

  /** Sends a response and records it as the latest for its type. Returns its size in bytes. */
  send(typeUrl: string, state: WatchState, resources: readonly GeneratedResource[], version: string): number {
    const nonce = `${this.id}-${++this.#nonces}`;
    state.nonceSent = nonce;
    state.versionSent = version;
    state.sent = resources;
    this.stream.write({
      versionInfo: version,
      resources: resources.map((r) => r.resource),
      canary: false,
      typeUrl,
      nonce,
      controlPlane: undefined,
    });
    return resources.reduce((size, r) => size + r.resource.value.length, 0);
  }

  /** Ends the stream from the server side; the proxy reconnects (to this replica or another). */
  close(): void {
    this.stream.end();
  }
}

/**
 * The version of a response: a hash of its resources' names and bytes, so
 * replicas with the same inputs send the same versions, and a proxy that
 * reconnects elsewhere sees no change.
 */
export function contentVersion(resources: readonly GeneratedResource[]): string {
  const hash = createHash("sha256");
  for (const resource of [...resources].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    hash.update(resource.name).update("\u0000").update(resource.resource.value).update("\u0001");
  }
  return hash.digest("hex").slice(0, 16);
}

/**
 * The names of a request. "*" means every resource; so does an empty list
 * for listeners and clusters (Envoy's legacy wildcard), while for routes and
 * endpoints an empty list means "none": the proxy dropped its last one.
 */
export function requestedNames(request: DiscoveryRequest): WatchedNames {
  if (request.resourceNames.includes("*")) return "*";
  if (request.resourceNames.length === 0 && WILDCARD_WHEN_EMPTY.has(request.typeUrl)) return "*";
  return new Set(request.resourceNames);
}

const WILDCARD_WHEN_EMPTY = new Set([TypeUrl.Listener, TypeUrl.Cluster]);

/** True if two subscriptions name the same resources. */
export function sameNames(a: WatchedNames, b: WatchedNames): boolean {
  if (a === "*" || b === "*") return a === b;
  return a.size === b.size && [...a].every((name) => b.has(name));
}
