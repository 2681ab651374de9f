// @peculiar/x509 needs the reflect-metadata polyfill loaded before it.
import "reflect-metadata";
import { KeyObject, webcrypto } from "node:crypto";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** A self-signed certificate and its private key, both PEM: a kubernetes.io/tls Secret's tls.crt and tls.key. */
export async function selfSignedKeyPair(
  commonName = "example.com",
): Promise<{ certificate: string; privateKey: string }> {
  const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = await webcrypto.subtle.generateKey(algorithm, true, ["sign", "verify"]);
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    keys: keys as never,
    name: `CN=${commonName}`,
    signingAlgorithm: algorithm,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
  });
  const privateKey = KeyObject.from(keys.privateKey).export({ type: "pkcs8", format: "pem" }).toString();
  return { certificate: certificate.toString("pem"), privateKey };
}
