// The CA's CreateCertificate: the CSR a workload sends (PEM text in the
// request's csr field), parsed, its self-signature verified, its key checked;
// then the identity check (the CSR's URI SANs against the caller's SPIFFE ID).
// Refusals are CsrErrors. An input that is not PEM text is taken as DER and
// wrapped in a PEM block, so that mutations reach the ASN.1 parser.
import { CsrError, checkCsr } from "@sextant/ca/fuzzing";
import type { FuzzTarget } from "../target.js";

const CALLER = "spiffe://cluster.local/ns/default/sa/bookinfo-productpage";

export function csrText(input: Uint8Array): string {
  const text = Buffer.from(input).toString("latin1");
  if (text.includes("-----BEGIN")) return text;
  const body = Buffer.from(input).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`;
}

export const target: FuzzTarget = {
  tokens: [
    "-----BEGIN CERTIFICATE REQUEST-----\n",
    "-----END CERTIFICATE REQUEST-----\n",
    "-----BEGIN NEW CERTIFICATE REQUEST-----\n",
    "\x30\x82",
    "\x30\x80",
    "\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01",
    "\x06\x07\x2a\x86\x48\xce\x3d\x02\x01",
    "\x06\x08\x2a\x86\x48\xce\x3d\x03\x01\x07",
    "\x86\x2aspiffe://cluster.local/ns/a/sa/b",
  ],
  async run(input) {
    const csr = await checkCsr(csrText(input));
    csr.requestedUris.filter((uri) => uri !== CALLER);
  },
  refusal: (error) => error instanceof CsrError,
};
