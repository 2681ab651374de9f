// The kinds sextantctl reads and writes, named every way kubectl accepts for
// Istio's CRDs: VirtualService, virtualservice, virtualservices, vs, and each
// with its group (virtualservices.networking.istio.io).
import { KINDS, type KindInfo } from "@sextant/validation";
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
};

const byName = new Map<string, KindInfo>();
for (const info of KINDS.values()) {
  const names = [info.kind.toLowerCase(), info.plural, SHORT_NAMES[info.kind]].filter(Boolean) as string[];
  for (const name of names) {
    byName.set(name, info);
    byName.set(`${name}.${info.group}`, info);
  }
}

/** Every name a kind argument may take, for completion: the plural and short names. */
export function kindNames(): string[] {
  return [...KINDS.values()].flatMap((info) => [
    info.plural,
    ...(SHORT_NAMES[info.kind] ? [SHORT_NAMES[info.kind]!] : []),
  ]);
}

/** The kind a command-line argument names; a usage error listing the kinds when it names none. */
export function resolveKind(name: string): KindInfo {
  const info = byName.get(name.toLowerCase());
  if (info) return info;
  throw new CommandError(
    `the server doesn't have a resource type "${name}": use one of ${[...KINDS.values()].map((k) => k.plural).join(", ")}`,
    ExitCode.usage,
  );
}

/** kubectl's name of a resource: virtualservice.networking.istio.io/reviews. */
export function qualifiedName(kind: string, name: string): string {
  const group = KINDS.get(kind)?.group;
  return `${kind.toLowerCase()}${group ? `.${group}` : ""}/${name}`;
}
