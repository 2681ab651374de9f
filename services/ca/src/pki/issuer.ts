import type { CaMaterial } from "./ca-material.js";
import { buildCertificate, toPem } from "./certificate.js";
import type { CheckedCsr } from "./csr.js";

/** Workload certificate lifetimes, in seconds. */
export interface TtlPolicy {
  /** Used when the request asks for none (Istio: DEFAULT_WORKLOAD_CERT_TTL, 24 h). */
  defaultSeconds: number;
  /** Longer requests are cut to this (Istio: MAX_WORKLOAD_CERT_TTL, 90 days). */
  maxSeconds: number;
}

/** A signed workload certificate. */
export interface Issued {
  /** Leaf, then intermediates, then the root. */
  chain: string[];
  serialHex: string;
  notAfter: Date;
}

/** How far back a leaf's notBefore is set, for clocks that lag behind the CA's. */
const CLOCK_SKEW_MS = 60_000;

/** The workload certificate signer: one identity, one key, one lifetime policy. */
export class CertificateIssuer {
  constructor(
    readonly material: CaMaterial,
    readonly ttl: TtlPolicy,
  ) {}

  /** The lifetime granted for a requested validity_duration: the default if none, capped at the maximum. */
  grantedSeconds(requestedSeconds: number): number {
    const wanted = requestedSeconds > 0 ? requestedSeconds : this.ttl.defaultSeconds;
    return Math.min(wanted, this.ttl.maxSeconds);
  }

  /**
   * Signs a certificate for spiffeId over the CSR's key. Nothing else of the
   * CSR is copied: the only SAN is the caller's authenticated identity. A
   * leaf never outlives the certificate that signs it.
   */
  issue(csr: CheckedCsr, spiffeId: string, requestedSeconds: number, serialHex: string): Issued {
    const now = Date.now();
    const caNotAfter = new Date(this.material.signingCert.validTo).getTime();
    const notAfter = new Date(Math.min(now + this.grantedSeconds(requestedSeconds) * 1000, caNotAfter));
    const der = buildCertificate(
      {
        kind: "workload",
        publicKeySpki: csr.publicKeySpki,
        subject: [],
        notBefore: new Date(now - CLOCK_SKEW_MS),
        notAfter,
        uris: [spiffeId],
        serialHex,
      },
      { certificate: this.material.signingCert, key: this.material.signingKey },
    );
    return { chain: [toPem(der), ...this.material.chainPems], serialHex, notAfter };
  }
}
