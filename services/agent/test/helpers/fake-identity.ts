import type { IdentitySnapshot, IdentitySource } from "@sextant/identity";
import { type KeyPair, makeLeaf, makeRoot } from "./certs.js";

/**
 * An IdentitySource the test drives: snapshots of certificates it made with
 * openssl, changed by rotate(). Stands in for WorkloadIdentity, so the SDS
 * server, the xDS proxy and the file writer are tested without a CA.
 */
export class FakeIdentity implements IdentitySource {
  readonly root: KeyPair;
  readonly spiffeId: string;
  #snapshot: IdentitySnapshot;
  readonly #listeners = new Set<(snapshot: IdentitySnapshot) => void>();

  /** A certificate for spiffeId, signed by root (a new one unless given: give one to share a trust domain). */
  constructor(
    spiffeId = "spiffe://cluster.local/ns/default/sa/web",
    root: KeyPair = makeRoot("cluster.local"),
  ) {
    this.spiffeId = spiffeId;
    this.root = root;
    this.#snapshot = this.#snapshotOf(makeLeaf(this.root, spiffeId), [this.root.certPem]);
  }

  current(): IdentitySnapshot {
    return this.#snapshot;
  }

  onChange(listener: (snapshot: IdentitySnapshot) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A new certificate and key (and optionally other roots), announced to the listeners. */
  rotate(rootsPem: string[] = this.#snapshot.rootsPem): IdentitySnapshot {
    this.#snapshot = this.#snapshotOf(makeLeaf(this.root, this.spiffeId), rootsPem);
    for (const listener of this.#listeners) listener(this.#snapshot);
    return this.#snapshot;
  }

  /** The same certificate with another trust bundle. */
  changeRoots(rootsPem: string[]): IdentitySnapshot {
    this.#snapshot = { ...this.#snapshot, rootsPem };
    for (const listener of this.#listeners) listener(this.#snapshot);
    return this.#snapshot;
  }

  get listeners(): number {
    return this.#listeners.size;
  }

  #snapshotOf(leaf: KeyPair, rootsPem: string[]): IdentitySnapshot {
    const now = Date.now();
    return {
      certificate: {
        certChainPem: leaf.certPem,
        privateKeyPem: leaf.keyPem,
        spiffeId: this.spiffeId,
        notBefore: new Date(now - 60_000),
        notAfter: new Date(now + 86_400_000),
      },
      rootsPem,
    };
  }
}
