// The xDS checker (xds-checks.ts, xds-semantic-checks.ts): a small correct
// sidecar snapshot passes, and each rule finds one broken resource, naming
// the resource and the field.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { packAny } from "@sextant/proto";
import {
  Cluster,
  ClusterLoadAssignment,
  HttpConnectionManager,
  Listener,
  NetworkRBAC,
  RouteConfiguration,
  TcpProxy,
  TypeUrl,
} from "@sextant/proto/envoy";
import type { ProxyKind } from "../src/model/proxy.js";
import { snapshotViolations, type XdsSnapshot } from "./xds-checks.js";
import { re2Error } from "./xds-semantic-checks.js";

type ListenerInit = Parameters<typeof Listener.fromPartial>[0];
type RouteInit = Parameters<typeof RouteConfiguration.fromPartial>[0];
type ClusterInit = Parameters<typeof Cluster.fromPartial>[0];
type HcmInit = Parameters<typeof HttpConnectionManager.fromPartial>[0];

const HOST = "reviews.default.svc.cluster.local";
const CLUSTER = `outbound|9080||${HOST}`;
const ads = { ads: {}, resourceApiVersion: 2 };
const router = {
  name: "envoy.filters.http.router",
  typedConfig: { typeUrl: TypeUrl.Router, value: Buffer.alloc(0) },
};

const hcm = (fields: HcmInit = {}) =>
  packAny(
    TypeUrl.HttpConnectionManager,
    HttpConnectionManager,
    HttpConnectionManager.fromPartial({
      statPrefix: "outbound_0.0.0.0_9080",
      rds: { routeConfigName: "9080", configSource: ads },
      httpFilters: [router],
      ...fields,
    }),
  );
const hcmFilter = (fields: HcmInit = {}) => ({
  name: "envoy.filters.network.http_connection_manager",
  typedConfig: hcm(fields),
});
const tcpProxyFilter = {
  name: "envoy.filters.network.tcp_proxy",
  typedConfig: packAny(
    TypeUrl.TcpProxy,
    TcpProxy,
    TcpProxy.fromPartial({ statPrefix: "PassthroughCluster", cluster: "PassthroughCluster" }),
  ),
};
const tlsInspector = {
  name: "envoy.filters.listener.tls_inspector",
  typedConfig: { typeUrl: TypeUrl.TlsInspector, value: Buffer.alloc(0) },
};
const rbacFilter = {
  name: "envoy.filters.network.rbac",
  typedConfig: packAny(TypeUrl.NetworkRBAC, NetworkRBAC, NetworkRBAC.fromPartial({ statPrefix: "tcp." })),
};

const virtualOutbound = (fields: ListenerInit = {}) =>
  Listener.fromPartial({
    name: "virtualOutbound",
    address: { socketAddress: { address: "0.0.0.0", portValue: 15001 } },
    useOriginalDst: true,
    filterChains: [{ name: "PassthroughFilterChain", filters: [tcpProxyFilter] }],
    ...fields,
  });
const outbound = (fields: ListenerInit = {}) =>
  Listener.fromPartial({
    name: "0.0.0.0_9080",
    address: { socketAddress: { address: "0.0.0.0", portValue: 9080 } },
    bindToPort: false,
    trafficDirection: 2, // OUTBOUND
    filterChains: [{ filters: [hcmFilter()] }],
    ...fields,
  });
const routes = (fields: RouteInit = {}) =>
  RouteConfiguration.fromPartial({
    name: "9080",
    maxDirectResponseBodySizeBytes: 1024 * 1024,
    virtualHosts: [
      {
        name: `${HOST}:9080`,
        domains: [HOST, "reviews"],
        routes: [{ match: { prefix: "/" }, route: { cluster: CLUSTER } }],
      },
    ],
    ...fields,
  });
/** A route configuration of one virtual host holding one route. */
const oneRoute = (route: NonNullable<NonNullable<RouteInit["virtualHosts"]>[number]["routes"]>[number]) =>
  routes({ virtualHosts: [{ name: "vh", domains: ["vh"], routes: [route] }] });
const cluster = (fields: ClusterInit = {}) =>
  Cluster.fromPartial({
    name: CLUSTER,
    type: 3, // EDS
    edsClusterConfig: { edsConfig: ads },
    connectTimeout: { seconds: 10, nanos: 0 },
    ...fields,
  });
const endpoints = () =>
  ClusterLoadAssignment.fromPartial({
    clusterName: CLUSTER,
    endpoints: [
      {
        lbEndpoints: [{ endpoint: { address: { socketAddress: { address: "10.1.0.1", portValue: 9080 } } } }],
      },
    ],
  });

const snapshot = (replace: XdsSnapshot = {}): XdsSnapshot => ({
  listeners: [virtualOutbound(), outbound()],
  routes: [routes()],
  clusters: [cluster()],
  endpoints: [endpoints()],
  ...replace,
});
const check = (replace: XdsSnapshot = {}, proxy: ProxyKind = "sidecar") =>
  snapshotViolations(snapshot(replace), { proxy });
const listenerWith = (fields: ListenerInit) => check({ listeners: [virtualOutbound(), outbound(fields)] });
const routesWith = (config: ReturnType<typeof routes>) => check({ routes: [config] });

describe("the xDS checker (snapshotViolations)", () => {
  it("passes a correct sidecar snapshot, given as decoded messages, Anys or generated resources", () => {
    assert.deepEqual(check(), []);
    const all = snapshot();
    const codecs = {
      listeners: Listener,
      routes: RouteConfiguration,
      clusters: Cluster,
      endpoints: ClusterLoadAssignment,
    };
    const typeUrls = {
      listeners: TypeUrl.Listener,
      routes: TypeUrl.RouteConfiguration,
      clusters: TypeUrl.Cluster,
      endpoints: TypeUrl.ClusterLoadAssignment,
    };
    const asAnys = Object.fromEntries(
      Object.entries(all).map(([type, entries]) => [
        type,
        entries.map((m) =>
          packAny(
            typeUrls[type as keyof typeof typeUrls],
            codecs[type as keyof typeof codecs] as never,
            m as never,
          ),
        ),
      ]),
    ) as XdsSnapshot;
    assert.deepEqual(snapshotViolations(asAnys), []);
    const generated = {
      ...asAnys,
      clusters: (asAnys.clusters ?? []).map((resource) => ({ name: CLUSTER, resource, sources: [] })),
    } as XdsSnapshot;
    assert.deepEqual(snapshotViolations(generated), []);
  });

  it("still reports the validate rules of Envoy's protos, under the resource's name", () => {
    assert.deepEqual(check({ clusters: [cluster({ connectTimeout: { seconds: 0, nanos: 0 } })] }), [
      `clusters ${CLUSTER}: connect_timeout: gt 0s`,
    ]);
  });

  it("rejects a negative or out-of-range Duration anywhere (Envoy's DurationUtil)", () => {
    const found = check({
      clusters: [cluster({ commonHttpProtocolOptions: { idleTimeout: { seconds: -1, nanos: 0 } } })],
      routes: [
        oneRoute({
          match: { prefix: "/" },
          route: { cluster: CLUSTER, timeout: { seconds: 400_000_000_000, nanos: 0 } },
        }),
      ],
    }).filter((v) => !v.includes("max_direct_response"));
    assert.deepEqual(found, [
      "routes 9080: virtual_hosts[0].routes[0].route.timeout: Duration out-of-range (got 400000000000s 0ns)",
      `clusters ${CLUSTER}: common_http_protocol_options.idle_timeout: Expected positive duration (got -1s 0ns)`,
    ]);
  });

  describe("across the snapshot", () => {
    it("rejects two resources of one type with one name (Envoy: duplicate listener/cluster found)", () => {
      assert.deepEqual(check({ clusters: [cluster(), cluster()] }), [
        `clusters ${CLUSTER}: duplicate cluster name ${CLUSTER}`,
      ]);
      assert.deepEqual(check({ routes: [routes(), routes()] }), ["routes 9080: duplicate route name 9080"]);
      assert.deepEqual(
        check({
          listeners: [
            virtualOutbound(),
            outbound(),
            outbound({ address: { socketAddress: { address: "10.0.0.1", portValue: 9080 } } }),
          ],
        }),
        ["listeners 0.0.0.0_9080: duplicate listener name 0.0.0.0_9080"],
      );
    });

    it("rejects two listeners on one address and port, additional addresses included", () => {
      assert.deepEqual(check({ listeners: [virtualOutbound(), outbound(), outbound({ name: "other" })] }), [
        "listeners other: address: duplicate address 0.0.0.0:9080 (also 0.0.0.0_9080)",
      ]);
      assert.deepEqual(
        check({
          listeners: [
            virtualOutbound(),
            outbound(),
            outbound({
              name: "other",
              address: { socketAddress: { address: "10.0.0.1", portValue: 9080 } },
              additionalAddresses: [{ address: { socketAddress: { address: "0.0.0.0", portValue: 9080 } } }],
            }),
          ],
        }),
        ["listeners other: address: duplicate address 0.0.0.0:9080 (also 0.0.0.0_9080)"],
      );
    });

    it("rejects a wildcard listener on a port Istio reserves for its own listeners (conflictWithReservedListener)", () => {
      const on = (port: number, name = `0.0.0.0_${port}`) =>
        outbound({ name, address: { socketAddress: { address: "0.0.0.0", portValue: port } } });
      assert.deepEqual(check({ listeners: [virtualOutbound(), on(15021)] }), [
        "listeners 0.0.0.0_15021: address: 0.0.0.0:15021 is reserved for a static listener of the bootstrap (Istio's conflictWithReservedListener)",
      ]);
      assert.deepEqual(check({ listeners: [virtualOutbound({ name: "other" }), on(15090)] }), [
        "listeners other: address: 0.0.0.0:15001 is reserved for virtualOutbound (Istio's conflictWithReservedListener)",
        "listeners 0.0.0.0_15090: address: 0.0.0.0:15090 is reserved for a static listener of the bootstrap (Istio's conflictWithReservedListener)",
      ]);
      // A specific address does not conflict; proxyless gRPC has no reserved listeners.
      assert.deepEqual(
        check({
          listeners: [
            virtualOutbound(),
            outbound({ address: { socketAddress: { address: "10.0.0.1", portValue: 15021 } } }),
          ],
        }),
        [],
      );
      assert.deepEqual(check({ listeners: [virtualOutbound(), on(15021)], routes: [] }, "grpc"), []);
      // A router has no virtual listeners: 15001 and 15006 are its to bind, the bootstrap's ports are not.
      const bound = (port: number) => Listener.fromPartial({ ...on(port), bindToPort: true });
      assert.deepEqual(check({ listeners: [bound(15001), bound(15006)] }, "router"), []);
      assert.deepEqual(check({ listeners: [bound(15021)] }, "router"), [
        "listeners 0.0.0.0_15021: address: 0.0.0.0:15021 is reserved for a static listener of the bootstrap (Istio's conflictWithReservedListener)",
      ]);
    });

    it("holds routers to Istio's rules for Envoy proxies: the TLS inspector for server names", () => {
      const listener = outbound({
        bindToPort: true,
        filterChains: [{ filterChainMatch: { serverNames: ["a.example.com"] }, filters: [tcpProxyFilter] }],
      });
      assert.deepEqual(check({ listeners: [listener] }, "router"), [
        "listeners 0.0.0.0_9080: filter_chains[0].filter_chain_match.server_names: server names set, but missing tls inspector",
      ]);
    });

    it("rejects a listener that does not bind when no listener uses the original destination", () => {
      assert.deepEqual(check({ listeners: [outbound()] }), [
        "listeners 0.0.0.0_9080: bind_to_port: false, but no listener has use_original_dst to hand it connections",
      ]);
    });
  });

  describe("listeners", () => {
    it("rejects two filter chains with the same match (Envoy: multiple filter chains with the same matching rules)", () => {
      const chain = {
        filterChainMatch: { destinationPort: 9080, transportProtocol: "raw_buffer" },
        filters: [hcmFilter()],
      };
      assert.deepEqual(listenerWith({ filterChains: [chain, { ...chain }] }), [
        "listeners 0.0.0.0_9080: filter_chains[1].filter_chain_match: multiple filter chains with the same matching rules are defined (filter_chains[0])",
      ]);
      // Two chains without a match are the same match too.
      assert.deepEqual(
        listenerWith({ filterChains: [{ filters: [hcmFilter()] }, { filters: [hcmFilter()] }] }),
        [
          "listeners 0.0.0.0_9080: filter_chains[1].filter_chain_match: multiple filter chains with the same matching rules are defined (filter_chains[0])",
        ],
      );
    });

    it("rejects filter chains whose matches overlap in a repeated field or a CIDR range", () => {
      assert.deepEqual(
        listenerWith({
          listenerFilters: [tlsInspector],
          filterChains: [
            {
              filterChainMatch: { serverNames: ["a.example.com", "B.example.com"] },
              filters: [tcpProxyFilter],
            },
            { filterChainMatch: { serverNames: ["b.example.com"] }, filters: [tcpProxyFilter] },
          ],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[1].filter_chain_match: multiple filter chains with overlapping matching rules are defined (filter_chains[0])",
        ],
      );
      assert.deepEqual(
        listenerWith({
          filterChains: [
            {
              filterChainMatch: { prefixRanges: [{ addressPrefix: "10.1.2.3", prefixLen: 8 }] },
              filters: [tcpProxyFilter],
            },
            {
              filterChainMatch: { prefixRanges: [{ addressPrefix: "10.0.0.0", prefixLen: 8 }] },
              filters: [tcpProxyFilter],
            },
          ],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[1].filter_chain_match: multiple filter chains with overlapping matching rules are defined (filter_chains[0])",
        ],
      );
      // Distinct ports, ranges or protocols do not overlap.
      assert.deepEqual(
        listenerWith({
          filterChains: [
            {
              filterChainMatch: { prefixRanges: [{ addressPrefix: "10.0.0.0", prefixLen: 16 }] },
              filters: [tcpProxyFilter],
            },
            {
              filterChainMatch: { prefixRanges: [{ addressPrefix: "10.0.0.0", prefixLen: 8 }] },
              filters: [tcpProxyFilter],
            },
            { filterChainMatch: { destinationPort: 80 }, filters: [tcpProxyFilter] },
          ],
        }),
        [],
      );
    });

    it("rejects partial wildcard server names and the unimplemented address_suffix", () => {
      assert.deepEqual(
        listenerWith({
          listenerFilters: [tlsInspector],
          filterChains: [
            { filterChainMatch: { serverNames: ["foo*.example.com"] }, filters: [tcpProxyFilter] },
          ],
        }),
        [
          'listeners 0.0.0.0_9080: filter_chains[0].filter_chain_match.server_names[0]: partial wildcards are not supported in "server_names" (got "foo*.example.com")',
        ],
      );
      assert.deepEqual(
        listenerWith({
          filterChains: [{ filterChainMatch: { addressSuffix: "0.0.0.1" }, filters: [tcpProxyFilter] }],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].filter_chain_match: contains unimplemented fields (address_suffix, suffix_len)",
        ],
      );
    });

    it("rejects a listener with neither filter chains nor a default filter chain", () => {
      assert.deepEqual(listenerWith({ filterChains: [] }), [
        "listeners 0.0.0.0_9080: filter_chains: no filter chains specified",
      ]);
      assert.deepEqual(
        listenerWith({ filterChains: [], defaultFilterChain: { filters: [tcpProxyFilter] } }),
        [],
      );
    });

    it("requires unique non-empty filter chain names under a filter_chain_matcher", () => {
      const found = listenerWith({
        filterChainMatcher: {
          onNoMatch: {
            action: {
              name: "default",
              typedConfig: {
                typeUrl: "type.googleapis.com/google.protobuf.StringValue",
                value: Buffer.from([10, 1, 97]),
              },
            },
          },
        },
        filterChains: [
          { filters: [tcpProxyFilter] },
          { name: "a", filters: [tcpProxyFilter] },
          { name: "a", filters: [tcpProxyFilter] },
        ],
      }).filter((v) => v.includes(".name:"));
      assert.deepEqual(found, [
        'listeners 0.0.0.0_9080: filter_chains[0].name: "name" field is required when using a listener matcher',
        "listeners 0.0.0.0_9080: filter_chains[2].name: \"name\" field is duplicated with value 'a'",
      ]);
    });

    it("requires a terminal network filter last, and only last", () => {
      assert.deepEqual(listenerWith({ filterChains: [{ filters: [tcpProxyFilter, rbacFilter] }] }), [
        "listeners 0.0.0.0_9080: filter_chains[0].filters[0]: terminal filter named envoy.filters.network.tcp_proxy must be the last filter in a network filter chain",
        "listeners 0.0.0.0_9080: filter_chains[0].filters[1]: non-terminal filter named envoy.filters.network.rbac is the last filter in a network filter chain",
      ]);
      assert.deepEqual(listenerWith({ filterChains: [{ filters: [rbacFilter, tcpProxyFilter] }] }), []);
    });

    it("requires the HTTP filters to end with the router, and the router only there", () => {
      const fault = {
        name: "envoy.filters.http.fault",
        typedConfig: { typeUrl: TypeUrl.HTTPFault, value: Buffer.alloc(0) },
      };
      assert.deepEqual(
        listenerWith({ filterChains: [{ filters: [hcmFilter({ httpFilters: [router, fault] })] }] }),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].filters[0].typed_config(HttpConnectionManager).http_filters[0]: terminal filter named envoy.filters.http.router must be the last filter in a http filter chain",
          "listeners 0.0.0.0_9080: filter_chains[0].filters[0].typed_config(HttpConnectionManager).http_filters: the last HTTP filter must be the router (terminal), got envoy.filters.http.fault",
        ],
      );
      assert.deepEqual(
        listenerWith({ filterChains: [{ filters: [hcmFilter({ httpFilters: [fault, router] })] }] }),
        [],
      );
    });

    it("rejects an HTTP connection manager with two upgrade configs of one type, HTTP/3 on TCP, or another codec on QUIC", () => {
      assert.deepEqual(
        listenerWith({
          filterChains: [
            {
              filters: [
                hcmFilter({ upgradeConfigs: [{ upgradeType: "websocket" }, { upgradeType: "WebSocket" }] }),
              ],
            },
          ],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].filters[0].typed_config(HttpConnectionManager).upgrade_configs[1]: multiple upgrade configs with the same name: 'WebSocket'",
        ],
      );
      assert.deepEqual(listenerWith({ filterChains: [{ filters: [hcmFilter({ codecType: 3 })] }] }), [
        "listeners 0.0.0.0_9080: filter_chains[0].filters[0].typed_config(HttpConnectionManager).codec_type: HTTP/3 codec configured on non-QUIC listener",
      ]);
      const quic = {
        address: { socketAddress: { address: "0.0.0.0", portValue: 9080, protocol: 1 } }, // UDP
        udpListenerConfig: { quicOptions: {} },
      };
      assert.deepEqual(
        listenerWith({ ...quic, filterChains: [{ filters: [hcmFilter()] }] }).filter((v) =>
          v.includes("codec_type"),
        ),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].filters[0].typed_config(HttpConnectionManager).codec_type: Non-HTTP/3 codec configured on QUIC listener",
        ],
      );
      assert.deepEqual(
        listenerWith({ ...quic, filterChains: [{ filters: [hcmFilter({ codecType: 3 })] }] }).filter((v) =>
          v.includes("codec_type"),
        ),
        [],
      );
    });

    it("checks a route configuration inline in an HTTP connection manager as one served over RDS", () => {
      const inline = {
        name: "inbound|9080||",
        virtualHosts: [
          { name: "a", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: CLUSTER } }] },
          { name: "b", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: CLUSTER } }] },
        ],
      };
      assert.deepEqual(
        listenerWith({ filterChains: [{ filters: [hcmFilter({ rds: undefined, routeConfig: inline })] }] }),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].filters[0].typed_config(HttpConnectionManager).route_config.virtual_hosts[1].domains[0]: Only a single wildcard domain is permitted in route inbound|9080|| (also in a)",
        ],
      );
    });

    it("rejects a listener filter listed twice (Istio's validate.go)", () => {
      const original = {
        name: "envoy.filters.listener.original_dst",
        typedConfig: { typeUrl: TypeUrl.OriginalDst, value: Buffer.alloc(0) },
      };
      assert.deepEqual(listenerWith({ listenerFilters: [original, original] }), [
        "listeners 0.0.0.0_9080: listener_filters[1].name: duplicate listener filter envoy.filters.listener.original_dst",
      ]);
    });

    it("requires the TLS inspector to match TLS or server names, and it or the HTTP inspector for ALPN (Istio)", () => {
      assert.deepEqual(
        listenerWith({
          filterChains: [
            { filterChainMatch: { transportProtocol: "tls" }, filters: [tcpProxyFilter] },
            { filterChainMatch: { serverNames: ["a.example.com"] }, filters: [tcpProxyFilter] },
            { filterChainMatch: { applicationProtocols: ["h2c"] }, filters: [tcpProxyFilter] },
          ],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].filter_chain_match.transport_protocol: transport protocol set, but missing tls inspector",
          "listeners 0.0.0.0_9080: filter_chains[1].filter_chain_match.server_names: server names set, but missing tls inspector",
          "listeners 0.0.0.0_9080: filter_chains[2].filter_chain_match.application_protocols: application protocol set, but missing tls inspector or http inspector",
        ],
      );
    });

    it("rejects TLS matched and served over HTTP without a transport socket (Istio)", () => {
      assert.deepEqual(
        listenerWith({
          listenerFilters: [tlsInspector],
          filterChains: [{ filterChainMatch: { transportProtocol: "tls" }, filters: [hcmFilter()] }],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[0].transport_socket: tls traffic may not be terminated: TLS is matched and HTTP served without a transport socket",
        ],
      );
    });

    it("requires every chain of a destination port to match a transport protocol once one does (Istio)", () => {
      assert.deepEqual(
        listenerWith({
          listenerFilters: [tlsInspector],
          filterChains: [
            {
              filterChainMatch: { destinationPort: 9080, transportProtocol: "tls" },
              filters: [tcpProxyFilter],
            },
            { filterChainMatch: { destinationPort: 9080 }, filters: [tcpProxyFilter] },
          ],
        }),
        [
          "listeners 0.0.0.0_9080: filter_chains[1].filter_chain_match.transport_protocol: filter chain should have transport protocol set for port 9080",
        ],
      );
    });

    it("requires the inbound listener's chains to match a transport protocol, but the 15006 blocker (Istio)", () => {
      const inbound = (chains: ListenerInit["filterChains"]) =>
        Listener.fromPartial({
          name: "virtualInbound",
          address: { socketAddress: { address: "0.0.0.0", portValue: 15006 } },
          trafficDirection: 1, // INBOUND
          listenerFilters: [tlsInspector],
          filterChains: chains,
        });
      assert.deepEqual(
        check({
          listeners: [
            virtualOutbound(),
            outbound(),
            inbound([
              { filterChainMatch: { destinationPort: 15006 }, filters: [tcpProxyFilter] },
              { filterChainMatch: { destinationPort: 9080 }, filters: [tcpProxyFilter] },
              {
                filterChainMatch: { destinationPort: 9090, transportProtocol: "tls" },
                filters: [tcpProxyFilter],
              },
            ]),
          ],
        }),
        [
          "listeners virtualInbound: filter_chains[1].filter_chain_match.transport_protocol: inbound filter chain had no transport protocol set",
        ],
      );
    });
  });

  describe("route configurations", () => {
    it("rejects :-prefixed and host headers added or removed at every level", () => {
      const add = (key: string) => [{ header: { key, value: "x" } }];
      assert.deepEqual(
        routesWith(
          routes({
            requestHeadersToAdd: add(":authority"),
            responseHeadersToRemove: ["Host"],
            virtualHosts: [
              {
                name: "vh",
                domains: ["vh"],
                requestHeadersToRemove: [":path"],
                routes: [
                  {
                    match: { prefix: "/" },
                    requestHeadersToAdd: add("host"),
                    route: {
                      weightedClusters: {
                        clusters: [{ name: CLUSTER, weight: 100, responseHeadersToAdd: add(":status") }],
                      },
                    },
                  },
                ],
              },
            ],
          }),
        ),
        [
          'routes 9080: request_headers_to_add[0].header.key: :-prefixed or host headers may not be modified (got ":authority")',
          'routes 9080: response_headers_to_remove[0]: :-prefixed or host headers may not be removed (got "Host")',
          'routes 9080: virtual_hosts[0].request_headers_to_remove[0]: :-prefixed or host headers may not be removed (got ":path")',
          'routes 9080: virtual_hosts[0].routes[0].request_headers_to_add[0].header.key: :-prefixed or host headers may not be modified (got "host")',
          'routes 9080: virtual_hosts[0].routes[0].route.weighted_clusters.clusters[0].response_headers_to_add[0].header.key: :-prefixed or host headers may not be modified (got ":status")',
        ],
      );
    });

    it("rejects append with an append_action, and a header value with a lone %", () => {
      assert.deepEqual(
        routesWith(
          routes({
            requestHeadersToAdd: [
              { header: { key: "x-a", value: "a" }, append: false, appendAction: 2 },
              { header: { key: "x-b", value: "100%" } },
              { header: { key: "x-c", value: "100%% %DOWNSTREAM_REMOTE_ADDRESS% %REQ(x-y):10%" } },
            ],
          }),
        ),
        [
          "routes 9080: request_headers_to_add[0]: Both append and append_action are set and it's not allowed",
          "routes 9080: request_headers_to_add[1].header.value: no valid %COMMAND% at position 3 (a literal % is written %%)",
        ],
      );
    });

    it("compiles every safe_regex with RE2", () => {
      assert.equal(re2Error("^/api/v[0-9]+/.*$"), null);
      assert.match(re2Error("(a)\\1") ?? "", /./);
      const found = routesWith(
        oneRoute({
          match: {
            safeRegex: { regex: "/(?=lookahead)" },
            headers: [{ name: "x", stringMatch: { safeRegex: { regex: "[a-" } } }],
          },
          route: {
            cluster: CLUSTER,
            regexRewrite: { pattern: { regex: "^/old(/.*)$" }, substitution: "\\1" },
          },
        }),
      );
      assert.equal(found.length, 2, found.join("\n"));
      assert.match(
        found[0]!,
        /^routes 9080: virtual_hosts\[0\]\.routes\[0\]\.match\.safe_regex\.regex: RE2 does not compile it: /,
      );
      assert.match(
        found[1]!,
        /^routes 9080: virtual_hosts\[0\]\.routes\[0\]\.match\.headers\[0\]\.string_match\.safe_regex\.regex: RE2 does not compile it: /,
      );
    });

    it("rejects a direct response body above max_direct_response_body_size_bytes (default 4096)", () => {
      const direct = (size: number) => ({
        match: { prefix: "/" },
        directResponse: { status: 200, body: { inlineString: "x".repeat(size) } },
      });
      const config = (size: number, max?: number) =>
        RouteConfiguration.fromPartial({
          name: "9080",
          maxDirectResponseBodySizeBytes: max,
          virtualHosts: [{ name: "vh", domains: ["vh"], routes: [direct(size)] }],
        });
      assert.deepEqual(check({ routes: [config(4097)] }, "grpc"), [
        "routes 9080: virtual_hosts[0].routes[0].direct_response.body: response body size is 4097 bytes; maximum is 4096",
      ]);
      assert.deepEqual(check({ routes: [config(4096)] }, "grpc"), []);
      assert.deepEqual(check({ routes: [config(2000, 1024 * 1024)] }, "grpc"), []);
      assert.deepEqual(routesWith(config(1024 * 1024 + 1, 1024 * 1024)), [
        "routes 9080: virtual_hosts[0].routes[0].direct_response.body: response body size is 1048577 bytes; maximum is 1048576",
      ]);
    });

    it("holds sidecar route configurations to Istio's max_direct_response_body_size_bytes, not gRPC's", () => {
      assert.deepEqual(routesWith(routes({ maxDirectResponseBodySizeBytes: undefined })), [
        "routes 9080: max_direct_response_body_size_bytes: Istio sets 1048576 on every route configuration (got unset)",
      ]);
      assert.deepEqual(
        check({ routes: [routes({ maxDirectResponseBodySizeBytes: undefined })] }, "grpc"),
        [],
      );
    });

    it("requires a route action to name a cluster, a defined cluster specifier plugin, and weighted clusters Envoy accepts", () => {
      assert.ok(
        routesWith(oneRoute({ match: { prefix: "/" }, route: { cluster: "" } })).includes(
          "routes 9080: virtual_hosts[0].routes[0].route: a route action names no cluster (cluster, weighted_clusters, cluster_header or cluster_specifier_plugin)",
        ),
      );
      assert.deepEqual(
        routesWith(oneRoute({ match: { prefix: "/" }, route: { clusterSpecifierPlugin: "lookup" } })),
        [
          "routes 9080: virtual_hosts[0].routes[0].route.cluster_specifier_plugin: Unknown cluster specifier plugin name: lookup is used in the route",
        ],
      );
      const weighted = (clusters: Array<{ name?: string; clusterHeader?: string; weight?: number }>) =>
        routesWith(oneRoute({ match: { prefix: "/" }, route: { weightedClusters: { clusters } } }));
      assert.deepEqual(weighted([{ name: CLUSTER, clusterHeader: "x-cluster", weight: 1 }]), [
        "routes 9080: virtual_hosts[0].routes[0].route.weighted_clusters.clusters[0]: Only one of name or cluster_header can be specified",
      ]);
      assert.deepEqual(
        weighted([
          { name: CLUSTER, weight: 0 },
          { name: "other", weight: 0 },
        ]),
        [
          "routes 9080: virtual_hosts[0].routes[0].route.weighted_clusters: Sum of weights in the weighted_cluster must be greater than 0",
        ],
      );
      assert.deepEqual(
        weighted([{ name: CLUSTER }, { clusterHeader: "", weight: 1 }]).filter(
          (v) => !v.includes(".name: min_len"),
        ),
        [
          "routes 9080: virtual_hosts[0].routes[0].route.weighted_clusters.clusters[0].weight: a weighted cluster needs a weight",
          "routes 9080: virtual_hosts[0].routes[0].route.weighted_clusters.clusters[1]: At least one of name or cluster_header need to be specified",
        ],
      );
      assert.deepEqual(
        weighted([
          { name: CLUSTER, weight: 90 },
          { name: "other", weight: 10 },
        ]),
        [],
      );
    });

    it("rejects a mirror policy without exactly one cluster, and a retry max_interval below its base_interval", () => {
      assert.deepEqual(
        routesWith(
          oneRoute({
            match: { prefix: "/" },
            route: {
              cluster: CLUSTER,
              requestMirrorPolicies: [{ cluster: "a", clusterHeader: "x-mirror" }],
              retryPolicy: {
                retryBackOff: {
                  baseInterval: { seconds: 1, nanos: 0 },
                  maxInterval: { seconds: 0, nanos: 500_000_000 },
                },
              },
            },
          }),
        ),
        [
          "routes 9080: virtual_hosts[0].routes[0].route.request_mirror_policies[0]: exactly one of cluster or cluster_header in request mirror policy need to be specified",
          "routes 9080: virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval: retry_policy.max_interval must greater than or equal to the base_interval",
        ],
      );
    });

    it("rejects a route's duplicate upgrade, a CONNECT config on another upgrade, and two path rewrites", () => {
      assert.deepEqual(
        routesWith(
          oneRoute({
            match: { prefix: "/" },
            route: {
              cluster: CLUSTER,
              prefixRewrite: "/new",
              regexRewrite: { pattern: { regex: "^/old" }, substitution: "/new" },
              upgradeConfigs: [{ upgradeType: "websocket" }, { upgradeType: "websocket", connectConfig: {} }],
            },
          }),
        ),
        [
          "routes 9080: virtual_hosts[0].routes[0].route.upgrade_configs[1]: Duplicate upgrade websocket",
          "routes 9080: virtual_hosts[0].routes[0].route.upgrade_configs[1]: Non-CONNECT upgrade type websocket has ConnectConfig",
          "routes 9080: virtual_hosts[0].routes[0].route: Specify only one of prefix_rewrite, regex_rewrite or path_rewrite_policy (got prefix_rewrite, regex_rewrite)",
        ],
      );
    });

    it("rejects a domain in two virtual hosts (case-insensitively, wildcards by their fixed part), and two * hosts", () => {
      const vhost = (name: string, domains: string[]) => ({
        name,
        domains,
        routes: [{ match: { prefix: "/" }, route: { cluster: CLUSTER } }],
      });
      assert.deepEqual(
        routesWith(
          routes({
            virtualHosts: [
              vhost("a", ["reviews", "*.example.com", "api.*", "*"]),
              vhost("b", ["Reviews", "*.EXAMPLE.com", "api.*", "*"]),
              vhost("c", ["example.com", "*example.com", "api"]),
            ],
          }),
        ),
        [
          "routes 9080: virtual_hosts[1].domains[0]: Only unique values for domains are permitted. Duplicate entry of domain reviews in route 9080 (also in a)",
          "routes 9080: virtual_hosts[1].domains[1]: Only unique values for domains are permitted. Duplicate entry of domain *.example.com in route 9080 (also in a)",
          "routes 9080: virtual_hosts[1].domains[2]: Only unique values for domains are permitted. Duplicate entry of domain api.* in route 9080 (also in a)",
          "routes 9080: virtual_hosts[1].domains[3]: Only a single wildcard domain is permitted in route 9080 (also in a)",
        ],
      );
    });

    it("rejects two virtual hosts of one name (Istio), routes beside a matcher, and virtual clusters without headers", () => {
      const vhost = {
        name: "vh",
        domains: ["a"],
        routes: [{ match: { prefix: "/" }, route: { cluster: CLUSTER } }],
      };
      assert.deepEqual(routesWith(routes({ virtualHosts: [vhost, { ...vhost, domains: ["b"] }] })), [
        "routes 9080: virtual_hosts[1].name: duplicate virtual host vh",
      ]);
      assert.deepEqual(
        routesWith(
          routes({ virtualHosts: [{ ...vhost, virtualClusters: [{ name: "vc", headers: [] }] }] }),
        ).filter((v) => v.includes("virtual clusters")),
        ["routes 9080: virtual_hosts[0].virtual_clusters[0]: virtual clusters must define 'headers'"],
      );
      assert.ok(
        routesWith(routes({ virtualHosts: [{ ...vhost, matcher: { onNoMatch: {} } }] })).includes(
          "routes 9080: virtual_hosts[0]: cannot set both matcher and routes on virtual host",
        ),
      );
    });
  });

  describe("clusters", () => {
    it("rejects both transport_socket and transport_socket_matches (Istio)", () => {
      const socket = {
        name: "envoy.transport_sockets.raw_buffer",
        typedConfig: { typeUrl: TypeUrl.RawBuffer, value: Buffer.alloc(0) },
      };
      assert.deepEqual(
        check({
          clusters: [
            cluster({
              transportSocket: socket,
              transportSocketMatches: [{ name: "plain", transportSocket: socket }],
            }),
          ],
        }),
        [
          `clusters ${CLUSTER}: transport_socket_matches: both transport_socket and transport_socket_matches set`,
        ],
      );
    });

    it("holds ORIGINAL_DST to CLUSTER_PROVIDED and no load assignment, and CLUSTER_PROVIDED to ORIGINAL_DST", () => {
      const original = (fields: ClusterInit) =>
        check({
          clusters: [
            cluster({ name: "PassthroughCluster", type: 4, edsClusterConfig: undefined, ...fields }),
          ],
          endpoints: [],
        });
      assert.deepEqual(original({ lbPolicy: 6 }), []);
      assert.deepEqual(original({ lbPolicy: 0 }), [
        "clusters PassthroughCluster: lb_policy: LB policy ROUND_ROBIN is not valid for Cluster type ORIGINAL_DST. Only 'CLUSTER_PROVIDED' is allowed with cluster type 'ORIGINAL_DST'",
      ]);
      assert.deepEqual(
        original({
          lbPolicy: 6,
          loadAssignment: { clusterName: "PassthroughCluster", endpoints: [{ lbEndpoints: [] }] },
        }),
        [
          "clusters PassthroughCluster: load_assignment: ORIGINAL_DST clusters must have no load assignment configured",
        ],
      );
      assert.deepEqual(check({ clusters: [cluster({ lbPolicy: 6 })] }), [
        `clusters ${CLUSTER}: lb_policy: LB policy CLUSTER_PROVIDED is not valid for Cluster type EDS. 'CLUSTER_PROVIDED' is allowed only with cluster type 'ORIGINAL_DST'`,
      ]);
    });

    it("requires a LOGICAL_DNS cluster to have exactly one endpoint, and a ring hash minimum within its maximum", () => {
      const endpoint = (address: string) => ({
        endpoint: { address: { socketAddress: { address, portValue: 443 } } },
      });
      const dns = (lbEndpoints: Array<ReturnType<typeof endpoint>>) =>
        check({
          clusters: [
            cluster({
              name: "outbound|443||example.com",
              type: 2,
              edsClusterConfig: undefined,
              loadAssignment: { clusterName: "outbound|443||example.com", endpoints: [{ lbEndpoints }] },
            }),
          ],
          endpoints: [],
        });
      assert.deepEqual(dns([endpoint("example.com")]), []);
      assert.deepEqual(dns([endpoint("a.example.com"), endpoint("b.example.com")]), [
        "clusters outbound|443||example.com: load_assignment.endpoints: LOGICAL_DNS clusters must have a single locality_lb_endpoint and a single lb_endpoint",
      ]);
      assert.deepEqual(
        check({
          clusters: [
            cluster({ lbPolicy: 2, ringHashLbConfig: { minimumRingSize: 2048, maximumRingSize: 1024 } }),
          ],
        }),
        [`clusters ${CLUSTER}: ring_hash_lb_config: minimum_ring_size (2048) > maximum_ring_size (1024)`],
      );
    });
  });
});

describe("the xDS checker for proxyless gRPC: what C-core 1.51 and grpc-js-xds reject beyond Envoy", () => {
  const grpcCheck = (replace: XdsSnapshot) => check(replace, "grpc");
  const locality = (zone: string, weight: number, ...addresses: string[]) => ({
    locality: { region: "r", zone },
    loadBalancingWeight: weight,
    lbEndpoints: addresses.map((address) => ({
      endpoint: { address: { socketAddress: { address, portValue: 9080 } } },
    })),
  });

  it("accepts ROUND_ROBIN and RING_HASH with a ring of at most 8388608", () => {
    assert.deepEqual(grpcCheck({ clusters: [cluster()] }), []);
    assert.deepEqual(
      grpcCheck({ clusters: [cluster({ lbPolicy: 2, ringHashLbConfig: { minimumRingSize: 8_388_608 } })] }),
      [],
    );
  });

  it("rejects any other lb_policy", () => {
    assert.deepEqual(grpcCheck({ clusters: [cluster({ lbPolicy: 1 })] }), [
      `clusters ${CLUSTER}: lb_policy: LEAST_REQUEST (gRPC: "LB policy is not supported")`,
    ]);
    assert.deepEqual(grpcCheck({ clusters: [cluster({ lbPolicy: 3 })] }), [
      `clusters ${CLUSTER}: lb_policy: RANDOM (gRPC: "LB policy is not supported")`,
    ]);
  });

  it("rejects an address twice in a load assignment, and locality weights over a uint32", () => {
    const assignment = (...localities: ReturnType<typeof locality>[]) =>
      ClusterLoadAssignment.fromPartial({ clusterName: CLUSTER, endpoints: localities });
    assert.deepEqual(grpcCheck({ endpoints: [assignment(locality("a", 2, "10.1.0.1", "10.1.0.2"))] }), []);
    assert.deepEqual(
      grpcCheck({ endpoints: [assignment(locality("a", 1, "10.1.0.1"), locality("b", 1, "10.1.0.1"))] }),
      [`endpoints ${CLUSTER}: endpoints: 10.1.0.1:9080 twice (gRPC: "duplicate endpoint address")`],
    );
    assert.deepEqual(
      grpcCheck({
        endpoints: [
          assignment(locality("a", 4_000_000_000, "10.1.0.1"), locality("b", 400_000_000, "10.1.0.2")),
        ],
      }),
      [`endpoints ${CLUSTER}: endpoints: locality weights add up to 4400000000 (gRPC: "exceeds uint32 max")`],
    );
  });
});
