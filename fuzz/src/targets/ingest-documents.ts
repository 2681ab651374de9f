// ingest's apply path (POST /v1/apply, `sextantctl apply`): YAML or JSON
// bytes of any number of documents, parsed, validated and turned into the
// envelopes ingest stores. Every problem must come back as a DocumentError;
// nothing may throw.
import { ingestSettings, prepareDocuments } from "@sextant/ingest/fuzzing";
import { parseSettings } from "@sextant/runtime";
import type { FuzzTarget } from "../target.js";

// API_AUTH has no default: the API must be opened on purpose; it does not bear on parsing.
const settings = parseSettings(ingestSettings, { API_AUTH: "none" });
const limits = { maxDocuments: settings.MAX_DOCUMENTS, maxBytes: settings.MAX_BODY_BYTES };

export const target: FuzzTarget = {
  tokens: [
    "---\n",
    "apiVersion: networking.istio.io/v1\n",
    "kind: VirtualService\n",
    "kind: DestinationRule\n",
    "kind: Gateway\n",
    "kind: AuthorizationPolicy\n",
    "kind: EnvoyFilter\n",
    "metadata:\n  name: a\n",
    "spec:\n",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!binary ",
    "!!str ",
    "? ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "\\u0000",
    "\\ud800",
    "null",
    "~",
    "1e999",
    "-0",
    "0x7fffffffffffffff",
    "18446744073709551616",
    ".inf",
    "1.5s",
    "9999999999999999999h",
    "*.",
    "regex: ",
    "(?i)",
    "\t",
    "\r\n",
    "\ufeff",
  ],
  run(input) {
    prepareDocuments(input, limits);
  },
  refusal: () => false,
};
