/**
 * The Envoy xDS v3 types Sextant builds and serves, with their type URLs.
 * Deeper types are reachable as "@sextant/proto/gen/<path>".
 */
import { typeUrlOf } from "./any.js";

export { Bootstrap } from "./gen/envoy/config/bootstrap/v3/bootstrap.js";
export { Cluster } from "./gen/envoy/config/cluster/v3/cluster.js";
export { ClusterLoadAssignment } from "./gen/envoy/config/endpoint/v3/endpoint.js";
export { Listener } from "./gen/envoy/config/listener/v3/listener.js";
export { RouteConfiguration } from "./gen/envoy/config/route/v3/route.js";
export { HTTPFault } from "./gen/envoy/extensions/filters/http/fault/v3/fault.js";
export { RBAC as HttpRBAC } from "./gen/envoy/extensions/filters/http/rbac/v3/rbac.js";
export { Router } from "./gen/envoy/extensions/filters/http/router/v3/router.js";
export { HttpConnectionManager } from "./gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.js";
export { RBAC as NetworkRBAC } from "./gen/envoy/extensions/filters/network/rbac/v3/rbac.js";
export { TcpProxy } from "./gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.js";
export { Secret } from "./gen/envoy/extensions/transport_sockets/tls/v3/secret.js";
export {
  DownstreamTlsContext,
  UpstreamTlsContext,
} from "./gen/envoy/extensions/transport_sockets/tls/v3/tls.js";
export {
  AggregatedDiscoveryServiceClient,
  type AggregatedDiscoveryServiceServer,
  AggregatedDiscoveryServiceService,
} from "./gen/envoy/service/discovery/v3/ads.js";
export {
  DeltaDiscoveryRequest,
  DeltaDiscoveryResponse,
  DiscoveryRequest,
  DiscoveryResponse,
} from "./gen/envoy/service/discovery/v3/discovery.js";
export {
  SecretDiscoveryServiceClient,
  type SecretDiscoveryServiceServer,
  SecretDiscoveryServiceService,
} from "./gen/envoy/service/secret/v3/sds.js";

/** Type URLs of the xDS resources, exactly as proxies send them. */
export const TypeUrl = {
  Listener: typeUrlOf("envoy.config.listener.v3.Listener"),
  RouteConfiguration: typeUrlOf("envoy.config.route.v3.RouteConfiguration"),
  Cluster: typeUrlOf("envoy.config.cluster.v3.Cluster"),
  ClusterLoadAssignment: typeUrlOf("envoy.config.endpoint.v3.ClusterLoadAssignment"),
  Secret: typeUrlOf("envoy.extensions.transport_sockets.tls.v3.Secret"),
  HttpConnectionManager: typeUrlOf(
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
  ),
  Router: typeUrlOf("envoy.extensions.filters.http.router.v3.Router"),
  HTTPFault: typeUrlOf("envoy.extensions.filters.http.fault.v3.HTTPFault"),
  RBAC: typeUrlOf("envoy.extensions.filters.http.rbac.v3.RBAC"),
  NetworkRBAC: typeUrlOf("envoy.extensions.filters.network.rbac.v3.RBAC"),
  TcpProxy: typeUrlOf("envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"),
  UpstreamTlsContext: typeUrlOf("envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"),
  DownstreamTlsContext: typeUrlOf("envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"),
} as const;
