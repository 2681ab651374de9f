import { createHash, type KeyObject, randomBytes, sign, type X509Certificate } from "node:crypto";
import { x509 } from "@sextant/identity";
import forge from "node-forge";

const { asn1 } = forge;

/** What a certificate is for; sets its basic constraints, key usage and extended key usage. */
export type CertificateKind = "root" | "intermediate" | "workload";

/** Everything {@link buildCertificate} puts in a certificate. */
export interface CertificateTemplate {
  kind: CertificateKind;
  /** The subject's public key, as DER SubjectPublicKeyInfo (any key type: RSA or EC). */
  publicKeySpki: Buffer;
  /** Subject attributes, e.g. [{ shortName: "O", value: "cluster.local" }]; empty for workloads, as Istio issues them. */
  subject: forge.pki.CertificateField[];
  notBefore: Date;
  notAfter: Date;
  uris?: string[];
  dnsNames?: string[];
  ips?: string[];
  /** Serial number as hex; random 128 bits when absent. */
  serialHex?: string;
}

/** The signer: its certificate (undefined for a self-signed root, which signs itself) and private key. */
export interface SigningIdentity {
  certificate?: X509Certificate;
  key: KeyObject;
}

// forge exports getTBSCertificate, but its type definitions omit it.
interface ForgeTbs {
  getTBSCertificate(cert: forge.pki.Certificate): forge.asn1.Asn1;
}

const OID_SHA256_RSA = "1.2.840.113549.1.1.11";
const OID_ECDSA_SHA256 = "1.2.840.10045.4.3.2";

// forge's TBS builder needs a forge public key; it is replaced by the real
// SubjectPublicKeyInfo (which may be EC, which forge cannot represent).
const placeholderKey = forge.pki.setRsaPublicKey(
  new forge.jsbn.BigInteger("3"),
  new forge.jsbn.BigInteger("3"),
);

// Parsed issuer names and key identifiers per CA certificate, so that each
// issuance does not parse the CA certificate again.
const issuerCache = new WeakMap<X509Certificate, { name: forge.asn1.Asn1; keyId?: string }>();

/** A PEM block of the given type from DER bytes. */
export function toPem(der: Buffer, type = "CERTIFICATE"): string {
  const body = der.toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${type}-----\n${body}${body.endsWith("\n") ? "" : "\n"}-----END ${type}-----\n`;
}

/**
 * The key identifier of a public key: the SHA-1 of the whole
 * SubjectPublicKeyInfo. RFC 7093 allows any stable hash of the key; this one
 * needs no parsing of the key type.
 */
export function keyIdentifier(spki: Buffer): Buffer {
  return createHash("sha1").update(spki).digest();
}

/**
 * Builds and signs a certificate. forge assembles the TBSCertificate, and
 * node:crypto signs it: forge's own RSA signing is about twenty times slower
 * (measured when ca was written). The subject key and the issuer name are spliced in as raw DER,
 * so EC keys and any issuer encoding survive unchanged, which chain building
 * by name in openssl requires.
 */
export function buildCertificate(template: CertificateTemplate, signer: SigningIdentity): Buffer {
  const cert = forge.pki.createCertificate();
  cert.publicKey = placeholderKey;
  cert.serialNumber = template.serialHex ?? randomSerialHex();
  cert.validity.notBefore = template.notBefore;
  cert.validity.notAfter = template.notAfter;
  cert.setSubject(template.subject);
  cert.setIssuer(template.subject);
  const isCa = template.kind !== "workload";
  const altNames = [
    ...(template.uris ?? []).map((value) => ({ type: 6, value })),
    ...(template.dnsNames ?? []).map((value) => ({ type: 2, value })),
    ...(template.ips ?? []).map((ip) => ({ type: 7, ip })),
  ];
  const issuer = signer.certificate ? issuerOf(signer.certificate) : undefined;
  const skid = keyIdentifier(template.publicKeySpki).toString("binary");
  const extensions: object[] = [
    { name: "basicConstraints", cA: isCa, critical: true },
    isCa
      ? { name: "keyUsage", keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true }
      : { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    {
      name: "subjectKeyIdentifier",
      value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, skid),
    },
  ];
  if (!isCa) extensions.push({ name: "extKeyUsage", serverAuth: true, clientAuth: true });
  const authorityKeyId = signer.certificate ? issuer?.keyId : skid;
  if (authorityKeyId) extensions.push({ name: "authorityKeyIdentifier", keyIdentifier: authorityKeyId });
  // Istio's workload certificates have an empty subject, so the SAN is critical (RFC 5280 4.2.1.6).
  if (altNames.length > 0)
    extensions.push({ name: "subjectAltName", altNames, critical: template.subject.length === 0 });
  cert.setExtensions(extensions);

  const rsa = signer.key.asymmetricKeyType === "rsa";
  const algorithm = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    asn1.create(
      asn1.Class.UNIVERSAL,
      asn1.Type.OID,
      false,
      asn1.oidToDer(rsa ? OID_SHA256_RSA : OID_ECDSA_SHA256).getBytes(),
    ),
    // RSA's parameters are an explicit NULL; ECDSA's are absent (RFC 5758).
    ...(rsa ? [asn1.create(asn1.Class.UNIVERSAL, asn1.Type.NULL, false, "")] : []),
  ]);
  // forge encodes its own AlgorithmIdentifier first; it is replaced below.
  cert.siginfo.algorithmOid = OID_SHA256_RSA;
  const tbs = (forge.pki as unknown as ForgeTbs).getTBSCertificate(cert);
  const fields = tbs.value as forge.asn1.Asn1[];
  fields[2] = algorithm;
  if (issuer) fields[3] = issuer.name;
  fields[6] = asn1.fromDer(template.publicKeySpki.toString("binary"));
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), "binary");
  const signature = sign("sha256", tbsDer, signer.key);
  const certificate = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    tbs,
    algorithm,
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, `\u0000${signature.toString("binary")}`),
  ]);
  return Buffer.from(asn1.toDer(certificate).getBytes(), "binary");
}

/** A random positive 128-bit serial number, in hex (RFC 5280: at most 20 octets, positive). */
export function randomSerialHex(): string {
  const bytes = randomBytes(16);
  // A leading zero bit keeps the DER INTEGER positive; a leading one bit avoids a shorter encoding.
  bytes[0] = ((bytes[0] ?? 0) & 0x7f) | 0x40;
  return bytes.toString("hex");
}

function issuerOf(certificate: X509Certificate): { name: forge.asn1.Asn1; keyId?: string } {
  const cached = issuerCache.get(certificate);
  if (cached) return cached;
  const parsed = asn1.fromDer(certificate.raw.toString("binary"));
  const tbs = (parsed.value as forge.asn1.Asn1[])[0];
  const subject = (tbs?.value as forge.asn1.Asn1[] | undefined)?.[5];
  if (!subject) throw new Error("the CA certificate has no subject");
  // The AKI must match the SKI the CA certificate declares (plugged-in ones may use another rule); none declared, none sent.
  const declared = new x509.X509Certificate(certificate.raw).getExtension(x509.SubjectKeyIdentifierExtension);
  const keyId = declared ? Buffer.from(declared.keyId, "hex").toString("binary") : undefined;
  const entry = { name: subject, ...(keyId ? { keyId } : {}) };
  issuerCache.set(certificate, entry);
  return entry;
}
