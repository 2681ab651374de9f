import type { PeerCertificate } from "node:tls";
import type { SpiffeId } from "./types.js";

const SCHEME = "spiffe://";
/** SPIFFE trust domain names: lower-case letters, digits, dots, dashes and underscores. */
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
/** SPIFFE path segments: letters, digits, dots, dashes and underscores; never "." or "..". */
const PATH_SEGMENT = /^[A-Za-z0-9._-]+$/;

const isTrustDomain = (value: string) => TRUST_DOMAIN.test(value);
const isPathSegment = (value: string) => PATH_SEGMENT.test(value) && value !== "." && value !== "..";

/**
 * The URI of a SPIFFE identity: spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>.
 * Throws, naming the part, when one is not a valid SPIFFE name: a URI that
 * parseSpiffeId would refuse is never produced.
 */
export function formatSpiffeId(id: SpiffeId): string {
  if (!isTrustDomain(id.trustDomain))
    throw new Error(
      `invalid SPIFFE trust domain ${JSON.stringify(id.trustDomain)}: lower-case letters, digits, ".", "-" and "_" only`,
    );
  for (const [part, value] of [
    ["namespace", id.namespace],
    ["service account", id.serviceAccount],
  ] as const)
    if (!isPathSegment(value))
      throw new Error(
        `invalid SPIFFE ${part} ${JSON.stringify(value)}: letters, digits, ".", "-" and "_" only, not "." or ".."`,
      );
  return `${SCHEME}${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;
}

/**
 * The identity in a SPIFFE URI of Istio's form, spiffe://<td>/ns/<ns>/sa/<sa>,
 * and nothing else: undefined for any other path, empty or invalid segments,
 * a query, a fragment, percent-encoding or an upper-case scheme.
 */
export function parseSpiffeId(uri: string): SpiffeId | undefined {
  if (!uri.startsWith(SCHEME)) return undefined;
  const parts = uri.slice(SCHEME.length).split("/");
  if (parts.length !== 5) return undefined;
  const [trustDomain, ns, namespace, sa, serviceAccount] = parts as [string, string, string, string, string];
  if (ns !== "ns" || sa !== "sa") return undefined;
  if (!isTrustDomain(trustDomain) || !isPathSegment(namespace) || !isPathSegment(serviceAccount))
    return undefined;
  return { trustDomain, namespace, serviceAccount };
}

/**
 * The URI SANs in node's `subjectaltname` text ("DNS:a, URI:spiffe://..., ...").
 * Node quotes a value as a JSON string when it holds a comma, a quote or
 * another character that would make the list ambiguous, so a value is either
 * a JSON string or runs to the next ", ".
 */
export function uriSans(subjectAltName: string | undefined): string[] {
  const uris: string[] = [];
  const entry = /(?:^|, )([A-Za-z ]+):("(?:[^"\\]|\\.)*"|[^,]*)/g;
  for (const match of (subjectAltName ?? "").matchAll(entry)) {
    const [, kind, raw = ""] = match;
    if (kind !== "URI") continue;
    try {
      uris.push(raw.startsWith('"') ? (JSON.parse(raw) as string) : raw);
    } catch {
      // A malformed quoted value names no identity.
    }
  }
  return uris;
}

/**
 * The single SPIFFE URI SAN of a peer certificate as node's tls gives it
 * (`subjectaltname` "URI:spiffe://..."), or undefined: no certificate, no
 * SPIFFE URI, more than one (ambiguous, as the SPIFFE X.509-SVID spec
 * forbids), or one not of Istio's form.
 */
export function spiffeIdOfPeer(cert: PeerCertificate | undefined): SpiffeId | undefined {
  const spiffeUris = uriSans(cert?.subjectaltname).filter((uri) => uri.toLowerCase().startsWith(SCHEME));
  if (spiffeUris.length !== 1) return undefined;
  return parseSpiffeId(spiffeUris[0]!);
}
