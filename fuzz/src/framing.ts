// The byte format of the targets whose input is a stream of protobuf
// messages (push-ads, agent-sds): each message a varint length then its bytes.

/** A response nonce that stands for the last one the server sent for the type, so that inputs can ACK and NACK. */
export const LAST_NONCE = "$last";

/**
 * The messages from byte `start` on, each a varint length then its bytes.
 * Lenient, so that mutants reach the server rather than stop at the framing: a
 * length past the end takes what is left, a varint past the end ends the input.
 */
export function frames(bytes: Uint8Array, start: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = start;
  while (at < bytes.length) {
    let length = 0;
    for (let shift = 0; at < bytes.length; shift += 7) {
      const byte = bytes[at++]!;
      length += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80 || shift > 28) break;
    }
    out.push(bytes.subarray(at, Math.min(bytes.length, at + length)));
    at += length;
  }
  return out;
}

/** The inverse of {@link frames}, after the given leading bytes. */
export function encodeFrames(prefix: number[], messages: Uint8Array[]): Uint8Array {
  const parts: number[] = [...prefix];
  for (const message of messages) {
    let n = message.length;
    while (n >= 0x80) {
      parts.push((n & 0x7f) | 0x80);
      n >>>= 7;
    }
    parts.push(n, ...message);
  }
  return Uint8Array.from(parts);
}

/**
 * The decoded messages up to the first that does not decode: grpc-js hands
 * the server every message before it, then fails the stream.
 */
export function decodeStream<T>(
  messages: Uint8Array[],
  decode: (bytes: Uint8Array) => T,
): { decoded: T[]; broken: boolean } {
  const decoded: T[] = [];
  for (const bytes of messages) {
    try {
      decoded.push(decode(bytes));
    } catch {
      return { decoded, broken: true };
    }
  }
  return { decoded, broken: false };
}
