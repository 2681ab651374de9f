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
//   (GRPC_ACCEPTED_VIOLATIONS of golden-inputs.ts) and skips the rules that
//   only hold for Envoy sidecars (Istio's listener-filter, reserved-port and
//   route configuration conventions).
// - The result is one line per violation, `<type> <resource name>: <field path>: <rule>`,
//   e.g. `listeners 0.0.0.0_9080: filter_chains[0].filters[0].name: min_len 1`;
//   empty when the snapshot passes.
//
// What is checked, per resource: the protoc-gen-validate rules of Envoy's
// protos (envoy-validate.ts), every safe_regex compiled by RE2, every
// Duration one Envoy can read, and the
// semantic rules of xds-semantic-checks.ts; across the snapshot: unique
// names per type (Envoy: "duplicate listener … found"), unique listener
// addresses, Istio's reserved proxy ports, and (sidecars) a listener that
// does not bind being reachable through one with use_original_dst.
import type { Any } from "@sextant/proto";
import { Cluster, ClusterLoadAssignment, Listener, RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import type { ProxyKind } from "../src/model/proxy.js";
import type { GeneratedResource } from "../src/model/types.js";
import { type Decoded, decodeAny, formatViolation, type Violation, validateAny } from "./envoy-validate.js";
import { type GoldenType, unacceptedGrpcViolations } from "./golden-inputs.js";
import {
  clusterViolations,
  durationViolations,
  listenerViolations,
  type RuleOptions,
  regexViolations,
  routeConfigurationViolations,
} from "./xds-semantic-checks.js";

/** One entry of a snapshot: a generated resource, a packed Any, or a decoded message of its key's type. */
export type SnapshotEntry = GeneratedResource | Any | object;

/** A proxy's resources by golden type. */
export type XdsSnapshot = Partial<Record<GoldenType, readonly SnapshotEntry[]>>;

/** Which client the snapshot is for. */
export interface SnapshotCheckOptions {
  readonly proxy?: ProxyKind;
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

/** The ports of Istio's own listeners: virtualOutbound, virtualInbound, and the bootstrap's status and Prometheus listeners. */
export const RESERVED_PORTS: ReadonlyMap<number, string | undefined> = new Map([
  [15001, "virtualOutbound"],
  [15006, "virtualInbound"],
  [15021, undefined],
  [15090, undefined],
]);

const TYPES = ["listeners", "routes", "clusters", "endpoints"] as const;

/** Everything a real Envoy (or, with `proxy: "grpc"`, gRPC) would reject in one proxy's snapshot. */
export function snapshotViolations(snapshot: XdsSnapshot, options: SnapshotCheckOptions = {}): string[] {
  // Istio's validate rules hold for every Envoy proxy, gateways (routers) too; gRPC has no listener filters.
  const rules: RuleOptions = { istioSidecar: options.proxy !== "grpc" };
  const out: string[] = [];
  const decoded: Record<GoldenType, Array<{ name: string; resource: Decoded }>> = {
    listeners: [],
    routes: [],
    clusters: [],
    endpoints: [],
  };
  for (const type of TYPES) {
    snapshot[type]?.forEach((entry, index) => {
      const any = entryAny(type, entry);
      const resource = decodeAny(any);
      const name = isGenerated(entry) ? entry.name : nameOf(type, resource) || `#${index}`;
      const report = (violations: readonly Violation[]) => {
        for (const v of violations) out.push(`${type} ${name}: ${formatViolation(v)}`);
      };
      let found = validateAny(any).map(formatViolation);
      if (options.proxy === "grpc")
        found = [...unacceptedGrpcViolations(found), ...grpcClientViolations(type, resource)];
      for (const v of found) out.push(`${type} ${name}: ${v}`);
      if (!resource) return;
      decoded[type].push({ name, resource });
      report(regexViolations(resource));
      report(durationViolations(resource));
      if (type === "listeners") report(listenerViolations(resource, rules));
      if (type === "routes") report(routeConfigurationViolations(resource, "", rules));
      if (type === "clusters") report(clusterViolations(resource));
    });
  }
  out.push(...snapshotWideViolations(decoded, rules, options.proxy ?? "sidecar"));
  return out;
}

/** The name a resource of a type has (a load assignment's is its cluster_name). */
function nameOf(type: GoldenType, resource: Decoded | undefined): string {
  const name = resource?.[type === "endpoints" ? "cluster_name" : "name"];
  return typeof name === "string" ? name : "";
}

/** The rules across one snapshot's resources. */
function snapshotWideViolations(
  decoded: Record<GoldenType, Array<{ name: string; resource: Decoded }>>,
  rules: RuleOptions,
  proxy: ProxyKind,
): string[] {
  const out: string[] = [];
  // Envoy rejects a response that holds one name twice ("duplicate listener/cluster … found"); Istio's tests too.
  for (const type of TYPES) {
    const seen = new Set<string>();
    for (const { resource } of decoded[type]) {
      const name = nameOf(type, resource);
      if (seen.has(name)) out.push(`${type} ${name}: duplicate ${type.replace(/s$/, "")} name ${name}`);
      seen.add(name);
    }
  }
  // Two listeners on one address:port (Envoy: "has duplicate address … as existing listener"; Istio's tests).
  const addresses = new Map<string, string>();
  let originalDst = false;
  const unbound: string[] = [];
  for (const { name, resource } of decoded.listeners) {
    const socket = (address: unknown) =>
      (address as { socket_address?: { address?: string; port_value?: number } } | undefined)?.socket_address;
    const all = [
      socket(resource.address),
      ...((resource.additional_addresses as Array<{ address?: unknown }> | undefined) ?? []).map((a) =>
        socket(a.address),
      ),
    ];
    for (const address of all) {
      if (!address) continue;
      const key = `${address.address ?? ""}:${address.port_value ?? 0}`;
      const other = addresses.get(key);
      if (other !== undefined)
        out.push(`listeners ${name}: address: duplicate address ${key} (also ${other})`);
      else addresses.set(key, name);
    }
    const primary = socket(resource.address);
    const port = primary?.port_value ?? 0;
    const wildcard = primary?.address === "0.0.0.0" || primary?.address === "::";
    // A router has no virtual listeners: only the bootstrap's own ports are taken.
    const reserved =
      RESERVED_PORTS.has(port) && (proxy !== "router" || RESERVED_PORTS.get(port) === undefined);
    if (rules.istioSidecar && wildcard && reserved && RESERVED_PORTS.get(port) !== name) {
      out.push(
        `listeners ${name}: address: ${primary?.address}:${port} is reserved for ${RESERVED_PORTS.get(port) ?? "a static listener of the bootstrap"} (Istio's conflictWithReservedListener)`,
      );
    }
    if ((resource.use_original_dst as { value?: boolean } | undefined)?.value === true) originalDst = true;
    const bind = resource.bind_to_port as { value?: boolean } | undefined;
    if (primary && bind && bind.value !== true) unbound.push(name);
  }
  // A listener that does not bind gets connections only handed over by one that uses the original destination.
  if (rules.istioSidecar && !originalDst) {
    for (const name of unbound)
      out.push(
        `listeners ${name}: bind_to_port: false, but no listener has use_original_dst to hand it connections`,
      );
  }
  return out;
}

const wrapped = (field: unknown): number | undefined => (field as { value?: number } | undefined)?.value;

/**
 * What the proxyless clients' own parsers reject in a Cluster or a
 * ClusterLoadAssignment that Envoy's rules allow (gRPC C-core 1.51
 * xds_cluster.cc and xds_endpoint.cc; grpc-js-xds 1.14 cluster-resource-type).
 * Their ring size limit, 8388608, is Envoy's too.
 */
function grpcClientViolations(type: GoldenType, resource: Decoded | undefined): string[] {
  if (!resource) return [];
  const out: string[] = [];
  if (type === "clusters") {
    const lbPolicy = String(resource.lb_policy ?? "ROUND_ROBIN");
    if (lbPolicy !== "ROUND_ROBIN" && lbPolicy !== "RING_HASH")
      out.push(`lb_policy: ${lbPolicy} (gRPC: "LB policy is not supported")`);
    if (resource.load_balancing_policy) out.push("load_balancing_policy: set (C-core 1.51 ignores it)");
  }
  if (type === "endpoints") {
    const seen = new Set<string>();
    let total = 0;
    for (const locality of (resource.endpoints ?? []) as Decoded[]) {
      total += wrapped(locality.load_balancing_weight) ?? 0;
      for (const lbEndpoint of (locality.lb_endpoints ?? []) as Decoded[]) {
        const socket = ((lbEndpoint.endpoint as Decoded | undefined)?.address as Decoded | undefined)
          ?.socket_address as Decoded | undefined;
        const address = `${String(socket?.address)}:${String(socket?.port_value ?? 0)}`;
        if (seen.has(address)) out.push(`endpoints: ${address} twice (gRPC: "duplicate endpoint address")`);
        seen.add(address);
        if (wrapped(lbEndpoint.load_balancing_weight) === 0)
          out.push(`endpoints: ${address} weight 0 (gRPC: "must be greater than 0")`);
      }
    }
    if (total > 0xffff_ffff)
      out.push(`endpoints: locality weights add up to ${total} (gRPC: "exceeds uint32 max")`);
  }
  return out;
}
