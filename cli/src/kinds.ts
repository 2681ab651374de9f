// The kinds sextantctl reads and writes, named every way kubectl accepts for
// Istio's CRDs: VirtualService, virtualservice, virtualservices, vs, and each
// with its group (virtualservices.networking.istio.io).
import { apiKindOf, findKind, KINDS, type KindInfo } from "@sextant/validation";
import { CommandError, ExitCode } from "./ingest-client.js";

/** Istio's CRD short names (its CRDs' spec.names.shortNames). */
const SHORT_NAMES: Readonly<Record<string, string>> = {
  VirtualService: "vs",
  DestinationRule: "dr",
  Gateway: "gw",
  ServiceEntry: "se",
  WorkloadEntry: "we",
  WorkloadGroup: "wg",
  PeerAuthentication: "pa",
  AuthorizationPolicy: "ap",
  RequestAuthentication: "ra",
  // The Gateway API CRDs' short names.
  GatewayClass: "gc",
  KubernetesGateway: "gtw",
  ReferenceGrant: "refgrant",
  BackendTLSPolicy: "btlspolicy",
};

// A bare name two kinds share (gateway, gateways) stays the first's, Istio's
// Gateway, as kubectl resolves it in Istio's favour when both are installed;
// the Gateway API's is gateways.gateway.networking.k8s.io, gtw or kubernetesgateway.
const byName = new Map<string, KindInfo>();
for (const info of KINDS.values()) {
  const names = [
    info.kind.toLowerCase(),
    apiKindOf(info).toLowerCase(),
    info.plural,
    SHORT_NAMES[info.kind],
  ].filter(Boolean) as string[];
  for (const name of names) {
    if (!byName.has(name)) byName.set(name, info);
    byName.set(`${name}.${info.group}`, info);
  }
}

/** Every name a kind argument may take, for completion: the plural and short names. */
export function kindNames(): string[] {
  // Istio's Gateway and the Gateway API's share the plural "gateways": offered once.
  const names = [...KINDS.values()].flatMap((info) => [
    info.plural,
    ...(SHORT_NAMES[info.kind] ? [SHORT_NAMES[info.kind]!] : []),
  ]);
  return [...new Set(names)];
}

/** The kind a command-line argument names; a usage error listing the kinds when it names none. */
export function resolveKind(name: string): KindInfo {
  const info = byName.get(name.toLowerCase());
  if (info) return info;
  throw new CommandError(
    `the server doesn't have a resource type "${name}": use one of ${[...new Set([...KINDS.values()].map((k) => k.plural))].join(", ")}`,
    ExitCode.usage,
  );
}

/** kubectl's name of a resource: virtualservice.networking.istio.io/reviews. */
export function qualifiedName(kind: string, name: string): string {
  const info = findKind(kind);
  return `${(info ? apiKindOf(info) : kind).toLowerCase()}${info ? `.${info.group}` : ""}/${name}`;
}
