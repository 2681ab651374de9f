/** Why a request carries no usable bearer token. */
export type BearerProblem = "missing" | "malformed" | "too_large";

/** The token of an Authorization header, or why there is none. */
export type BearerResult =
  | { readonly ok: true; readonly token: string }
  | { readonly ok: false; readonly problem: BearerProblem; readonly message: string };

/**
 * Largest Authorization header read, in bytes. A Kubernetes service-account
 * token is 1-2 KiB and an OIDC token with many groups a few KiB; anything
 * larger is refused before it is hashed or sent to a TokenReview.
 */
export const MAX_AUTHORIZATION_BYTES = 8192;

// RFC 6750's b64token: the characters a bearer token may use, then padding.
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** Reads `Authorization: Bearer <token>` (RFC 6750), refusing a header over maxBytes. */
export function parseBearer(
  header: string | undefined,
  maxBytes: number = MAX_AUTHORIZATION_BYTES,
): BearerResult {
  if (header === undefined || header === "") {
    return {
      ok: false,
      problem: "missing",
      message: "no Authorization header: send Authorization: Bearer <token>",
    };
  }
  if (Buffer.byteLength(header) > maxBytes) {
    return {
      ok: false,
      problem: "too_large",
      message: `the Authorization header is larger than the limit of ${maxBytes} bytes`,
    };
  }
  const match = BEARER.exec(header);
  if (!match) {
    return {
      ok: false,
      problem: "malformed",
      message: "the Authorization header is not of the form Bearer <token>",
    };
  }
  return { ok: true, token: match[1] as string };
}
