import { X509Certificate } from "node:crypto";
import {
  AuthenticationError,
  type Authenticator,
  type CallCredentials,
  type Caller,
} from "./authenticator.js";

const SPIFFE_PATH = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/sa\/([^/]+)$/;

/**
 * Authenticates a renewal: a workload presents the mesh certificate it
 * holds over mTLS, and is issued one for the same identity. TLS has proved
 * possession of the key but, on purpose, not the chain (callers without a
 * certificate must get through too), so this checks it: signed by one of
 * the CA's signing certificates, within its validity, in our trust domain.
 */
export class MeshCertificateAuthenticator implements Authenticator {
  readonly name = "mesh-certificate";

  constructor(
    private readonly trustDomain: string,
    /** Certificates whose signatures are accepted: the current signing certificate. */
    private readonly issuers: () => readonly X509Certificate[],
  ) {}

  async authenticate(call: CallCredentials): Promise<Caller | undefined> {
    const raw = call.peerCertificate?.raw;
    if (!raw || raw.length === 0) return undefined;
    const cert = new X509Certificate(raw);
    if (!this.issuers().some((issuer) => cert.checkIssued(issuer) && cert.verify(issuer.publicKey)))
      throw new AuthenticationError(
        "unauthenticated",
        "foreign_certificate",
        "mesh-certificate: client certificate is not signed by this CA",
      );
    const now = Date.now();
    if (now < new Date(cert.validFrom).getTime() || now > new Date(cert.validTo).getTime())
      throw new AuthenticationError(
        "unauthenticated",
        "expired_certificate",
        `mesh-certificate: client certificate is not valid now (valid ${cert.validFrom} to ${cert.validTo})`,
      );
    const uris = (cert.subjectAltName ?? "")
      .split(", ")
      .filter((s) => s.startsWith("URI:"))
      .map((s) => s.slice(4));
    const match = uris.length === 1 ? SPIFFE_PATH.exec(uris[0] ?? "") : null;
    if (!match?.[2] || !match[3])
      throw new AuthenticationError(
        "permission_denied",
        "no_spiffe_id",
        "mesh-certificate: client certificate has no single SPIFFE URI SAN",
      );
    if (match[1] !== this.trustDomain)
      throw new AuthenticationError(
        "permission_denied",
        "foreign_trust_domain",
        `mesh-certificate: trust domain ${match[1]} is not ${this.trustDomain}`,
      );
    return { namespace: match[2], serviceAccount: match[3], authenticator: this.name };
  }
}
