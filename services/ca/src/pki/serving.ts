import { generateKeyPairSync } from "node:crypto";
import { isIP } from "node:net";
import type { CaMaterial } from "./ca-material.js";
import { buildCertificate, toPem } from "./certificate.js";

/** The CA's own TLS material. */
export interface ServingCertificate {
  certChainPem: string;
  keyPem: string;
  /** DNS names and IPs in the certificate. */
  names: string[];
}

/** How long a serving certificate lasts; it is made anew at every start. */
const SERVING_TTL_MS = 365 * 86_400_000;

/**
 * Makes the CA's serving certificate, signed by the CA itself, for
 * sextant-ca.<ns>.svc (and its cluster-local form), localhost and 127.0.0.1
 * for local meshes, and any extra names. A fresh P-256 key at each start:
 * nothing to persist, and clients verify it with the trust bundle.
 */
export function makeServingCertificate(
  material: CaMaterial,
  namespace: string,
  extraNames: string[],
): ServingCertificate {
  const names = [
    ...new Set([
      `sextant-ca.${namespace}.svc`,
      `sextant-ca.${namespace}.svc.cluster.local`,
      "localhost",
      "127.0.0.1",
      ...extraNames,
    ]),
  ];
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const now = Date.now();
  const der = buildCertificate(
    {
      kind: "workload",
      publicKeySpki: publicKey.export({ format: "der", type: "spki" }),
      subject: [],
      notBefore: new Date(now - 60_000),
      notAfter: new Date(Math.min(now + SERVING_TTL_MS, new Date(material.signingCert.validTo).getTime())),
      dnsNames: names.filter((n) => !isIP(n)),
      ips: names.filter((n) => isIP(n)),
    },
    { certificate: material.signingCert, key: material.signingKey },
  );
  return {
    certChainPem: [toPem(der), ...material.chainPems].join(""),
    keyPem: privateKey.export({ format: "pem", type: "pkcs8" }).toString(),
    names,
  };
}
