import { execFileSync } from "node:child_process";
import { webcrypto } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { x509 } from "@sextant/identity";
import { IstioCertificateServiceClient } from "@sextant/proto";
import { toPem } from "../src/pki/certificate.js";

/** A workload key pair with a CSR over it. */
export interface WorkloadKey {
  keyPem: string;
  csrPem: string;
}

const RSA = (bits: number) => ({
  name: "RSASSA-PKCS1-v1_5",
  hash: "SHA-256",
  publicExponent: new Uint8Array([1, 0, 1]),
  modulusLength: bits,
});
const EC = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };

/** Makes a key and a CSR, as istio-agent would: RSA of the given size, or EC P-256. */
export async function workloadKey(kind: number | "ec", uris: string[] = []): Promise<WorkloadKey> {
  const algorithm = kind === "ec" ? EC : RSA(kind);
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    "sign",
    "verify",
  ])) as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    keys: keys as never,
    signingAlgorithm: algorithm,
    extensions: uris.length
      ? [new x509.SubjectAlternativeNameExtension(uris.map((value) => ({ type: "url" as const, value })))]
      : [],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey("pkcs8", keys.privateKey));
  return { keyPem: toPem(pkcs8, "PRIVATE KEY"), csrPem: csr.toString("pem") };
}

/** The CSR with one byte of its signature changed. */
export function tamperedCsr(pem: string): string {
  const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ""), "base64");
  der[der.length - 5] = (der[der.length - 5] ?? 0) ^ 0xff;
  return toPem(der, "CERTIFICATE REQUEST");
}

/** A CreateCertificate client over TLS, trusting rootPem, optionally presenting a client certificate. */
export function caClient(address: string, rootPem: string, client?: { keyPem: string; chainPem: string }) {
  const creds = client
    ? credentials.createSsl(Buffer.from(rootPem), Buffer.from(client.keyPem), Buffer.from(client.chainPem))
    : credentials.createSsl(Buffer.from(rootPem));
  return new IstioCertificateServiceClient(address, creds);
}

/** Calls CreateCertificate; resolves with the chain or the gRPC error. */
export function createCertificate(
  client: IstioCertificateServiceClient,
  csr: string,
  options: { token?: string; validity?: number } = {},
): Promise<{ chain: string[] } | { error: ServiceError }> {
  const metadata = new Metadata();
  if (options.token) metadata.set("authorization", `Bearer ${options.token}`);
  return new Promise((resolve) =>
    client.createCertificate(
      { csr, validityDuration: options.validity ?? 0, metadata: undefined },
      metadata,
      { deadline: Date.now() + 15_000 },
      (error, response) => resolve(error ? { error } : { chain: response?.certChain ?? [] }),
    ),
  );
}

/** Runs `openssl verify` on a chain (leaf first) against roots; returns its output, throws on failure. */
export function opensslVerify(chain: string[], rootsPem: string): string {
  const dir = mkdtempSync(join(tmpdir(), "sextant-ca-verify-"));
  writeFileSync(join(dir, "roots.pem"), rootsPem);
  writeFileSync(join(dir, "leaf.pem"), chain[0] ?? "");
  writeFileSync(join(dir, "untrusted.pem"), chain.slice(1).join("") || rootsPem);
  return execFileSync(
    "openssl",
    [
      "verify",
      "-CAfile",
      join(dir, "roots.pem"),
      "-untrusted",
      join(dir, "untrusted.pem"),
      join(dir, "leaf.pem"),
    ],
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
}
