// The consistency check of a proxy's resources, in the manner of
// go-control-plane's Snapshot.Consistent(): what one resource names by
// reference must exist, and nothing is sent that neither the proxy asked for
// nor another resource names.
import { ROUTE_SEMANTICS_ANNOTATION } from "@sextant/gateway-api";
import type { Any } from "@sextant/proto";
import type { PushContext } from "../src/model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../src/model/types.js";
import { parseOutboundClusterName } from "../src/translate/names.js";
import type { GoldenType } from "./golden-inputs.js";

/** A proxy's resources of each type, as one response of each would carry them. */
export type Snapshot = Record<GoldenType, readonly GeneratedResource[]>;

/** What a proxy subscribes to of each type (by name, or "*"); a type left out is not subscribed. */
export type Subscription = Partial<Record<GoldenType, WatchedNames>>;

/** Turns a resource into the JSON its golden file shows, nested Anys decoded. */
export type Decode = (any: Any) => unknown;

/** True for a name that may be missing although a resource names it, because the config asks for it. */
export type AcceptedMissing = (type: GoldenType, name: string) => boolean;

/**
 * Accepts the cluster of a subset that no DestinationRule of the snapshot
 * defines: a route to it is a mistake of the config (ingest reports it as
 * IST0101), and istiod, like push, sends the route as written, so the
 * proxy fails those requests rather than every request of the route config.
 */
export function undefinedSubsets(push: PushContext): AcceptedMissing {
  return (type, name) => {
    const cluster = type === "clusters" ? parseOutboundClusterName(name) : undefined;
    if (!cluster?.subset) return false;
    return !push.destinationRules.some(
      (rule) =>
        rule.hosts.includes(cluster.host) &&
        rule.spec.subsets.some((subset) => subset.name === cluster.subset),
    );
  };
}

/**
 * Accepts the cluster of a backend a Gateway API route names but the
 * registry lacks: istiod keeps such a backend in the route (reporting
 * BackendNotFound; an unresolvable one as an empty destination, cluster
 * `outbound|<port>||`) and the route's cluster_not_found_response_code
 * answers its share of requests with the 500 the Gateway API requires.
 */
export function missingGatewayApiBackends(push: PushContext): AcceptedMissing {
  return (type, name) => {
    if (type !== "clusters") return false;
    const cluster = /^outbound\|\d+\|\|$/.test(name) ? { host: "" } : parseOutboundClusterName(name);
    if (!cluster || push.servicesByHost.has(cluster.host)) return false;
    return push.virtualServices.some(
      (vs) =>
        vs.annotations?.[ROUTE_SEMANTICS_ANNOTATION] === "gateway" &&
        vs.spec.http.some((route) => route.route.some((d) => d.destination?.host === cluster.host)),
    );
  };
}

/** The types whose resources another type names, in the order a client follows the names. */
const ORDER: readonly GoldenType[] = ["listeners", "routes", "clusters", "endpoints"];

/**
 * The names a resource gives of other resources, by their type: route
 * configs an HCM loads over RDS, clusters a route, a mirror or a TCP proxy
 * sends to (weighted or not), and the load assignment of an EDS cluster.
 */
function referencesOf(type: GoldenType, json: unknown): Array<[GoldenType, string]> {
  const found: Array<[GoldenType, string]> = [];
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) for (const item of value) walk(item);
    else if (value && typeof value === "object") {
      for (const [key, inner] of Object.entries(value)) {
        if (key === "routeConfigName" && typeof inner === "string") found.push(["routes", inner]);
        else if (key === "cluster" && typeof inner === "string") found.push(["clusters", inner]);
        else if (key === "weightedClusters") {
          for (const { name } of (inner as { clusters?: Array<{ name: string }> }).clusters ?? [])
            found.push(["clusters", name]);
        } else walk(inner);
      }
    }
  };
  walk(json);
  if (type === "clusters") {
    const cluster = json as { name: string; type?: string; edsClusterConfig?: { serviceName?: string } };
    if (cluster.type === "EDS")
      found.push(["endpoints", cluster.edsClusterConfig?.serviceName || cluster.name]);
  }
  return found;
}

/** Every name the snapshot's resources give, by the type they name. */
function namedIn(snapshot: Snapshot, decode: Decode): Record<GoldenType, Map<string, string>> {
  const named = Object.fromEntries(ORDER.map((type) => [type, new Map<string, string>()])) as Record<
    GoldenType,
    Map<string, string>
  >;
  for (const type of ORDER) {
    for (const resource of snapshot[type]) {
      for (const [target, name] of referencesOf(type, decode(resource.resource))) {
        if (!named[target].has(name)) named[target].set(name, `${type} ${resource.name}`);
      }
    }
  }
  return named;
}

/**
 * What a client holds after following every name from its subscription, as
 * Envoy and gRPC do: the subscribed resources of each type, and those of the
 * next types that the ones before name.
 */
export function followReferences(
  subscription: Subscription,
  generate: (type: GoldenType, names: WatchedNames) => readonly GeneratedResource[],
  decode: Decode,
): Snapshot {
  const snapshot: Snapshot = { listeners: [], routes: [], clusters: [], endpoints: [] };
  for (const type of ORDER) {
    const subscribed = subscription[type];
    if (subscribed === "*") {
      snapshot[type] = generate(type, "*");
      continue;
    }
    const names = new Set([...(subscribed ?? []), ...namedIn(snapshot, decode)[type].keys()]);
    if (names.size > 0) snapshot[type] = generate(type, names);
  }
  return snapshot;
}

/**
 * Why a snapshot is inconsistent, if it is: a name a resource gives that the
 * snapshot does not hold (a listener's route config, a route's or a
 * listener's cluster, an EDS cluster's load assignment) and that
 * `acceptedMissing` does not excuse, or a resource no
 * other one names and the subscription did not ask for (an orphan).
 */
export function inconsistencies(
  snapshot: Snapshot,
  subscription: Subscription,
  decode: Decode,
  acceptedMissing: AcceptedMissing = () => false,
): string[] {
  const named = namedIn(snapshot, decode);
  const problems: string[] = [];
  for (const type of ORDER) {
    const held = new Set(snapshot[type].map((resource) => resource.name));
    for (const [name, by] of named[type]) {
      if (!held.has(name) && !acceptedMissing(type, name))
        problems.push(`${by} names ${type} ${name}, which does not exist`);
    }
    const subscribed = subscription[type];
    if (subscribed === "*") continue;
    for (const name of held) {
      if (!named[type].has(name) && !subscribed?.has(name))
        problems.push(`${type} ${name} is orphaned: nothing names it and it was not asked for`);
    }
  }
  return problems;
}
