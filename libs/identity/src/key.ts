import { KeyObject, webcrypto } from "node:crypto";
import { x509 } from "./x509.js";

/** ECDSA P-256 with SHA-256: fast to generate (Istio's default RSA 2048 takes far longer), accepted by the CA. */
const EC_P256 = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

/** A fresh private key and a CSR signed by it. */
export interface KeyAndCsr {
  /** PKCS#8 PEM. */
  privateKeyPem: string;
  /** PKCS#10 PEM, asking for the one URI SAN. */
  csrPem: string;
}

/**
 * Generates an EC P-256 key in this process and a CSR over it that asks for
 * spiffeUri as its only SAN (the CA signs for the caller's identity anyway,
 * and refuses a CSR that asks for another). The key is new for every
 * certificate, as istio-agent does.
 */
export async function generateKeyAndCsr(spiffeUri: string): Promise<KeyAndCsr> {
  const keys = (await webcrypto.subtle.generateKey(EC_P256, true, [
    "sign",
    "verify",
  ])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    // @peculiar/x509 types its keys with the DOM's CryptoKeyPair, which node's is at run time.
    keys: keys as unknown as Parameters<typeof x509.Pkcs10CertificateRequestGenerator.create>[0]["keys"],
    signingAlgorithm: EC_P256,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: "url", value: spiffeUri }])],
  });
  const privateKeyPem = KeyObject.from(keys.privateKey).export({ type: "pkcs8", format: "pem" }).toString();
  return { privateKeyPem, csrPem: csr.toString("pem") };
}
