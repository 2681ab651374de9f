import { readFileSync } from "node:fs";

/**
 * Kubernetes writes a downward-API labels or annotations file as one
 * `key="value"` line per entry, the value quoted as Go's %q quotes it. Istio's
 * agent reads those files (pkg/bootstrap ParseDownwardAPI) by unquoting each
 * value with Go's rules; this does the same, so that an annotation holding
 * quotes, newlines or non-ASCII text comes back exactly.
 */
export function parseDownwardApi(text: string): Record<string, string> {
  const entries: Record<string, string> = {};
  const lines = text.split("\n");
  for (const [index, line] of lines.entries()) {
    const equals = line.indexOf("=");
    // As Istio: a line without "=" (the final empty one) is not an entry.
    if (equals < 0) continue;
    const key = line.slice(0, equals);
    try {
      entries[key] = unquoteGo(line.slice(equals + 1));
    } catch (error) {
      throw new Error(`line ${index + 1} (${key}): ${(error as Error).message}`);
    }
  }
  return entries;
}

/**
 * Reads a downward-API file. A missing file is `undefined`: outside
 * Kubernetes (or without the volume) there is none, as Istio tolerates. A
 * file that does not parse is an error naming the file and line.
 */
export function readDownwardApiFile(path: string): Record<string, string> | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    return parseDownwardApi(text);
  } catch (error) {
    throw new Error(`${path}: ${(error as Error).message}`);
  }
}

const SIMPLE_ESCAPES: Record<string, number> = {
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
  "\\": 0x5c,
  '"': 0x22,
};

/**
 * Go's strconv.Unquote for a double-quoted string: the simple escapes, `\xHH`
 * and three-digit octal escapes (single bytes, which may together form UTF-8),
 * and `\uHHHH` / `\UHHHHHHHH` (code points). Bytes are collected and decoded
 * at the end, because %q writes a multi-byte character it cannot print as
 * several `\x` bytes.
 */
export function unquoteGo(quoted: string): string {
  if (quoted.length < 2 || !quoted.startsWith('"') || !quoted.endsWith('"'))
    throw new Error("value must be a double-quoted string");
  const body = quoted.slice(1, -1);
  const bytes: number[] = [];
  const pushText = (text: string) => bytes.push(...Buffer.from(text, "utf8"));
  let i = 0;
  while (i < body.length) {
    const char = body[i]!;
    if (char === '"' || char === "\n") throw new Error(`unescaped ${JSON.stringify(char)} inside the value`);
    if (char !== "\\") {
      const codePoint = body.codePointAt(i)!;
      const text = String.fromCodePoint(codePoint);
      pushText(text);
      i += text.length;
      continue;
    }
    const kind = body[i + 1];
    if (kind === undefined) throw new Error("value ends in a lone backslash");
    const simple = SIMPLE_ESCAPES[kind];
    if (simple !== undefined) {
      bytes.push(simple);
      i += 2;
    } else if (kind === "x") {
      bytes.push(fixedNumber(body, i + 2, 2, 16, "\\x"));
      i += 4;
    } else if (kind >= "0" && kind <= "7") {
      const value = fixedNumber(body, i + 1, 3, 8, "octal");
      if (value > 0xff) throw new Error(`octal escape \\${body.slice(i + 1, i + 4)} is above \\377`);
      bytes.push(value);
      i += 4;
    } else if (kind === "u" || kind === "U") {
      const digits = kind === "u" ? 4 : 8;
      const codePoint = fixedNumber(body, i + 2, digits, 16, `\\${kind}`);
      if (codePoint > 0x10ffff || (codePoint >= 0xd800 && codePoint <= 0xdfff))
        throw new Error(`\\${kind}${body.slice(i + 2, i + 2 + digits)} is not a Unicode character`);
      pushText(String.fromCodePoint(codePoint));
      i += 2 + digits;
    } else {
      throw new Error(`unknown escape \\${kind}`);
    }
  }
  return Buffer.from(bytes).toString("utf8");
}

/** Exactly `count` digits of `radix` at `start`, as Go requires them. */
function fixedNumber(text: string, start: number, count: number, radix: 8 | 16, what: string): number {
  const digits = text.slice(start, start + count);
  const pattern = radix === 16 ? /^[0-9a-fA-F]+$/ : /^[0-7]+$/;
  if (digits.length !== count || !pattern.test(digits))
    throw new Error(`${what} escape needs ${count} ${radix === 16 ? "hex" : "octal"} digits`);
  return Number.parseInt(digits, radix);
}
