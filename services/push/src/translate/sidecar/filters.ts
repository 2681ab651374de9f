import { packAny } from "@sextant/proto";
import {
  Cors,
  GrpcWeb,
  HTTPFault,
  HttpInspector,
  Router,
  TcpProxy,
  TlsInspector,
  TypeUrl,
} from "@sextant/proto/envoy";
import type { Filter, ListenerFilter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import type { HttpFilter } from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import { FAULT_FILTER_NAME } from "../common/routes.js";

/** The gRPC-Web filter, in the HCMs of grpc-web ports. */
export const GRPC_WEB_FILTER_NAME = "envoy.filters.http.grpc_web";
/** The listener filters that read the first bytes of a connection: SNI and ALPN of TLS, and plaintext HTTP. */
export const TLS_INSPECTOR_NAME = "envoy.filters.listener.tls_inspector";
export const HTTP_INSPECTOR_NAME = "envoy.filters.listener.http_inspector";
/** The CORS filter's name; routes carry their CorsPolicy under this key (Istio 1.18+). */
export const CORS_FILTER_NAME = "envoy.filters.http.cors";
/** The router filter, last in every HCM. */
export const ROUTER_FILTER_NAME = "envoy.filters.http.router";
/** The HTTP connection manager network filter. */
export const HCM_FILTER_NAME = "envoy.filters.network.http_connection_manager";
/** The TCP proxy network filter. */
export const TCP_PROXY_FILTER_NAME = "envoy.filters.network.tcp_proxy";
/** The network RBAC filter (AuthorizationPolicy on TCP chains). */
export const NETWORK_RBAC_FILTER_NAME = "envoy.filters.network.rbac";

/** Istio's catch-all clusters (CDS builds them; these are only their names). */
export const PASSTHROUGH_CLUSTER = "PassthroughCluster";
export const BLACKHOLE_CLUSTER = "BlackHoleCluster";
export const INBOUND_PASSTHROUGH_CLUSTER = "InboundPassthroughCluster";

/**
 * The HTTP filters after authorization, in Istio's order: gRPC-Web (for an
 * HCM of a grpc-web port only), fault, CORS, router. Fault and CORS are
 * empty here; routes configure them per route (typed_per_filter_config), so
 * a route without fault or CORS gets neither.
 */
export function trailingHttpFilters(options: { grpcWeb?: boolean } = {}): HttpFilter[] {
  return [
    ...(options.grpcWeb
      ? [
          {
            name: GRPC_WEB_FILTER_NAME,
            typedConfig: packAny(TypeUrl.GrpcWeb, GrpcWeb, GrpcWeb.fromPartial({})),
          },
        ]
      : []),
    {
      name: FAULT_FILTER_NAME,
      typedConfig: packAny(TypeUrl.HTTPFault, HTTPFault, HTTPFault.fromPartial({})),
    },
    { name: CORS_FILTER_NAME, typedConfig: packAny(TypeUrl.Cors, Cors, Cors.fromPartial({})) },
    { name: ROUTER_FILTER_NAME, typedConfig: packAny(TypeUrl.Router, Router, Router.fromPartial({})) },
  ] as HttpFilter[];
}

/** A tcp_proxy filter to cluster, with the cluster as its stat prefix, as Istio names it. */
export function tcpProxyFilter(cluster: string): Filter {
  return {
    name: TCP_PROXY_FILTER_NAME,
    typedConfig: packAny(TypeUrl.TcpProxy, TcpProxy, TcpProxy.fromPartial({ statPrefix: cluster, cluster })),
  } as Filter;
}

/** A tcp_proxy filter over weighted clusters (a TCP/TLS route with several destinations). */
export function weightedTcpProxyFilter(
  statPrefix: string,
  clusters: Array<{ name: string; weight: number }>,
): Filter {
  return {
    name: TCP_PROXY_FILTER_NAME,
    typedConfig: packAny(
      TypeUrl.TcpProxy,
      TcpProxy,
      TcpProxy.fromPartial({ statPrefix, weightedClusters: { clusters } }),
    ),
  } as Filter;
}

/**
 * Istio's TLS inspector: it reads the ClientHello (SNI, ALPN) for filter
 * chain matching, with a 512-byte first read instead of Envoy's 64 KiB.
 */
export function tlsInspectorFilter(): ListenerFilter {
  return {
    name: TLS_INSPECTOR_NAME,
    typedConfig: packAny(
      TypeUrl.TlsInspector,
      TlsInspector,
      TlsInspector.fromPartial({ initialReadBufferSize: 512 }),
    ),
  } as ListenerFilter;
}

/** The HTTP inspector: it sets the application protocol (http/1.0, http/1.1, h2c) of plaintext HTTP. */
export function httpInspectorFilter(): ListenerFilter {
  return {
    name: HTTP_INSPECTOR_NAME,
    typedConfig: packAny(TypeUrl.HttpInspector, HttpInspector, HttpInspector.fromPartial({})),
  } as ListenerFilter;
}
