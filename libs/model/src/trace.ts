// The records of `sextant-traces`: how one config change travelled from
// ingest to every proxy, kept without an OpenTelemetry backend so that
// `sextantctl trace` works on any mesh. Values are google.protobuf.Struct
// (JSON-shaped), hence plain interfaces here.
import { encodeKey } from "@sextant/bus";
import { type ConfigRefLike, configKey } from "./keys.js";

/** Ingest's record of a change, key kind.namespace.name. */
export interface ConfigTraceRecord {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** The W3C trace id (32 hex digits) the change's spans carry. */
  readonly traceId: string;
  /** The span id of ingest's config.store span, which push's spans link to. */
  readonly spanId: string;
  /** The generation stored; for a deletion, the last one. */
  readonly generation: number;
  readonly deleted: boolean;
  /** ISO time ingest stored it. */
  readonly storedAt: string;
  readonly changedBy: string;
}

/** What one proxy did with one xDS type since a change was built. */
export interface ProxyTypeTrace {
  readonly sentAt?: string;
  readonly ackedAt?: string;
  readonly nackedAt?: string;
  readonly nack?: string;
}

/** One proxy's part of a change: when push looked at it, and per type what was sent and answered. */
export interface ProxyTrace {
  /** ISO time push decided what this proxy needed after the change (nothing, if no type was sent). */
  readonly pushedAt?: string;
  /** Keyed by type URL. */
  readonly types: Record<string, ProxyTypeTrace>;
}

/** A push replica's record of a change, key kind.namespace.name.replica. */
export interface PushTraceRecord {
  readonly replica: string;
  /** The generation push saw (0 for a deletion). */
  readonly generation: number;
  readonly deleted: boolean;
  /** ISO time the PushContext holding the change was built. */
  readonly builtAt: string;
  /** Keyed by proxy id. */
  readonly proxies: Record<string, ProxyTrace>;
}

/** The key of ingest's record of a resource's change. */
export function configTraceKey(ref: ConfigRefLike): string {
  return configKey(ref);
}

/** The key of a push replica's record of a resource's change. */
export function pushTraceKey(ref: ConfigRefLike, replica: string): string {
  return encodeKey(ref.kind, ref.namespace, ref.name, replica);
}

/** The filter of every push replica's record of a resource's change. */
export function pushTraceFilter(ref: ConfigRefLike): string {
  return `${configKey(ref)}.*`;
}
