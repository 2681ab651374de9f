import type { PeerCertificate } from "node:tls";
import { type ChannelCredentials, experimental, type ServerCredentials } from "@grpc/grpc-js";
import { formatSpiffeId, spiffeIdOfPeer } from "./spiffe.js";
import type { IdentitySnapshot, IdentitySource, SpiffeId } from "./types.js";

/** One kind of provider listener (CA or identity): who is registered, and what each gets from a snapshot. */
class ListenerSet<Update> {
  readonly #listeners = new Set<(update: Update) => void>();

  constructor(private readonly updateOf: (snapshot: IdentitySnapshot) => Update) {}

  get size(): number {
    return this.#listeners.size;
  }

  /** Registers listener and hands it the current material, if any, on the next tick. */
  add(listener: (update: Update) => void, current: () => IdentitySnapshot | undefined): void {
    this.#listeners.add(listener);
    setImmediate(() => {
      const snapshot = current();
      if (snapshot && this.#listeners.has(listener)) listener(this.updateOf(snapshot));
    });
  }

  delete(listener: (update: Update) => void): void {
    this.#listeners.delete(listener);
  }

  send(snapshot: IdentitySnapshot): void {
    for (const listener of this.#listeners) listener(this.updateOf(snapshot));
  }
}

/**
 * A grpc-js CertificateProvider over an identity: CA listeners get the roots
 * concatenated, identity listeners get certChainPem + privateKeyPem, and both
 * follow source.onChange while any listener is registered. A new listener
 * gets the current material on the next tick: grpc-js registers its listener
 * before the watcher that applies updates, so a synchronous call would be
 * lost (and before start() there is none yet; the first snapshot follows).
 */
export function identityCertificateProvider(source: IdentitySource): experimental.CertificateProvider {
  const ca = new ListenerSet((snapshot) => ({ caCertificate: Buffer.from(snapshot.rootsPem.join("")) }));
  const identity = new ListenerSet((snapshot) => ({
    certificate: Buffer.from(snapshot.certificate.certChainPem),
    privateKey: Buffer.from(snapshot.certificate.privateKeyPem),
  }));
  let unsubscribe: (() => void) | undefined;
  const current = () => {
    try {
      return source.current();
    } catch {
      return undefined;
    }
  };
  const follow = () => {
    unsubscribe ??= source.onChange((snapshot) => {
      ca.send(snapshot);
      identity.send(snapshot);
    });
  };
  const unfollowIfUnused = () => {
    if (ca.size > 0 || identity.size > 0) return;
    unsubscribe?.();
    unsubscribe = undefined;
  };
  return {
    addCaCertificateListener(listener) {
      ca.add(listener, current);
      follow();
    },
    removeCaCertificateListener(listener) {
      ca.delete(listener);
      unfollowIfUnused();
    },
    addIdentityCertificateListener(listener) {
      identity.add(listener, current);
      follow();
    },
    removeIdentityCertificateListener(listener) {
      identity.delete(listener);
      unfollowIfUnused();
    },
  };
}

/**
 * mTLS client credentials that present the workload certificate (following
 * rotation) and accept the server only if its certificate chains to the
 * roots and its SPIFFE id passes acceptServer (undefined accepts; a string is
 * the reason to refuse). The SPIFFE check replaces the host name check, as
 * in Istio: mesh certificates name identities, not hosts.
 */
export function mtlsChannelCredentials(
  source: IdentitySource,
  acceptServer: (id: SpiffeId | undefined) => string | undefined,
): ChannelCredentials {
  const provider = identityCertificateProvider(source);
  return experimental.createCertificateProviderChannelCredentials(provider, provider, {
    checkServerIdentity: (_host: string, cert: PeerCertificate) => {
      const id = spiffeIdOfPeer(cert);
      const refusal = acceptServer(id);
      if (refusal === undefined) return undefined;
      return new Error(`server identity ${id ? formatSpiffeId(id) : "(no SPIFFE ID)"} refused: ${refusal}`);
    },
  });
}

/**
 * Server credentials presenting the workload certificate and verifying client
 * certificates against the roots, both following changes. Without
 * requireClientCertificate, a client may connect without a certificate (its
 * calls then have no SPIFFE id: see callerSpiffeId).
 */
export function mtlsServerCredentials(
  source: IdentitySource,
  options: { requireClientCertificate: boolean },
): ServerCredentials {
  const provider = identityCertificateProvider(source);
  return experimental.createCertificateProviderServerCredentials(
    provider,
    provider,
    options.requireClientCertificate,
  );
}

/**
 * The SPIFFE id of the client of a call on an mTLS server, from the
 * certificate TLS verified against the roots; undefined if it presented none
 * (or one that did not verify, when client certificates are optional).
 */
export function callerSpiffeId(call: {
  getAuthContext(): { sslPeerCertificate?: PeerCertificate } | null;
}): SpiffeId | undefined {
  return spiffeIdOfPeer(call.getAuthContext()?.sslPeerCertificate);
}
