// The test suite's xDS checker: what a real Envoy (or gRPC) would reject in
// one proxy's snapshot. Envoy cannot run here, so the golden tests and the
// property tests hand every generated snapshot to `snapshotViolations`.
//
// API (kept stable for the golden and property tests):
//
//   snapshotViolations(snapshot, { proxy: "sidecar" | "grpc" }) → string[]
//
// - `snapshot` holds a proxy's resources by golden type: `listeners`,
//   `routes` (RouteConfigurations), `clusters`, `endpoints`
//   (ClusterLoadAssignments). Each entry may be a `GeneratedResource` (what
//   the generators return), a packed `Any`, or a decoded ts-proto message of
//   that key's type. A type left out is not checked. `Snapshot` of
//   snapshot-consistency.ts fits as it is.
// - `proxy` (default "sidecar"): "grpc" accepts what proxyless gRPC is allowed
//   (GRPC_ACCEPTED_VIOLATIONS of golden-inputs.ts).
// - The result is one line per violation, `<type> <resource name>: <field path>: <rule>`,
//   e.g. `listeners 0.0.0.0_9080: filter_chains[0].filters[0].name: min_len 1`;
//   empty when the snapshot passes.
import type { Any } from "@sextant/proto";
import { Cluster, ClusterLoadAssignment, Listener, RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import type { GeneratedResource } from "../src/model/types.js";
import { formatViolation, validateAny } from "./envoy-validate.js";
import { type GoldenType, unacceptedGrpcViolations } from "./golden-inputs.js";

/** One entry of a snapshot: a generated resource, a packed Any, or a decoded message of its key's type. */
export type SnapshotEntry = GeneratedResource | Any | object;

/** A proxy's resources by golden type. */
export type XdsSnapshot = Partial<Record<GoldenType, readonly SnapshotEntry[]>>;

/** Which client the snapshot is for. */
export interface SnapshotCheckOptions {
  readonly proxy?: "sidecar" | "grpc";
}

interface MessageCodec {
  encode(message: never): { finish(): Uint8Array };
}

const CODECS: Record<GoldenType, { typeUrl: string; codec: MessageCodec }> = {
  listeners: { typeUrl: TypeUrl.Listener, codec: Listener },
  routes: { typeUrl: TypeUrl.RouteConfiguration, codec: RouteConfiguration },
  clusters: { typeUrl: TypeUrl.Cluster, codec: Cluster },
  endpoints: { typeUrl: TypeUrl.ClusterLoadAssignment, codec: ClusterLoadAssignment },
};

const isAny = (entry: object): entry is Any =>
  typeof (entry as Any).typeUrl === "string" && (entry as Any).value instanceof Uint8Array;
const isGenerated = (entry: object): entry is GeneratedResource =>
  typeof (entry as GeneratedResource).name === "string" &&
  typeof (entry as GeneratedResource).resource === "object";

/** An entry as a packed Any of its key's type. */
export function entryAny(type: GoldenType, entry: SnapshotEntry): Any {
  if (isGenerated(entry)) return entry.resource;
  if (isAny(entry)) return entry;
  const { typeUrl, codec } = CODECS[type];
  return { typeUrl, value: Buffer.from(codec.encode(entry as never).finish()) };
}

/** Everything a real Envoy (or, with `proxy: "grpc"`, gRPC) would reject in one proxy's snapshot. */
export function snapshotViolations(snapshot: XdsSnapshot, options: SnapshotCheckOptions = {}): string[] {
  const out: string[] = [];
  for (const type of ["listeners", "routes", "clusters", "endpoints"] as const) {
    snapshot[type]?.forEach((entry, index) => {
      const any = entryAny(type, entry);
      const decoded = entry as { name?: unknown; clusterName?: unknown };
      const name = isGenerated(entry)
        ? entry.name
        : typeof decoded.name === "string"
          ? decoded.name
          : typeof decoded.clusterName === "string"
            ? decoded.clusterName
            : `#${index}`;
      let found = validateAny(any).map(formatViolation);
      if (options.proxy === "grpc") found = unacceptedGrpcViolations(found);
      for (const v of found) out.push(`${type} ${name}: ${v}`);
    });
  }
  return out;
}
