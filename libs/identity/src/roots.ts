import type { TrustBundle } from "@sextant/proto";

/** The PEM blocks of a certificate list, one certificate each, each ending in a newline. */
export function pemBlocks(pem: string): string[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (block) => `${block}\n`,
  );
}

/** The base64 body of a PEM block: two spellings of one certificate compare equal. */
const certificateBody = (pem: string) => pem.replace(/-----[^-]+-----|\s/g, "");

/** Every root of the lists, in order, each once (PEM line breaks do not make a difference). */
export function mergeRoots(...lists: readonly (readonly string[])[]): string[] {
  const seen = new Set<string>();
  const merged: string[] = [];
  for (const pem of lists.flat().flatMap(pemBlocks)) {
    const body = certificateBody(pem);
    if (seen.has(body)) continue;
    seen.add(body);
    merged.push(pem);
  }
  return merged;
}

/** Whether two root lists hold the same certificates in the same order. */
export function sameRoots(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((pem, i) => certificateBody(pem) === certificateBody(b[i] ?? ""));
}

/**
 * The roots of a trust bundle a workload must trust now: the active root
 * first (the CA already writes it first; sorting keeps that true for any
 * writer), then the others, without anchors past their not_after (the CA
 * drops those only at its next start).
 */
export function rootsOfBundle(bundle: TrustBundle, now = new Date()): string[] {
  const live = bundle.anchors.filter((anchor) => !anchor.notAfter || anchor.notAfter > now);
  const ordered = [...live.filter((a) => a.active), ...live.filter((a) => !a.active)];
  return mergeRoots(ordered.map((anchor) => anchor.certificatePem));
}
