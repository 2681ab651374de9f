import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";
import {
  generateSidecarClusters,
  INBOUND_PASSTHROUGH_CLUSTER,
  PASSTHROUGH_CLUSTER,
} from "../sidecar/clusters.js";
import { hasAutoPassthrough, parseSniDnatName, sniDnatClusters } from "./sni-dnat.js";

/**
 * CDS for routers (istiod's BuildClusters for a gateway): the outbound
 * clusters of every service the router's namespace sees, with their
 * DestinationRules, as a sidecar's, and BlackHoleCluster. A gateway has no
 * original-destination listener and no inbound side, so neither
 * PassthroughCluster nor any inbound cluster. With an AUTO_PASSTHROUGH
 * server, the SNI-DNAT clusters too (see sni-dnat.ts).
 */
export function generateGatewayClusters(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const wanted = watched === "*" || watched.has("*") ? undefined : watched;
  const clusters = generateSidecarClusters(context, "*").filter(
    (resource) =>
      resource.name !== PASSTHROUGH_CLUSTER &&
      resource.name !== INBOUND_PASSTHROUGH_CLUSTER &&
      !resource.name.startsWith("inbound|"),
  );
  const wantsSni = wanted === undefined || [...wanted].some((name) => parseSniDnatName(name) !== undefined);
  if (wantsSni && hasAutoPassthrough(context.push, context.proxy))
    clusters.push(...sniDnatClusters(context.push, clusters));
  return clusters
    .filter((resource) => wanted === undefined || wanted.has(resource.name))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
