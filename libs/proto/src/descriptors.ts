import { readFileSync } from "node:fs";

/**
 * The FileDescriptorSet of every generated proto (Sextant's, Istio's and the
 * Envoy closure, with their imports), written by scripts/generate.mjs. It is
 * read from the package root so that the same path works from src/ and dist/.
 */
export function readDescriptorSet(): Uint8Array {
  return readFileSync(new URL("../descriptors/sextant.binpb", import.meta.url));
}
