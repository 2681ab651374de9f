import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { packAny } from "@sextant/proto";
import {
  Cluster,
  ClusterLoadAssignment,
  HttpConnectionManager,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { goldenCases } from "@sextant/testing";
import { parse } from "yaml";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { decodeAny, formatViolation, MESSAGE_TYPE, validateAny } from "./envoy-validate.js";
import { contextOf, type GoldenInput, TYPES, unacceptedGrpcViolations } from "./golden-inputs.js";

const grpcTestdata = fileURLToPath(new URL("./testdata/grpc", import.meta.url));

const violations = (
  typeUrl: string,
  codec: { encode(m: never): { finish(): Uint8Array } },
  message: unknown,
) =>
  validateAny({ typeUrl, value: Buffer.from(codec.encode(message as never).finish()) }).map(formatViolation);

const hcm = (statPrefix: string) =>
  packAny(
    TypeUrl.HttpConnectionManager,
    HttpConnectionManager,
    HttpConnectionManager.fromPartial({
      statPrefix,
      rds: { routeConfigName: "9080", configSource: { ads: {}, resourceApiVersion: 2 } },
      httpFilters: [
        {
          name: "envoy.filters.http.router",
          typedConfig: { typeUrl: TypeUrl.Router, value: Buffer.alloc(0) },
        },
      ],
    }),
  );

const listener = (port: number, statPrefix: string) =>
  Listener.fromPartial({
    name: `0.0.0.0_${port}`,
    address: { socketAddress: { address: "0.0.0.0", portValue: port } },
    filterChains: [
      { filters: [{ name: "envoy.filters.network.http_connection_manager", typedConfig: hcm(statPrefix) }] },
    ],
  });

const cluster = (fields: Record<string, unknown>) =>
  Cluster.fromPartial({
    name: "outbound|9080||reviews.default.svc.cluster.local",
    type: 3, // EDS
    edsClusterConfig: { edsConfig: { ads: {}, resourceApiVersion: 2 } },
    connectTimeout: { seconds: 10, nanos: 0 },
    ...fields,
  });

describe("the validate-rule checker", () => {
  it("passes every resource the proxyless golden cases generate (but the violations gRPC is allowed)", () => {
    let checked = 0;
    let accepted = 0;
    for (const testCase of goldenCases(grpcTestdata)) {
      const input = parse(testCase.input) as GoldenInput;
      const push = contextOf(input);
      const proxy = parseProxy({
        id: "sidecar~10.0.0.1~golden.default~default.svc.cluster.local",
        metadata: {
          GENERATOR: "grpc",
          NAMESPACE: input.proxy?.namespace ?? "default",
          ...(input.proxy?.labels ? { LABELS: input.proxy.labels } : {}),
          ...(input.proxy?.ip ? { INSTANCE_IPS: input.proxy.ip } : {}),
          ...(input.proxy?.serviceAccount ? { SERVICE_ACCOUNT: input.proxy.serviceAccount } : {}),
        },
      } as never);
      for (const [type, typeUrl] of Object.entries(TYPES)) {
        const names = input.subscribe[type as keyof typeof TYPES];
        if (!names) continue;
        const cache = new XdsCache();
        for (const r of XDS_TYPES.generator("grpc", typeUrl)!.generate(
          { push, proxy, cache },
          new Set(names),
        )) {
          const all = validateAny(r.resource).map(formatViolation);
          assert.deepEqual(unacceptedGrpcViolations(all), [], `${testCase.name}: ${type} ${r.name}`);
          accepted += all.length;
          checked++;
        }
      }
    }
    assert.ok(checked >= 20, `only ${checked} resources checked`);
    // The accepted gRPC-only violations are real findings for Envoy: the checker sees them.
    assert.ok(accepted > 0, "the checker found none of the violations gRPC is allowed");
  });

  it("passes well-formed resources of each type", () => {
    assert.deepEqual(violations(TypeUrl.Listener, Listener, listener(9080, "outbound_0.0.0.0_9080")), []);
    assert.deepEqual(violations(TypeUrl.Cluster, Cluster, cluster({})), []);
    assert.deepEqual(
      violations(
        TypeUrl.RouteConfiguration,
        RouteConfiguration,
        RouteConfiguration.fromPartial({
          name: "9080",
          virtualHosts: [
            {
              name: "reviews.default.svc.cluster.local:9080",
              domains: ["reviews.default.svc.cluster.local", "reviews"],
              routes: [
                {
                  match: { prefix: "/" },
                  route: { cluster: "outbound|9080||reviews.default.svc.cluster.local" },
                },
              ],
            },
          ],
        }),
      ),
      [],
    );
  });

  it("fails a Cluster with an empty name, an undefined enum and a zero connect timeout", () => {
    assert.deepEqual(violations(TypeUrl.Cluster, Cluster, cluster({ name: "" })), ["name: min_len 1"]);
    assert.deepEqual(violations(TypeUrl.Cluster, Cluster, cluster({ lbPolicy: 42 })), [
      "lb_policy: defined_only (got 42)",
    ]);
    assert.deepEqual(
      violations(TypeUrl.Cluster, Cluster, cluster({ connectTimeout: { seconds: 0, nanos: 0 } })),
      ["connect_timeout: gt 0s"],
    );
  });

  it("fails a Listener with a port out of range, and an HCM without stat_prefix inside a filter's typed_config", () => {
    assert.deepEqual(violations(TypeUrl.Listener, Listener, listener(70000, "outbound_0.0.0.0_9080")), [
      "address.socket_address.port_value: lte 65535 (got 70000)",
    ]);
    assert.deepEqual(violations(TypeUrl.Listener, Listener, listener(9080, "")), [
      "filter_chains[0].filters[0].typed_config(HttpConnectionManager).stat_prefix: min_len 1",
    ]);
  });

  it("fails a route without an action, a virtual host without domains, and a repeated item's rule", () => {
    const found = violations(
      TypeUrl.RouteConfiguration,
      RouteConfiguration,
      RouteConfiguration.fromPartial({
        name: "9080",
        virtualHosts: [
          { name: "a", domains: [], routes: [{ match: { prefix: "/" } }] },
          { name: "b", domains: ["b"], routes: [{ match: {}, route: { cluster: "x" } }] },
          { name: "", domains: ["bad\nhost"], routes: [] },
        ],
      }),
    );
    assert.deepEqual(found, [
      "virtual_hosts[0].domains: min_items 1",
      "virtual_hosts[0].routes[0].action: oneof required",
      "virtual_hosts[1].routes[0].match.path_specifier: oneof required",
      "virtual_hosts[2].name: min_len 1",
      'virtual_hosts[2].domains[0]: well_known_regex HTTP_HEADER_VALUE (got "bad\\nhost")',
    ]);
  });

  it("fails endpoints without a cluster name, and Anys whose type it cannot know", () => {
    assert.deepEqual(
      violations(
        TypeUrl.ClusterLoadAssignment,
        ClusterLoadAssignment,
        ClusterLoadAssignment.fromPartial({ clusterName: "", endpoints: [{ loadBalancingWeight: 0 }] }),
      ),
      ["cluster_name: min_len 1", "endpoints[0].load_balancing_weight: gte 1 (got 0)"],
    );
    const unknown = Listener.fromPartial({
      name: "x",
      filterChains: [
        {
          filters: [
            { name: "f", typedConfig: { typeUrl: "type.googleapis.com/not.a.Type", value: Buffer.alloc(0) } },
          ],
        },
      ],
    });
    assert.deepEqual(violations(TypeUrl.Listener, Listener, unknown), [
      "filter_chains[0].filters[0].typed_config: Any type type.googleapis.com/not.a.Type is not in the descriptor set",
    ]);
  });

  it("decodes a resource as plain data: .proto field names, enums by name, wrappers kept, Anys unpacked", () => {
    const decoded = decodeAny(
      packAny(
        TypeUrl.Listener,
        Listener,
        Listener.fromPartial({
          ...listener(9080, "outbound_0.0.0.0_9080"),
          bindToPort: false,
          trafficDirection: 2,
        }),
      ),
    );
    assert.equal(decoded?.[MESSAGE_TYPE], "envoy.config.listener.v3.Listener");
    assert.deepEqual(decoded, {
      name: "0.0.0.0_9080",
      address: { socket_address: { address: "0.0.0.0", port_value: 9080 } },
      filter_chains: [
        {
          filters: [
            {
              name: "envoy.filters.network.http_connection_manager",
              typed_config: {
                "@type": TypeUrl.HttpConnectionManager,
                stat_prefix: "outbound_0.0.0.0_9080",
                rds: { route_config_name: "9080", config_source: { ads: {}, resource_api_version: "V3" } },
                http_filters: [
                  { name: "envoy.filters.http.router", typed_config: { "@type": TypeUrl.Router } },
                ],
              },
            },
          ],
        },
      ],
      bind_to_port: {},
      traffic_direction: "OUTBOUND",
    });
    assert.equal(decodeAny({ typeUrl: "type.googleapis.com/not.a.Type", value: Buffer.alloc(0) }), undefined);
  });
});
