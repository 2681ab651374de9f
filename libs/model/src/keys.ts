import { decodeKey, encodeKey, keyPrefixFilter } from "@sextant/bus";

/** Identifies one config resource. */
export interface ConfigRefLike {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
}

/** The `sextant-config` / `sextant-config-status` key of a resource: kind.namespace.name. */
export function configKey(ref: ConfigRefLike): string {
  return encodeKey(ref.kind, ref.namespace, ref.name);
}

/** The resource a config key names. */
export function parseConfigKey(key: string): ConfigRefLike {
  const [kind, namespace, name, ...rest] = decodeKey(key);
  if (kind === undefined || namespace === undefined || name === undefined || rest.length > 0) {
    throw new Error(`not a config key: ${key}`);
  }
  return { kind, namespace, name };
}

/** A watch filter for every resource of one kind (optionally in one namespace). */
export function configKindFilter(kind: string, namespace?: string): string {
  return namespace === undefined ? keyPrefixFilter(kind) : keyPrefixFilter(kind, namespace);
}

/** "kind namespace/name", for messages. */
export function describeRef(ref: ConfigRefLike): string {
  return `${ref.kind} ${ref.namespace}/${ref.name}`;
}
