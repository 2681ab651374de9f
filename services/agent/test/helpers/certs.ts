import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A certificate and its key, as PEM. */
export interface KeyPair {
  certPem: string;
  keyPem: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
}

/** A self-signed root (EC P-256), made with openssl. */
export function makeRoot(name: string): KeyPair {
  const dir = mkdtempSync(join(tmpdir(), "sextant-agent-root-"));
  openssl(
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      "key.pem",
      "-out",
      "cert.pem",
      "-days",
      "2",
      "-subj",
      `/O=${name}`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign,cRLSign",
    ],
    dir,
  );
  return {
    certPem: readFileSync(join(dir, "cert.pem"), "utf8"),
    keyPem: readFileSync(join(dir, "key.pem"), "utf8"),
  };
}

/** A workload certificate for a SPIFFE id (one URI SAN, empty subject as Istio's), signed by root. */
export function makeLeaf(root: KeyPair, spiffeId: string): KeyPair {
  const dir = mkdtempSync(join(tmpdir(), "sextant-agent-leaf-"));
  writeFileSync(join(dir, "ca.pem"), root.certPem);
  writeFileSync(join(dir, "ca-key.pem"), root.keyPem);
  writeFileSync(
    join(dir, "ext.cnf"),
    [
      `subjectAltName=critical,URI:${spiffeId}`,
      "keyUsage=critical,digitalSignature,keyEncipherment",
      "extendedKeyUsage=serverAuth,clientAuth",
      "basicConstraints=critical,CA:FALSE",
    ].join("\n"),
  );
  openssl(
    [
      "req",
      "-new",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      "key.pem",
      "-out",
      "csr.pem",
      "-subj",
      "/",
    ],
    dir,
  );
  openssl(
    [
      "x509",
      "-req",
      "-in",
      "csr.pem",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca-key.pem",
      "-CAcreateserial",
      "-days",
      "1",
      "-out",
      "cert.pem",
      "-extfile",
      "ext.cnf",
    ],
    dir,
  );
  // PKCS#8, as WorkloadCertificate.privateKeyPem is.
  openssl(["pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-out", "key8.pem"], dir);
  return {
    certPem: readFileSync(join(dir, "cert.pem"), "utf8"),
    keyPem: readFileSync(join(dir, "key8.pem"), "utf8"),
  };
}

/** The public key of a certificate and of a private key, to check that they belong together. */
export function publicKeys(certPem: string, keyPem: string): { ofCert: string; ofKey: string } {
  const dir = mkdtempSync(join(tmpdir(), "sextant-agent-match-"));
  writeFileSync(join(dir, "cert.pem"), certPem);
  writeFileSync(join(dir, "key.pem"), keyPem);
  const run = (args: string[]) => execFileSync("openssl", args, { cwd: dir, encoding: "utf8" });
  return {
    ofCert: run(["x509", "-in", "cert.pem", "-noout", "-pubkey"]),
    ofKey: run(["pkey", "-in", "key.pem", "-pubout"]),
  };
}
