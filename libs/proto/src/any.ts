import type { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import type { Any } from "./gen/google/protobuf/any.js";

/** The encode/decode pair ts-proto generates for every message. */
export interface MessageCodec<T> {
  encode(message: T, writer?: BinaryWriter): BinaryWriter;
  decode(input: BinaryReader | Uint8Array, length?: number): T;
}

const TYPE_URL_PREFIX = "type.googleapis.com/";

/** The type URL of a fully qualified message name, as Envoy expects it. */
export function typeUrlOf(fullName: string): string {
  return TYPE_URL_PREFIX + fullName;
}

/** Packs a message into google.protobuf.Any under its type URL. */
export function packAny<T>(typeUrl: string, codec: MessageCodec<T>, message: T): Any {
  // ts-proto's node output types bytes fields as Buffer.
  return { typeUrl, value: Buffer.from(codec.encode(message).finish()) };
}

/**
 * Unpacks an Any, checking its type URL first: decoding bytes of another type
 * would "succeed" with garbage, so a mismatch is an error.
 */
export function unpackAny<T>(any: Any, typeUrl: string, codec: MessageCodec<T>): T {
  if (any.typeUrl !== typeUrl) {
    throw new Error(`expected an Any of ${typeUrl}, got ${any.typeUrl || "(no type URL)"}`);
  }
  return codec.decode(any.value);
}
