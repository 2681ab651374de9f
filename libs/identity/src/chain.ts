import { createPrivateKey, X509Certificate } from "node:crypto";
import { pemBlocks } from "./roots.js";
import { uriSans } from "./spiffe.js";
import type { WorkloadCertificate } from "./types.js";

/** A certificate the CA issued, split the way a workload uses it. */
export interface IssuedCertificate {
  certificate: WorkloadCertificate;
  /** The root the CA sent last in the chain: trusted until (and besides) the trust bundle. */
  issuingRootPem?: string;
}

/**
 * Splits CreateCertificate's cert_chain (leaf, intermediates, root last) into
 * the chain a workload presents (all but the root) and the root, after
 * checking that the leaf is for the identity asked for and holds our key.
 * The CA never signs another identity or key; a mismatch means a confused
 * CA or a wrong address, and the certificate would be useless anyway.
 */
export function issuedCertificate(
  chainPems: readonly string[],
  privateKeyPem: string,
  expectedSpiffeId: string,
): IssuedCertificate {
  const blocks = chainPems.flatMap(pemBlocks);
  const leafPem = blocks[0];
  if (!leafPem) throw new Error("the CA answered with an empty certificate chain");
  const leaf = new X509Certificate(leafPem);
  const uris = uriSans(leaf.subjectAltName);
  if (uris.length !== 1 || uris[0] !== expectedSpiffeId)
    throw new Error(
      `the CA issued a certificate for ${uris.join(", ") || "no URI SAN"}, but ${expectedSpiffeId} was asked for`,
    );
  if (!leaf.checkPrivateKey(createPrivateKey(privateKeyPem)))
    throw new Error("the CA issued a certificate for another public key than the CSR's");
  // A lone leaf has no root to split off; a longer chain ends with the root.
  const presented = blocks.length > 1 ? blocks.slice(0, -1) : blocks;
  const root = blocks.length > 1 ? blocks[blocks.length - 1] : undefined;
  return {
    certificate: {
      certChainPem: presented.join(""),
      privateKeyPem,
      spiffeId: expectedSpiffeId,
      notBefore: new Date(leaf.validFrom),
      notAfter: new Date(leaf.validTo),
    },
    ...(root ? { issuingRootPem: root } : {}),
  };
}
