import type { PeerCertificate } from "node:tls";
import type { Metadata } from "@grpc/grpc-js";

/** What an authenticator sees of a CreateCertificate call. */
export interface CallCredentials {
  metadata: Metadata;
  /** The client certificate presented over mTLS, if any (not verified by TLS: see MeshCertificateAuthenticator). */
  peerCertificate?: PeerCertificate;
}

/** An authenticated workload: the only source of the identity a certificate is signed for. */
export interface Caller {
  namespace: string;
  serviceAccount: string;
  /** Which authenticator vouched for it, for the audit log. */
  authenticator: string;
}

/** A credential of the authenticator's kind was presented and rejected. */
export class AuthenticationError extends Error {
  constructor(
    /** UNAUTHENTICATED: the credential is not valid; PERMISSION_DENIED: it is, but may not have a mesh identity. */
    readonly kind: "unauthenticated" | "permission_denied",
    /** Metric label, e.g. "token_review_failed". */
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = "AuthenticationError";
  }
}

/**
 * One way of establishing who the caller is. authenticate answers undefined
 * when the call carries no credential of its kind, so the next one is tried.
 */
export interface Authenticator {
  readonly name: string;
  authenticate(call: CallCredentials): Promise<Caller | undefined>;
}

/** The bearer token of the authorization header (istio-agent sends `Bearer <jwt>`), if any. */
export function bearerToken(metadata: Metadata): string | undefined {
  for (const value of metadata.get("authorization")) {
    const match = /^Bearer\s+(\S+)$/i.exec(String(value));
    if (match?.[1]) return match[1];
  }
  return undefined;
}

/** The SPIFFE ID of a caller in a trust domain. */
export function spiffeId(trustDomain: string, caller: { namespace: string; serviceAccount: string }): string {
  return `spiffe://${trustDomain}/ns/${caller.namespace}/sa/${caller.serviceAccount}`;
}

/** The result of running the authenticators in order. */
export type ChainResult =
  | { ok: true; caller: Caller }
  | { ok: false; kind: "unauthenticated" | "permission_denied"; reason: string; message: string };

/**
 * Tries each authenticator in order; the first that vouches for the caller
 * wins. If none does, the answer names every check that failed, and is
 * PERMISSION_DENIED only if a credential was valid but not allowed.
 */
export async function authenticate(
  authenticators: readonly Authenticator[],
  call: CallCredentials,
): Promise<ChainResult> {
  const failures: AuthenticationError[] = [];
  for (const authenticator of authenticators) {
    try {
      const caller = await authenticator.authenticate(call);
      if (caller) return { ok: true, caller };
    } catch (error) {
      if (error instanceof AuthenticationError) failures.push(error);
      else
        failures.push(
          new AuthenticationError(
            "unauthenticated",
            "authenticator_error",
            `${authenticator.name}: ${(error as Error).message}`,
          ),
        );
    }
  }
  if (failures.length === 0)
    return {
      ok: false,
      kind: "unauthenticated",
      reason: "no_credentials",
      message: `no credentials: expected a bearer token or a mesh client certificate (tried ${authenticators.map((a) => a.name).join(", ")})`,
    };
  const denied = failures.find((f) => f.kind === "permission_denied");
  const first = denied ?? failures[0]!;
  return {
    ok: false,
    kind: denied ? "permission_denied" : "unauthenticated",
    reason: first.reason,
    message: failures.map((f) => f.message).join("; "),
  };
}
