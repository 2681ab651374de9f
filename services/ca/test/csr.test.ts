// checkCsr refuses every malformed CSR with a CsrError (the CA answers
// INVALID_ARGUMENT, reason malformed_csr), never with another exception
// (which the CA would answer with INTERNAL). Inputs found by fuzz/ (ca-csr).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { CsrError, checkCsr } from "../src/pki/csr.js";

const testdata = join(import.meta.dirname, "testdata");

function pemOf(der: Buffer): string {
  const body = der.toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`;
}

test("a CSR whose RSA public key does not parse is malformed_csr", async () => {
  // A well-formed CertificationRequestInfo whose SubjectPublicKeyInfo says RSA
  // but whose key bytes are not an RSAPublicKey: the parser only reads the
  // key when it is first asked for it.
  const pem = pemOf(readFileSync(join(testdata, "csr-unparsable-rsa-key.der")));
  await assert.rejects(
    checkCsr(pem),
    (error) =>
      error instanceof CsrError && error.reason === "malformed_csr" && /bad public key/.test(error.message),
  );
});
