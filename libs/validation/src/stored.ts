import type { ConfigResource } from "@sextant/proto";
import { type ConfigKind, type ConfigSpecs, KINDS } from "./kinds.js";

/** A resource from sextant-config with its spec decoded into the kind's Istio type. */
export interface DecodedConfig<T> {
  readonly resource: ConfigResource;
  readonly spec: T;
}

/**
 * Decodes the spec of a resource read from sextant-config with its kind's
 * codec. Ingest stores specs validated and in canonical JSON, so the
 * generated fromJSON reads them as they are; decodeSpec is for what users write.
 */
export function decodeStoredSpec<K extends ConfigKind>(kind: K, resource: ConfigResource): ConfigSpecs[K] {
  const info = KINDS.get(kind);
  if (!info) throw new Error(`kind ${kind} has no entry in KINDS`);
  return info.codec.fromJSON(resource.spec ?? {}) as ConfigSpecs[K];
}

/** The resources of one kind, in the order given, each with its spec decoded. */
export function decodeStoredOfKind<K extends ConfigKind>(
  resources: Iterable<ConfigResource>,
  kind: K,
): DecodedConfig<ConfigSpecs[K]>[] {
  const decoded: DecodedConfig<ConfigSpecs[K]>[] = [];
  for (const resource of resources)
    if (resource.kind === kind) decoded.push({ resource, spec: decodeStoredSpec(kind, resource) });
  return decoded;
}
