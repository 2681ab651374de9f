import type { Any, ConfigRef } from "@sextant/proto";
import type { XdsCache } from "../cache/xds-cache.js";
import type { MeshProxy } from "../model/proxy.js";
import type { PushContext } from "../model/push-context.js";

/** One generated xDS resource, packed, with the config resources it was built from (for NACK tracing). */
export interface GeneratedResource {
  readonly name: string;
  readonly resource: Any;
  readonly sources: readonly ConfigRef[];
}

/** What changed since the last push. */
export interface PushChange {
  /** Config or services changed: every type may be affected. */
  readonly full: boolean;
  /** Hosts whose endpoints changed. */
  readonly endpointHosts: ReadonlySet<string>;
}

/** The resource names a proxy watches for a type; "*" for a wildcard subscription. */
export type WatchedNames = ReadonlySet<string> | "*";

/** What a generator is given. */
export interface GenerationContext {
  readonly push: PushContext;
  readonly proxy: MeshProxy;
  readonly cache: XdsCache;
}

/**
 * A Generator builds one xDS type for one kind of proxy (istiod's
 * XdsResourceGenerator). `needsPush` is the cheap check run for every proxy
 * on every change; `generate` is a pure function of the snapshot and proxy.
 */
export interface Generator {
  readonly typeUrl: string;
  needsPush(change: PushChange, watched: WatchedNames): boolean;
  generate(context: GenerationContext, watched: WatchedNames): GeneratedResource[];
}
