import type { AccessRequest, Decision } from "./access.js";
import { type Authenticator, AuthUnavailableError, type Identity } from "./authenticator.js";
import { type BearerProblem, MAX_AUTHORIZATION_BYTES, parseBearer } from "./bearer.js";
import type { FailureLimiter } from "./failure-limiter.js";

/** An authenticated caller: who it is, and what it may do. */
export interface Caller extends Identity {
  authorize(request: AccessRequest): Promise<Decision>;
}

/** Why a request was not authenticated: a label of sextant_*_auth_failures_total. */
export type AuthFailureReason =
  | BearerProblem
  | "unknown_token"
  | "rate_limited"
  | "unavailable"
  | "unconfigured";

/** The outcome of authenticating a request. */
export type AuthOutcome =
  | { readonly ok: true; readonly caller: Caller }
  | {
      readonly ok: false;
      readonly reason: AuthFailureReason;
      /** 401, 429 or 503. */
      readonly status: number;
      readonly message: string;
      /** WWW-Authenticate on a 401, Retry-After on a 429. */
      readonly headers: Readonly<Record<string, string>>;
    };

/** The caller of a service run with API_AUTH=none: anyone, allowed everything. */
export const ANONYMOUS: Caller = {
  subject: "system:anonymous",
  groups: [],
  authenticator: "none",
  authorize: async () => ({ allowed: true }),
};

/**
 * Authenticates requests by their bearer token: the authenticators in order
 * (the first that knows the token wins), and a limiter of failed attempts by
 * source address. "open" (API_AUTH=none) makes every request the anonymous
 * caller; with no authenticators and not open, nobody is authenticated.
 */
export class AuthChain {
  constructor(
    private readonly authenticators: readonly Authenticator[],
    private readonly limiter: FailureLimiter,
    private readonly mode: "authenticate" | "open" = "authenticate",
    private readonly maxHeaderBytes: number = MAX_AUTHORIZATION_BYTES,
  ) {}

  /** Authenticates a request from its Authorization header and source address. */
  async authenticate(authorization: string | undefined, address: string): Promise<AuthOutcome> {
    if (this.mode === "open") return { ok: true, caller: ANONYMOUS };
    if (this.authenticators.length === 0) {
      return unauthorized(
        "unconfigured",
        "no authenticator is configured (API_AUTH): no token can be accepted",
        "Bearer",
      );
    }
    const retryAfter = this.limiter.refused(address);
    if (retryAfter !== undefined) {
      return {
        ok: false,
        reason: "rate_limited",
        status: 429,
        message: `too many failed authentications from ${address}; try again in ${retryAfter} s`,
        headers: { "Retry-After": String(retryAfter) },
      };
    }
    const bearer = parseBearer(authorization, this.maxHeaderBytes);
    if (!bearer.ok) {
      this.limiter.failed(address);
      const challenge = bearer.problem === "missing" ? "Bearer" : 'Bearer error="invalid_request"';
      return unauthorized(bearer.problem, bearer.message, challenge);
    }
    let unavailable: AuthUnavailableError | undefined;
    for (const authenticator of this.authenticators) {
      let identity: Identity | undefined;
      try {
        identity = await authenticator.authenticate(bearer.token);
      } catch (error) {
        if (!(error instanceof AuthUnavailableError)) throw error;
        // A later authenticator may still know the token.
        unavailable ??= error;
        continue;
      }
      if (identity) {
        const known = identity;
        return {
          ok: true,
          caller: { ...known, authorize: (request) => authenticator.authorize(known, request) },
        };
      }
    }
    if (unavailable) {
      return { ok: false, reason: "unavailable", status: 503, message: unavailable.message, headers: {} };
    }
    this.limiter.failed(address);
    return unauthorized("unknown_token", "the bearer token is not valid", 'Bearer error="invalid_token"');
  }
}

function unauthorized(reason: AuthFailureReason, message: string, challenge: string): AuthOutcome {
  return { ok: false, reason, status: 401, message, headers: { "WWW-Authenticate": challenge } };
}
