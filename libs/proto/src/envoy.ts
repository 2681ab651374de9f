/**
 * The Envoy xDS v3 types Sextant builds and serves, with their type URLs.
 * Deeper types are reachable as "@sextant/proto/gen/<path>".
 */
import { typeUrlOf } from "./any.js";

export { Bootstrap } from "./gen/envoy/config/bootstrap/v3/bootstrap.js";
export { Cluster } from "./gen/envoy/config/cluster/v3/cluster.js";
export { TypedExtensionConfig } from "./gen/envoy/config/core/v3/extension.js";
export { ClusterLoadAssignment } from "./gen/envoy/config/endpoint/v3/endpoint.js";
export { Listener } from "./gen/envoy/config/listener/v3/listener.js";
export { RouteConfiguration } from "./gen/envoy/config/route/v3/route.js";
export { Cors, CorsPolicy } from "./gen/envoy/extensions/filters/http/cors/v3/cors.js";
export { ExtAuthz as HttpExtAuthz } from "./gen/envoy/extensions/filters/http/ext_authz/v3/ext_authz.js";
export { HTTPFault } from "./gen/envoy/extensions/filters/http/fault/v3/fault.js";
export { GrpcWeb } from "./gen/envoy/extensions/filters/http/grpc_web/v3/grpc_web.js";
export { RBAC as HttpRBAC } from "./gen/envoy/extensions/filters/http/rbac/v3/rbac.js";
export { Router } from "./gen/envoy/extensions/filters/http/router/v3/router.js";
export { Wasm } from "./gen/envoy/extensions/filters/http/wasm/v3/wasm.js";
export { HttpInspector } from "./gen/envoy/extensions/filters/listener/http_inspector/v3/http_inspector.js";
export { OriginalDst } from "./gen/envoy/extensions/filters/listener/original_dst/v3/original_dst.js";
export { TlsInspector } from "./gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector.js";
export { ExtAuthz as NetworkExtAuthz } from "./gen/envoy/extensions/filters/network/ext_authz/v3/ext_authz.js";
export { HttpConnectionManager } from "./gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager.js";
export { RBAC as NetworkRBAC } from "./gen/envoy/extensions/filters/network/rbac/v3/rbac.js";
export { TcpProxy } from "./gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy.js";
export { Wasm as NetworkWasm } from "./gen/envoy/extensions/filters/network/wasm/v3/wasm.js";
export { PreviousHostsPredicate } from "./gen/envoy/extensions/retry/host/previous_hosts/v3/previous_hosts.js";
export { RawBuffer } from "./gen/envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer.js";
export { Secret } from "./gen/envoy/extensions/transport_sockets/tls/v3/secret.js";
export {
  DownstreamTlsContext,
  UpstreamTlsContext,
} from "./gen/envoy/extensions/transport_sockets/tls/v3/tls.js";
export { HttpProtocolOptions } from "./gen/envoy/extensions/upstreams/http/v3/http_protocol_options.js";
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
  GrpcWeb: typeUrlOf("envoy.extensions.filters.http.grpc_web.v3.GrpcWeb"),
  RBAC: typeUrlOf("envoy.extensions.filters.http.rbac.v3.RBAC"),
  NetworkRBAC: typeUrlOf("envoy.extensions.filters.network.rbac.v3.RBAC"),
  ExtAuthz: typeUrlOf("envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"),
  NetworkExtAuthz: typeUrlOf("envoy.extensions.filters.network.ext_authz.v3.ExtAuthz"),
  TcpProxy: typeUrlOf("envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"),
  UpstreamTlsContext: typeUrlOf("envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"),
  DownstreamTlsContext: typeUrlOf("envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext"),
  HttpProtocolOptions: typeUrlOf("envoy.extensions.upstreams.http.v3.HttpProtocolOptions"),
  RawBuffer: typeUrlOf("envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"),
  Cors: typeUrlOf("envoy.extensions.filters.http.cors.v3.Cors"),
  CorsPolicy: typeUrlOf("envoy.extensions.filters.http.cors.v3.CorsPolicy"),
  OriginalDst: typeUrlOf("envoy.extensions.filters.listener.original_dst.v3.OriginalDst"),
  TlsInspector: typeUrlOf("envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"),
  HttpInspector: typeUrlOf("envoy.extensions.filters.listener.http_inspector.v3.HttpInspector"),
  PreviousHostsPredicate: typeUrlOf("envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"),
  TypedExtensionConfig: typeUrlOf("envoy.config.core.v3.TypedExtensionConfig"),
  Wasm: typeUrlOf("envoy.extensions.filters.http.wasm.v3.Wasm"),
  NetworkWasm: typeUrlOf("envoy.extensions.filters.network.wasm.v3.Wasm"),
  FileAccessLog: typeUrlOf("envoy.extensions.access_loggers.file.v3.FileAccessLog"),
  CelExpressionFilter: typeUrlOf("envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter"),
  ZipkinConfig: typeUrlOf("envoy.config.trace.v3.ZipkinConfig"),
  OpenTelemetryConfig: typeUrlOf("envoy.config.trace.v3.OpenTelemetryConfig"),
  UuidRequestIdConfig: typeUrlOf("envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig"),
} as const;
