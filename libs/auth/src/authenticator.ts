import type { AccessRequest, Decision } from "./access.js";

/** Who a token belongs to, as the authenticator that recognised it says. */
export interface Identity {
  /** The user: a token file's subject, or a Kubernetes user name. */
  readonly subject: string;
  readonly groups: readonly string[];
  /** The authenticator that recognised the token ("tokens", "kubernetes"). */
  readonly authenticator: string;
}

/**
 * One way of recognising a bearer token and deciding what its owner may
 * do. The authenticator that recognised a token also authorizes its
 * requests: a token file's subjects have no Kubernetes RBAC, and a
 * Kubernetes user has no entry in the token file.
 */
export interface Authenticator {
  readonly name: string;
  /** The identity of a token, or undefined if this authenticator does not know it. Rejects when it cannot tell. */
  authenticate(token: string): Promise<Identity | undefined>;
  authorize(identity: Identity, request: AccessRequest): Promise<Decision>;
}

/** Thrown when an authenticator cannot answer (the Kubernetes API is unreachable): 503, not 401. */
export class AuthUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "AuthUnavailableError";
  }
}
