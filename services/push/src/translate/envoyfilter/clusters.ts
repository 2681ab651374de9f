// CLUSTER patches, as Istio's envoyfilter/cluster_patch.go applies them:
// REMOVE and MERGE on each generated cluster, ADD as new clusters.
import {
  ApplyTo,
  type ConfigPatch,
  type JsonObject,
  type PatchContext,
  type ProxyPatches,
} from "../../model/envoy-filter.js";
import { type Applied, objects, patchElement, patchesIn } from "./common.js";
import { copy, isObject, mergeMessage, mergeSocket } from "./merge.js";

const CLUSTER = "envoy.config.cluster.v3.Cluster";

/** Istio's ParseSubsetKey: `direction|port|subset|host`. */
function clusterKey(name: string): { direction: string; port: number; subset: string; host: string } {
  const [direction = "", port = "", subset = "", host = ""] = name.split("|");
  return { direction, port: Number(port) || 0, subset, host };
}

/**
 * Istio's clusterMatch. An inbound cluster names no host; it matches the
 * services the proxy's workload belongs to (`inboundHosts`).
 */
function clusterMatches(name: string, patch: ConfigPatch, inboundHosts: readonly string[]): boolean {
  const match = patch.match.cluster;
  if (!match) return true;
  if (match.name) return match.name === name;
  const key = clusterKey(name);
  const hosts = key.direction === "inbound" && inboundHosts.length > 0 ? inboundHosts : [key.host];
  if (match.subset && match.subset !== key.subset) return false;
  if (match.service && !hosts.includes(match.service)) return false;
  return !match.portNumber || match.portNumber === key.port;
}

/** Patches a cluster for `context`; undefined when a patch removes it. */
export function patchCluster(
  cluster: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  inboundHosts: readonly string[],
  applied: Applied,
): JsonObject | undefined {
  // Istio matches every patch against the name the cluster was generated with.
  const name = String(cluster.name ?? "");
  return patchElement(
    cluster,
    patchesIn(patches, ApplyTo.CLUSTER, context),
    (_current, patch) => clusterMatches(name, patch, inboundHosts),
    mergeCluster,
    applied,
  );
}

/**
 * Istio's cluster MERGE. A patch with a transport socket changes only the
 * socket: with transport socket matches, the match's socket of the same name
 * takes its typed config (none of that name: nothing changes); else the
 * cluster's socket of the same name does, and a socket of another name or
 * none is replaced by the patch's. Without one, the plain merge.
 */
function mergeCluster(cluster: JsonObject, patch: JsonObject): JsonObject {
  const socket = patch.transportSocket;
  if (!isObject(socket)) return mergeMessage(CLUSTER, cluster, patch);
  const merged = copy(cluster);
  const matches = objects(merged.transportSocketMatches);
  if (matches.length > 0) {
    const entry = matches.find((m) => isObject(m.transportSocket) && m.transportSocket.name === socket.name);
    if (entry) mergeSocket(entry.transportSocket as JsonObject, socket);
    return merged;
  }
  const current = merged.transportSocket;
  if (isObject(current) && current.name === socket.name) mergeSocket(current, socket);
  else merged.transportSocket = copy(socket);
  return merged;
}
