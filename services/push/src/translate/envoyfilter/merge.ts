import { messageFromJson, messageToJson } from "@sextant/proto/descriptors";
import type { JsonObject } from "../../model/envoy-filter.js";

const TYPE_PREFIX = "type.googleapis.com/";

/** The message name of an Any in JSON form (its `@type`), or undefined. */
export function anyType(any: unknown): string | undefined {
  const url = isObject(any) ? any["@type"] : undefined;
  return typeof url === "string" ? url.slice(url.lastIndexOf("/") + 1) : undefined;
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Istio's merge.Merge of `patch` into `target`, both of message `typeName`:
 * protobuf merge semantics (set scalars and oneof members replace, messages
 * merge, repeated fields append, map entries replace, an Any is replaced
 * whole), which concatenating the two encodings gives exactly; except that
 * Istio replaces a Duration rather than merging its seconds and nanos, so
 * every string the patch sets (a Duration's JSON form among them) is put
 * back as written.
 */
export function mergeMessage(typeName: string, target: JsonObject, patch: JsonObject): JsonObject {
  const a = messageFromJson(typeName, target);
  const b = messageFromJson(typeName, patch);
  const merged = new Uint8Array(a.length + b.length);
  merged.set(a);
  merged.set(b, a.length);
  const result = messageToJson(typeName, merged);
  overlayStrings(result, patch);
  return result;
}

function overlayStrings(result: JsonObject, patch: JsonObject): void {
  if ("@type" in patch) return; // an Any: replaced whole already
  for (const [key, value] of Object.entries(patch)) {
    if (typeof value === "string") result[key] = value;
    else if (isObject(value) && isObject(result[key])) overlayStrings(result[key], value);
  }
}

/**
 * Istio's MergeAnyWithAny: the patch's typed config merged into the
 * target's when both are of the same type; undefined when they are not
 * (Istio then keeps the target's).
 */
export function mergeAny(target: unknown, patch: unknown): JsonObject | undefined {
  const type = anyType(target);
  if (!type || type !== anyType(patch) || !isObject(target) || !isObject(patch)) return undefined;
  const { "@type": _t, ...targetFields } = target;
  const { "@type": _p, ...patchFields } = patch;
  return { "@type": `${TYPE_PREFIX}${type}`, ...mergeMessage(type, targetFields, patchFields) };
}

/** A patch's transport socket merged into `current` in place: their typed configs, when of one type. */
export function mergeSocket(current: JsonObject, patch: JsonObject): void {
  const typedConfig = mergeAny(current.typedConfig, patch.typedConfig);
  if (typedConfig) current.typedConfig = typedConfig;
}

/** A deep copy of a JSON value (patch values are shared by every proxy they apply to). */
export function copy<T>(value: T): T {
  return structuredClone(value);
}
