import {
  Cluster,
  ClusterLoadAssignment,
  Listener,
  RouteConfiguration,
  TypedExtensionConfig,
  TypeUrl,
} from "@sextant/proto/envoy";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import type { PushChange } from "./model/types.js";
import { XdsTypeTable } from "./server/xds-type-table.js";
import { generateExtensionConfigs } from "./translate/extension/ecds.js";
import { generateGatewayClusters } from "./translate/gateway/clusters.js";
import { generateGatewayListeners } from "./translate/gateway/listeners.js";
import { generateGatewayRoutes } from "./translate/gateway/routes.js";
import { gatewayEndpointsNeedPush, generateGatewayEndpoints } from "./translate/gateway/sni-dnat.js";
import { generateGrpcClusters } from "./translate/grpc/clusters.js";
import { endpointsChanged, generateGrpcEndpoints } from "./translate/grpc/endpoints.js";
import { generateGrpcListeners } from "./translate/grpc/listeners.js";
import { generateGrpcRoutes } from "./translate/grpc/routes.js";
import { generateSecrets, REDACTED_SECRET_CODEC, secretsNeedPush } from "./translate/sds/secrets.js";
import { generateSidecarClusters, sidecarClustersNeedPush } from "./translate/sidecar/clusters.js";
import { generateSidecarEndpoints, sidecarEndpointsNeedPush } from "./translate/sidecar/endpoints.js";
import { generateSidecarListeners } from "./translate/sidecar/listeners.js";
import { generateSidecarNameTable, NAME_TABLE_TYPE_URL } from "./translate/sidecar/name-table.js";
import { generateSidecarRoutes } from "./translate/sidecar/routes.js";

const onFullPush = (change: PushChange) => change.full;
// A sidecar's virtualInbound listener follows its own endpoints (its inbound ports).
const onFullOrEndpointPush = (change: PushChange) => change.full || change.endpointHosts.size > 0;

/**
 * The xDS types push serves (istiod's InitGenerators and push order in one
 * table), in istiod's order: clusters and endpoints before the listeners and
 * routes that use them, then the secrets they name, then ECDS and the name table (istiod's PushOrder lists
 * neither, so they go after the ordered types). Adding a type is its generators
 * and one entry here.
 */
export const XDS_TYPES = new XdsTypeTable([
  {
    typeUrl: TypeUrl.Cluster,
    label: "cds",
    codec: Cluster,
    wildcardWhenEmpty: true,
    changedOnlyInSotw: false,
    generators: {
      // An ISTIO_MUTUAL cluster's SANs follow its endpoints' service accounts, so endpoint changes count.
      grpc: { needsPush: endpointsChanged, generate: generateGrpcClusters },
      sidecar: { needsPush: sidecarClustersNeedPush, generate: generateSidecarClusters },
      router: { needsPush: sidecarClustersNeedPush, generate: generateGatewayClusters },
    },
  },
  {
    typeUrl: TypeUrl.ClusterLoadAssignment,
    label: "eds",
    codec: ClusterLoadAssignment,
    wildcardWhenEmpty: false,
    // Istio sends an endpoint push only the changed ClusterLoadAssignments, in SotW
    // too: Envoy's and gRPC's EDS keep a subscribed resource a response leaves out.
    changedOnlyInSotw: true,
    generators: {
      grpc: { needsPush: endpointsChanged, generate: generateGrpcEndpoints },
      sidecar: { needsPush: sidecarEndpointsNeedPush, generate: generateSidecarEndpoints },
      // A router's EDS clusters are a sidecar's outbound ones (and their SNI-DNAT copies): the same load assignments.
      router: { needsPush: gatewayEndpointsNeedPush, generate: generateGatewayEndpoints },
    },
  },
  {
    typeUrl: TypeUrl.Listener,
    label: "lds",
    codec: Listener,
    wildcardWhenEmpty: true,
    changedOnlyInSotw: false,
    generators: {
      grpc: { needsPush: onFullPush, generate: generateGrpcListeners },
      sidecar: { needsPush: onFullOrEndpointPush, generate: generateSidecarListeners },
      // A router's listeners follow the Gateways and VirtualServices only (its ports come from config and services).
      router: { needsPush: onFullPush, generate: generateGatewayListeners },
    },
  },
  {
    typeUrl: TypeUrl.RouteConfiguration,
    label: "rds",
    codec: RouteConfiguration,
    wildcardWhenEmpty: false,
    changedOnlyInSotw: false,
    generators: {
      grpc: { needsPush: onFullPush, generate: generateGrpcRoutes },
      sidecar: { needsPush: onFullPush, generate: generateSidecarRoutes },
      router: { needsPush: onFullPush, generate: generateGatewayRoutes },
    },
  },
  {
    typeUrl: TypeUrl.Secret,
    label: "sds",
    // config_dump shows no private key.
    codec: REDACTED_SECRET_CODEC,
    // Secrets are asked for by name (kubernetes://<name>), never all at once.
    wildcardWhenEmpty: false,
    changedOnlyInSotw: false,
    generators: {
      router: { needsPush: secretsNeedPush, generate: generateSecrets },
      sidecar: { needsPush: secretsNeedPush, generate: generateSecrets },
    },
  },
  {
    // ECDS: the Wasm plugins the listeners' filters refer to. Not in istiod's PushOrder: after the ordered types.
    typeUrl: TypeUrl.TypedExtensionConfig,
    label: "ecds",
    codec: TypedExtensionConfig,
    // Envoy subscribes by name, one name per filter that refers to a plugin.
    wildcardWhenEmpty: false,
    changedOnlyInSotw: false,
    generators: {
      sidecar: { needsPush: onFullPush, generate: generateExtensionConfigs },
      router: { needsPush: onFullPush, generate: generateExtensionConfigs },
    },
  },
  {
    typeUrl: NAME_TABLE_TYPE_URL,
    label: "nds",
    codec: NameTable,
    // Istio's internal types are all wildcards: the agent asks with no names.
    wildcardWhenEmpty: true,
    changedOnlyInSotw: false,
    generators: {
      // Proxyless gRPC resolves names itself: it is answered, with no table.
      grpc: { needsPush: () => false, generate: () => [] },
      // Headless services' names follow their endpoints; the generator's cache key holds only theirs.
      sidecar: { needsPush: onFullOrEndpointPush, generate: generateSidecarNameTable },
    },
  },
]);
