import { createPublicKey } from "node:crypto";
import { x509 } from "@sextant/identity";

/** A certificate signing request that parsed, whose signature verified, and whose key is acceptable. */
export interface CheckedCsr {
  /** The requester's public key, DER SubjectPublicKeyInfo. */
  publicKeySpki: Buffer;
  /** e.g. "RSA 2048" or "EC P-256", for logs. */
  keyDescription: string;
  /** URI SANs the CSR asks for; the CA never copies them, only compares them with the caller's identity. */
  requestedUris: string[];
}

/** Why a CSR was refused; `reason` labels the error metric. */
export class CsrError extends Error {
  constructor(
    readonly reason: "malformed_csr" | "bad_csr_signature" | "weak_key" | "unsupported_key",
    message: string,
  ) {
    super(message);
    this.name = "CsrError";
  }
}

/** The smallest RSA modulus accepted, as Istio requires. */
export const MIN_RSA_BITS = 2048;

/**
 * Parses a PEM CSR, verifies its self-signature (proof that the requester
 * holds the key) and checks the key: RSA of at least 2048 bits, or EC P-256.
 * @peculiar/x509 parses it, since node-forge cannot parse EC keys.
 */
export async function checkCsr(pem: string): Promise<CheckedCsr> {
  if (
    !pem.includes("-----BEGIN CERTIFICATE REQUEST-----") &&
    !pem.includes("-----BEGIN NEW CERTIFICATE REQUEST-----")
  )
    throw new CsrError("malformed_csr", "malformed CSR: no PEM CERTIFICATE REQUEST block");
  let csr: InstanceType<typeof x509.Pkcs10CertificateRequest>;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem.replace(/NEW CERTIFICATE REQUEST/g, "CERTIFICATE REQUEST"));
  } catch (error) {
    throw new CsrError("malformed_csr", `malformed CSR: ${(error as Error).message}`);
  }
  let publicKeySpki: Buffer;
  let details: { type: string | undefined; bits?: number; curve?: string };
  try {
    // The key is parsed on first access, so a malformed one throws here.
    publicKeySpki = Buffer.from(csr.publicKey.rawData);
    const key = createPublicKey({ key: publicKeySpki, format: "der", type: "spki" });
    const d = key.asymmetricKeyDetails ?? {};
    details = {
      type: key.asymmetricKeyType,
      ...(d.modulusLength !== undefined ? { bits: d.modulusLength } : {}),
      ...(d.namedCurve !== undefined ? { curve: d.namedCurve } : {}),
    };
  } catch (error) {
    throw new CsrError("malformed_csr", `malformed CSR: bad public key: ${(error as Error).message}`);
  }
  let keyDescription: string;
  if (details.type === "rsa") {
    if ((details.bits ?? 0) < MIN_RSA_BITS)
      throw new CsrError(
        "weak_key",
        `CSR key is RSA ${details.bits} bits; at least ${MIN_RSA_BITS} are required`,
      );
    keyDescription = `RSA ${details.bits}`;
  } else if (details.type === "ec" && details.curve === "prime256v1") {
    keyDescription = "EC P-256";
  } else {
    throw new CsrError(
      "unsupported_key",
      `CSR key type ${details.type}${details.curve ? ` (${details.curve})` : ""} is not supported: use RSA >= ${MIN_RSA_BITS} or EC P-256`,
    );
  }
  let verified = false;
  try {
    verified = await csr.verify();
  } catch (error) {
    throw new CsrError("bad_csr_signature", `CSR signature does not verify: ${(error as Error).message}`);
  }
  if (!verified) throw new CsrError("bad_csr_signature", "CSR signature does not verify");
  const san = csr.extensions.find((e) => e instanceof x509.SubjectAlternativeNameExtension) as
    | InstanceType<typeof x509.SubjectAlternativeNameExtension>
    | undefined;
  const requestedUris = (san?.names.items ?? []).filter((n) => n.type === "url").map((n) => n.value);
  return { publicKeySpki, keyDescription, requestedUris };
}
