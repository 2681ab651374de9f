import type { V1Secret } from "@kubernetes/client-node";
import { tlsKeyPairProblem } from "@sextant/model";
import { Credential, CredentialPresence } from "@sextant/proto";

// The data keys istiod reads (pilot/pkg/credentials/kube): a generic Secret's
// pair first, then kubernetes.io/tls's; the CA bundle likewise.
const CERT_PAIRS: ReadonlyArray<readonly [cert: string, key: string]> = [
  ["cert", "key"],
  ["tls.crt", "tls.key"],
];
const CA_KEYS = ["cacert", "ca.crt"];

/**
 * The TLS material of a Secret, as istiod extracts it: the first pair with
 * both values non-empty, and the first non-empty CA bundle. A Secret with
 * neither is still a Credential (empty fields): push then serves nothing
 * for it, as istiod does for a Secret without the expected keys.
 */
export function credentialOf(secret: V1Secret): Credential {
  const data = secret.data ?? {};
  const value = (key: string) => Buffer.from(data[key] ?? "", "base64");
  const pair = CERT_PAIRS.find(([cert, key]) => value(cert).length > 0 && value(key).length > 0);
  const ca = CA_KEYS.find((key) => value(key).length > 0);
  return Credential.fromPartial({
    namespace: secret.metadata?.namespace ?? "",
    name: secret.metadata?.name ?? "",
    secretType: secret.type ?? "",
    certificateChain: pair ? value(pair[0]) : Buffer.alloc(0),
    privateKey: pair ? value(pair[1]) : Buffer.alloc(0),
    caCertificate: ca ? value(ca) : Buffer.alloc(0),
  });
}

/**
 * What the index says of a Credential: its names, which parts it holds and
 * why its pair cannot serve (istiod's X509KeyPair check), never the bytes.
 */
export function presenceOf(credential: Credential): CredentialPresence {
  const hasCertificate = credential.certificateChain.length > 0 && credential.privateKey.length > 0;
  const problem = hasCertificate
    ? tlsKeyPairProblem(credential.certificateChain, credential.privateKey)
    : undefined;
  return CredentialPresence.fromPartial({
    namespace: credential.namespace,
    name: credential.name,
    hasCertificate,
    hasCaCertificate: credential.caCertificate.length > 0,
    ...(problem ? { certificateProblem: problem } : {}),
  });
}
