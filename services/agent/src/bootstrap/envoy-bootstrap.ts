import { localAddresses, type ProxyNode } from "../node/proxy-node.js";
import { AGENT_PORTS } from "../settings.js";
import { statsConfig } from "./stats-config.js";

/** What an Envoy bootstrap is built from. */
export interface EnvoyBootstrapOptions {
  node: ProxyNode;
  /** The workload's IP: picks IPv4 or IPv6 loopback and wildcard addresses. */
  instanceIp: string;
  /** The agent's SDS socket (the `sds-grpc` cluster). */
  sdsSocketPath: string;
  /** The agent's xDS proxy socket (the `xds-grpc` cluster, over which ADS flows). */
  xdsSocketPath: string;
  /** The agent's HTTP port, where Envoy's 15021 listener sends `/healthz/ready`. */
  agentHttpPort: number;
  /** Envoy's admin port on the loopback address (ProxyConfig.proxyAdminPort); 15000 by default. */
  adminPort?: number;
}

/** A JSON object, as the generators build them. */
export type JsonObject = { [key: string]: unknown };

const TYPE = "type.googleapis.com/";

/** A metadata map of strings (ANNOTATIONS), or an empty one. */
const stringRecord = (value: unknown): Record<string, string> =>
  value && typeof value === "object" ? (value as Record<string, string>) : {};
const HTTP_PROTOCOL_OPTIONS = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/**
 * HTTP/2 to an upstream (gRPC needs it), the non-deprecated way: the cluster's
 * typed_extension_protocol_options, keyed by the extension's name.
 */
function http2Options(extra: JsonObject = {}): JsonObject {
  return {
    [HTTP_PROTOCOL_OPTIONS]: {
      "@type": TYPE + HTTP_PROTOCOL_OPTIONS,
      ...extra,
      explicit_http_config: { http2_protocol_options: {} },
    },
  };
}

/** A cluster's load_assignment with one endpoint at address. */
function oneEndpoint(clusterName: string, address: JsonObject): JsonObject {
  return { cluster_name: clusterName, endpoints: [{ lb_endpoints: [{ endpoint: { address } }] }] };
}

const socketAddress = (address: string, port: number): JsonObject => ({
  socket_address: { address, port_value: port },
});

/** A listener that routes one path prefix to one cluster: Istio's 15090 and 15021 listeners. */
function routeListener(
  address: string,
  port: number,
  statPrefix: string,
  prefix: string,
  cluster: string,
): JsonObject {
  return {
    address: socketAddress(address, port),
    filter_chains: [
      {
        filters: [
          {
            name: "envoy.filters.network.http_connection_manager",
            typed_config: {
              "@type": `${TYPE}envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`,
              stat_prefix: statPrefix,
              route_config: {
                virtual_hosts: [
                  { name: "backend", domains: ["*"], routes: [{ match: { prefix }, route: { cluster } }] },
                ],
              },
              http_filters: [
                {
                  name: "envoy.filters.http.router",
                  typed_config: { "@type": `${TYPE}envoy.extensions.filters.http.router.v3.Router` },
                },
              ],
            },
          },
        ],
      },
    ],
  };
}

/**
 * The Envoy bootstrap for a sidecar beside this agent, as Istio's
 * envoy_bootstrap.json builds it, in canonical proto3 JSON of
 * envoy.config.bootstrap.v3.Bootstrap (proto field names, Any as `@type`).
 *
 * Fields whose value is the proto3 default are left out (a STATIC cluster
 * type, ROUND_ROBIN, TCP, codec AUTO, the DEFAULT priority): Envoy reads
 * them the same, and the output is then exactly what the proto's own JSON
 * encoder writes, which the tests check by a round trip. Left out from
 * Istio's template: the admin access log to /dev/null (no log is the same),
 * tracing and metrics sinks (not configured in Sextant), and the internal
 * listener and metadata-discovery bootstrap extensions (ambient mode).
 */
export function envoyBootstrap(options: EnvoyBootstrapOptions): JsonObject {
  const { node } = options;
  const adminPort = options.adminPort ?? AGENT_PORTS.envoyAdmin;
  const { localhost, wildcard } = localAddresses(options.instanceIp);
  const adsConfigSource = { ads: {}, initial_fetch_timeout: "0s", resource_api_version: "V3" };
  return {
    node: { id: node.id, cluster: node.cluster, locality: node.locality, metadata: node.metadata },
    layered_runtime: {
      layers: [
        {
          name: "global config",
          // Istio's defaults: no global connection cap (the overload manager
          // decides), and regexes as large as Istio's generated routes need.
          static_layer: {
            "overload.global_downstream_max_connections": "2147483647",
            "re2.max_program_size.error_level": "32768",
            "envoy.reloadable_features.http_reject_path_with_fragment": false,
          },
        },
        { name: "admin", admin_layer: {} },
      ],
    },
    stats_config: statsConfig({
      annotations: stringRecord(node.metadata.ANNOTATIONS),
      proxyConfig: (node.metadata.PROXY_CONFIG ?? {}) as Record<string, unknown>,
      instanceIps: String(node.metadata.INSTANCE_IPS ?? options.instanceIp).split(","),
    }),
    admin: { address: socketAddress(localhost, adminPort) },
    dynamic_resources: {
      lds_config: adsConfigSource,
      cds_config: adsConfigSource,
      ads_config: {
        api_type: "GRPC",
        set_node_on_first_message_only: true,
        transport_api_version: "V3",
        grpc_services: [{ envoy_grpc: { cluster_name: "xds-grpc" } }],
      },
    },
    static_resources: {
      clusters: [
        {
          name: "prometheus_stats",
          connect_timeout: "0.250s",
          load_assignment: oneEndpoint("prometheus_stats", socketAddress(localhost, adminPort)),
        },
        {
          name: "agent",
          connect_timeout: "0.250s",
          load_assignment: oneEndpoint("agent", socketAddress(localhost, options.agentHttpPort)),
        },
        {
          name: "sds-grpc",
          connect_timeout: "1s",
          typed_extension_protocol_options: http2Options(),
          load_assignment: oneEndpoint("sds-grpc", { pipe: { path: options.sdsSocketPath } }),
        },
        {
          name: "xds-grpc",
          connect_timeout: "1s",
          load_assignment: oneEndpoint("xds-grpc", { pipe: { path: options.xdsSocketPath } }),
          // The agent is the only upstream; Envoy must never queue xDS behind a limit.
          circuit_breakers: {
            thresholds: [
              { max_connections: 100000, max_pending_requests: 100000, max_requests: 100000 },
              {
                priority: "HIGH",
                max_connections: 100000,
                max_pending_requests: 100000,
                max_requests: 100000,
              },
            ],
          },
          // One stream per connection, as Istio sets it (there on the
          // deprecated cluster field): each ADS stream gets its own
          // connection to the agent, and so its own upstream stream.
          typed_extension_protocol_options: http2Options({
            common_http_protocol_options: { max_requests_per_connection: 1 },
          }),
        },
      ],
      listeners: [
        routeListener(
          wildcard,
          AGENT_PORTS.envoyPrometheus,
          "stats",
          "/stats/prometheus",
          "prometheus_stats",
        ),
        routeListener(wildcard, AGENT_PORTS.envoyStatus, "agent", "/healthz/ready", "agent"),
      ],
    },
  };
}
