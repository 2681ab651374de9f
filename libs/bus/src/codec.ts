import type { MessageCodec } from "@sextant/proto";

/**
 * Encodes a message canonically. ts-proto writes map fields (and
 * google.protobuf.Struct) in object insertion order, so two equal values built
 * in different orders would encode differently; sorting keys first makes equal
 * content give equal bytes, which is what lets writers skip unchanged values.
 */
export function encodeCanonical<T>(codec: MessageCodec<T>, message: T): Uint8Array {
  return codec.encode(sortKeysDeep(message)).finish();
}

function sortKeysDeep<T>(value: T): T {
  if (Array.isArray(value)) return value.map(sortKeysDeep) as T;
  if (value === null || typeof value !== "object") return value;
  // Bytes and timestamps are leaves, not maps.
  if (value instanceof Uint8Array || value instanceof Date) return value;
  const sorted: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort())
    sorted[key] = sortKeysDeep((value as Record<string, unknown>)[key]);
  return sorted as T;
}
