/**
 * KV keys made of segments (kind, namespace, name, ...). NATS KV keys use "."
 * as the token separator, and Kubernetes names may contain dots, so each
 * segment is escaped: characters other than [A-Za-z0-9-] become `_XX` (the
 * UTF-8 bytes in hex), and an empty segment is a lone `_`. The mapping is
 * one-to-one, and a segment never contains ".", so wildcards such as
 * `VirtualService.>` still select by leading segments.
 */
export function encodeKey(...segments: string[]): string {
  if (segments.length === 0) throw new Error("a key needs at least one segment");
  return segments.map(encodeSegment).join(".");
}

/** The segments of a key made by {@link encodeKey}. */
export function decodeKey(key: string): string[] {
  return key.split(".").map(decodeSegment);
}

/** A watch filter: the given leading segments, then any remainder (`>`). */
export function keyPrefixFilter(...segments: string[]): string {
  return segments.length === 0 ? ">" : `${encodeKey(...segments)}.>`;
}

function encodeSegment(segment: string): string {
  if (segment === "") return "_";
  let out = "";
  for (const char of segment) {
    if (/^[A-Za-z0-9-]$/.test(char)) {
      out += char;
    } else {
      for (const byte of Buffer.from(char, "utf8"))
        out += `_${byte.toString(16).toUpperCase().padStart(2, "0")}`;
    }
  }
  return out;
}

function decodeSegment(token: string): string {
  if (token === "_") return "";
  if (!/^(?:[A-Za-z0-9-]|_[0-9A-F]{2})+$/.test(token))
    throw new Error(`not an encoded key segment: ${token}`);
  const bytes: number[] = [];
  for (let i = 0; i < token.length; ) {
    if (token[i] === "_") {
      bytes.push(Number.parseInt(token.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(token.charCodeAt(i));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString("utf8");
}
