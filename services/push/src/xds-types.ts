import { TypeUrl } from "@sextant/proto/envoy";
import type { ProxyKind } from "../model/proxy.js";
import type { Generator, PushChange } from "./generator.js";
import { generateGrpcClusters } from "./grpc/clusters.js";
import { endpointsChanged, generateGrpcEndpoints } from "./grpc/endpoints.js";
import { generateGrpcListeners } from "./grpc/listeners.js";
import { generateGrpcRoutes } from "./grpc/routes.js";
import { generateSidecarClusters, sidecarClustersNeedPush } from "./sidecar/clusters.js";
import { generateSidecarEndpoints, sidecarEndpointsNeedPush } from "./sidecar/endpoints.js";
import { generateSidecarListeners } from "./sidecar/listeners.js";
import { generateSidecarRoutes } from "./sidecar/routes.js";

const onFullPush = (change: PushChange) => change.full;
// A sidecar's virtualInbound listener follows its own endpoints (its inbound ports).
const onFullOrEndpointPush = (change: PushChange) => change.full || change.endpointHosts.size > 0;

/**
 * Every generator, keyed by proxy kind and type URL (istiod's
 * InitGenerators). Adding a type is one generator and one line here.
 */
export const GENERATORS: Readonly<Record<ProxyKind, ReadonlyMap<string, Generator>>> = {
  grpc: new Map<string, Generator>([
    [TypeUrl.Listener, { typeUrl: TypeUrl.Listener, needsPush: onFullPush, generate: generateGrpcListeners }],
    [
      TypeUrl.RouteConfiguration,
      { typeUrl: TypeUrl.RouteConfiguration, needsPush: onFullPush, generate: generateGrpcRoutes },
    ],
    [
      TypeUrl.Cluster,
      // An ISTIO_MUTUAL cluster's SANs follow its endpoints' service accounts, so endpoint changes count.
      { typeUrl: TypeUrl.Cluster, needsPush: endpointsChanged, generate: generateGrpcClusters },
    ],
    [
      TypeUrl.ClusterLoadAssignment,
      {
        typeUrl: TypeUrl.ClusterLoadAssignment,
        needsPush: endpointsChanged,
        generate: generateGrpcEndpoints,
      },
    ],
  ]),
  sidecar: new Map<string, Generator>([
    [
      TypeUrl.Listener,
      { typeUrl: TypeUrl.Listener, needsPush: onFullOrEndpointPush, generate: generateSidecarListeners },
    ],
    [
      TypeUrl.RouteConfiguration,
      { typeUrl: TypeUrl.RouteConfiguration, needsPush: onFullPush, generate: generateSidecarRoutes },
    ],
    [
      TypeUrl.Cluster,
      { typeUrl: TypeUrl.Cluster, needsPush: sidecarClustersNeedPush, generate: generateSidecarClusters },
    ],
    [
      TypeUrl.ClusterLoadAssignment,
      {
        typeUrl: TypeUrl.ClusterLoadAssignment,
        needsPush: sidecarEndpointsNeedPush,
        generate: generateSidecarEndpoints,
      },
    ],
  ]),
};
