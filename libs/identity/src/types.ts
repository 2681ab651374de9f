// The shapes every holder of a mesh identity shares: the agent (for its
// workload), push (for its 15012 port) and the tests. Implementations live
// beside this file; consumers code against these interfaces only.

/** A SPIFFE identity of Istio's form: spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>. */
export interface SpiffeId {
  trustDomain: string;
  namespace: string;
  serviceAccount: string;
}

/** A signed workload certificate with its private key, as PEM. */
export interface WorkloadCertificate {
  /** Leaf first, then intermediates, as the CA returned them (the root is not included). */
  certChainPem: string;
  /** PKCS#8 PEM. Never leaves the process except into files or SDS for the local proxy. */
  privateKeyPem: string;
  /** The leaf's SPIFFE URI. */
  spiffeId: string;
  notBefore: Date;
  notAfter: Date;
}

/** What a workload currently holds: its certificate and every root it must trust. */
export interface IdentitySnapshot {
  certificate: WorkloadCertificate;
  /** The trust bundle: every root certificate (PEM) the mesh trusts now, active root first. */
  rootsPem: string[];
}

/**
 * A live identity: a current snapshot and change notifications. A rotation or
 * a trust bundle change produces a new snapshot.
 */
export interface IdentitySource {
  /** The latest snapshot; throws if none has been obtained yet. */
  current(): IdentitySnapshot;
  /** Calls listener after each change (not for the current one); returns the unsubscribe function. */
  onChange(listener: (snapshot: IdentitySnapshot) => void): () => void;
}
