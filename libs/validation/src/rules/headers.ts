import { isHeaderName } from "./common.js";

/**
 * Envoy's limit on a header name or value it is told to add (the max_bytes
 * of envoy.config.core.v3.HeaderValue's key and value): a longer one gets the
 * whole RouteConfiguration rejected.
 */
export const MAX_HEADER_BYTES = 16 * 1024;

/**
 * Characters Istio refuses in a header value (the strict HTTP_HEADER_VALUE
 * rule of protoc-gen-validate): C0 controls other than tab, and DEL. They
 * include NUL, CR and LF, which Envoy itself refuses in any header value.
 */
function controlCharacterAt(value: string): number {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f) return i;
  }
  return -1;
}

/**
 * Envoy's substitution command at the start of a string: `%COMMAND%`,
 * `%COMMAND(arguments)%`, optionally with a `:length` before the closing `%`.
 */
const ENVOY_COMMAND = /^%[A-Z0-9_]+(\([^)]*\))?(:[0-9]+)?%/;

/**
 * Why a route may not add or set a header to `value`, or undefined if it may.
 * Istio's ValidateHTTPHeaderValue refuses control characters and format
 * strings its port of Envoy's old header parser cannot read; Envoy's
 * substitution formatter, which reads the value today, also wants every
 * unescaped `%` to open an upper-case command, and its proto caps the size.
 * Any of these would get the whole RouteConfiguration NACKed.
 */
export function headerValueProblem(value: string): string | undefined {
  const control = controlCharacterAt(value);
  if (control >= 0) {
    const code = value.charCodeAt(control).toString(16).padStart(2, "0");
    return `header value must not contain control characters (found \\x${code} at position ${control})`;
  }
  const bytes = Buffer.byteLength(value, "utf8");
  if (bytes > MAX_HEADER_BYTES) {
    return `header value is ${bytes} bytes; Envoy takes at most ${MAX_HEADER_BYTES}`;
  }
  return istioFormatProblem(value) ?? envoyFormatProblem(value);
}

/**
 * Why a header name may not be added, set or removed by a route, or
 * undefined: it must be a non-empty RFC 7230 token Envoy accepts. The
 * pseudo-header and Host rules are the caller's.
 */
export function headerNameProblem(name: string): string | undefined {
  if (name === "") return "header name cannot be empty";
  if (!isHeaderName(name)) return `"${name}" is not a valid header name`;
  const bytes = Buffer.byteLength(name, "utf8");
  if (bytes > MAX_HEADER_BYTES)
    return `header name is ${bytes} bytes; Envoy takes at most ${MAX_HEADER_BYTES}`;
  return undefined;
}

/** HTTP/2 pseudo-headers a route may match on (RFC 7540 §8.1.2.3, §8.1.2.4). */
const PSEUDO_HEADERS = new Set([":method", ":scheme", ":authority", ":path", ":status"]);

/** The prefix of a header match name that routes on a JWT claim instead. */
const JWT_CLAIM_PREFIX = "@request.auth.claims";

/**
 * Why `name` cannot be matched by a route's headers or withoutHeaders, or
 * undefined (Istio's ValidateHTTPHeaderNameOrJwtClaimRoute): a token, one
 * of the pseudo-headers, or a JWT claim as `@request.auth.claims.a.b` or
 * `@request.auth.claims[a][b]`.
 */
export function matchHeaderNameProblem(name: string): string | undefined {
  if (name === "") return "header name cannot be empty";
  if (isJwtClaimRoute(name) || PSEUDO_HEADERS.has(name) || isHeaderName(name)) return undefined;
  return `"${name}" is not a valid header name`;
}

/** Whether a header match name routes on a JWT claim (Istio's ToRoutingClaim). */
export function isJwtClaimRoute(name: string): boolean {
  if (!name.toLowerCase().startsWith(JWT_CLAIM_PREFIX)) return false;
  const claims = name.slice(JWT_CLAIM_PREFIX.length);
  return (
    (claims.startsWith(".") && claims.length > 1) ||
    (claims.startsWith("[") && claims.endsWith("]") && claims.length > 2)
  );
}

/**
 * Istio reads a header value as literal text with `%%` escapes and `%VAR%`
 * or `%VAR(args)%` variables, args being one bare string or a JSON array of
 * strings, with spaces allowed around the pieces of the arguments.
 */
function istioFormatProblem(value: string): string | undefined {
  type State =
    | "literal"
    | "name"
    | "argsStart"
    | "string"
    | "nextString"
    | "afterString"
    | "argsEnd"
    | "close";
  let state: State = "literal";
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const ch = value[i];
    switch (state) {
      case "literal":
        if (ch !== "%") break;
        if (i + 1 === value.length) return `unescaped "%" at position ${i} (a literal % is written %%)`;
        if (value[i + 1] === "%") i++;
        else {
          state = "name";
          start = i;
        }
        break;
      case "name":
        if (ch === "%") state = "literal";
        else if (ch === "(") state = "argsStart";
        break;
      case "argsStart":
        if (ch === "[") state = "nextString";
        else if (ch !== " ") state = "string";
        break;
      case "nextString":
        if (ch === '"') state = "string";
        else if (ch !== " ")
          return `expected '"' at position ${i} in the arguments of the variable at ${start}`;
        break;
      case "string":
        if (ch === "\\") {
          if (i + 1 === value.length) return `unterminated backslash at position ${i}`;
          i++;
        } else if (ch === ")") state = "close";
        else if (ch === '"') state = "afterString";
        break;
      case "afterString":
        if (ch === ",") state = "nextString";
        else if (ch === "]") state = "argsEnd";
        else if (ch !== " ")
          return `expected ",", "]" or a space at position ${i} in the variable at ${start}`;
        break;
      case "argsEnd":
        if (ch === ")") state = "close";
        else if (ch !== " ") return `expected ")" at position ${i} in the variable at ${start}`;
        break;
      case "close":
        if (ch === "%") state = "literal";
        else if (ch !== " ") return `expected "%" at position ${i} to close the variable at ${start}`;
        break;
    }
  }
  if (state !== "literal") return `unterminated variable at position ${start} (a literal % is written %%)`;
  return undefined;
}

/** Envoy's substitution formatter: each unescaped `%` must open a command. */
function envoyFormatProblem(value: string): string | undefined {
  for (let i = 0; i < value.length; i++) {
    if (value[i] !== "%") continue;
    if (value[i + 1] === "%") {
      i++;
      continue;
    }
    const command = ENVOY_COMMAND.exec(value.slice(i));
    if (!command) {
      return `no valid %COMMAND% at position ${i}: Envoy wants an upper-case command such as %DOWNSTREAM_REMOTE_ADDRESS% (a literal % is written %%)`;
    }
    i += command[0].length - 1;
  }
  return undefined;
}
