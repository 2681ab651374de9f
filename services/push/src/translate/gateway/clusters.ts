import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";
import {
  generateSidecarClusters,
  INBOUND_PASSTHROUGH_CLUSTER,
  PASSTHROUGH_CLUSTER,
} from "../sidecar/clusters.js";

/**
 * CDS for routers (istiod's BuildClusters for a gateway): the outbound
 * clusters of every service the router's namespace sees, with their
 * DestinationRules, as a sidecar's, and BlackHoleCluster. A gateway has no
 * original-destination listener and no inbound side, so neither
 * PassthroughCluster nor any inbound cluster.
 */
export function generateGatewayClusters(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  return generateSidecarClusters(context, watched).filter(
    (resource) =>
      resource.name !== PASSTHROUGH_CLUSTER &&
      resource.name !== INBOUND_PASSTHROUGH_CLUSTER &&
      !resource.name.startsWith("inbound|"),
  );
}
