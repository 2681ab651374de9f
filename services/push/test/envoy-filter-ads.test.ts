// EnvoyFilters over ADS, through push's main: a router is served its route
// configuration patched by an EnvoyFilter from NATS; a patch Envoy would
// reject leaves the listener as it was sent and shows at /debug/envoyfilterz.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { Bus } from "@sextant/bus";
import {
  type DiscoveryResponse,
  HttpConnectionManager,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { DEBUG_HEADERS, eventually } from "@sextant/testing";
import {
  type AdsTestClient,
  ingressGatewayNode,
  pushForSuite,
  putBookinfoGateway,
  putConfig,
} from "./harness.js";

const ROUTE_HEADER = {
  applyTo: "ROUTE_CONFIGURATION",
  match: { context: "GATEWAY", routeConfiguration: { portNumber: 8080 } },
  patch: {
    operation: "MERGE",
    value: { response_headers_to_add: [{ header: { key: "x-envoyfilter", value: "demo" } }] },
  },
};

const AFTER_ROUTER = {
  applyTo: "HTTP_FILTER",
  match: { context: "GATEWAY" },
  patch: {
    operation: "ADD",
    value: {
      name: "late",
      typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.grpc_web.v3.GrpcWeb" },
    },
  },
};

/** Stores an EnvoyFilter of one patch in the root namespace: it applies mesh-wide. */
const putMeshEnvoyFilter = (bus: Bus, name: string, patch: Record<string, unknown>) =>
  putConfig(bus, {
    kind: "EnvoyFilter",
    apiVersion: "networking.istio.io/v1alpha3",
    namespace: "istio-system",
    name,
    spec: { configPatches: [patch] },
  });

describe("EnvoyFilters over ADS", () => {
  const push = pushForSuite({
    seed: async (bus) => {
      await putBookinfoGateway(bus);
      await putMeshEnvoyFilter(bus, "response-header", ROUTE_HEADER);
    },
  });
  let client: AdsTestClient;
  before(() => {
    client = push.adsClient();
  });

  const httpFilterNames = (response: DiscoveryResponse) =>
    response.resources.flatMap((any) =>
      Listener.decode(any.value).filterChains.flatMap((chain) =>
        chain.filters.flatMap((filter) =>
          filter.typedConfig?.typeUrl === TypeUrl.HttpConnectionManager
            ? HttpConnectionManager.decode(filter.typedConfig.value).httpFilters.map((f) => f.name)
            : [],
        ),
      ),
    );

  it("serves the route configuration with the EnvoyFilter's patch", async () => {
    client.send({ node: ingressGatewayNode, typeUrl: TypeUrl.Listener });
    const listeners = await client.next();
    assert.equal(httpFilterNames(listeners).at(-1), "envoy.filters.http.router");
    client.ack(listeners);
    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["http.8080"] });
    const routes = await client.next();
    const [config] = routes.resources.map((r) => RouteConfiguration.decode(r.value));
    assert.deepEqual(
      config?.responseHeadersToAdd.map((option) => [option.header?.key, option.header?.value]),
      [["x-envoyfilter", "demo"]],
    );
    client.ack(routes, ["http.8080"]);
  });

  it("keeps the listener it sent when a patch would make Envoy reject it, and lists the failure at /debug/envoyfilterz", async () => {
    await putMeshEnvoyFilter(push.bus, "after-router", AFTER_ROUTER);
    // The push runs the generators (which refuse the patch) and finds the listener unchanged: nothing to resend.
    type Failure = { filters: Array<{ name: string }>; resource: string; reason: string };
    const failures = await eventually(async () => {
      const response = await fetch(`${push.httpUrl}/debug/envoyfilterz`, { headers: DEBUG_HEADERS });
      const list = (await response.json()) as Failure[];
      return list.length > 0 ? list : undefined;
    });
    assert.deepEqual(
      failures.map((f) => [f.filters.map((ref) => ref.name), f.resource]),
      [[["after-router"], "0.0.0.0_8080"]],
    );
    assert.match(failures[0]?.reason ?? "", /terminal but not the last HTTP filter/);
    const dump = (await (
      await fetch(`${push.httpUrl}/debug/config_dump?proxyID=${encodeURIComponent(ingressGatewayNode.id)}`, {
        headers: DEBUG_HEADERS,
      })
    ).json()) as { configs: Array<{ typeUrl: string; resources: unknown[] }> };
    const held = JSON.stringify(dump.configs.find((c) => c.typeUrl === TypeUrl.Listener)?.resources);
    assert.ok(held.includes("envoy.filters.http.router") && !held.includes('"late"'), held);
    assert.equal((await fetch(`${push.httpUrl}/debug/envoyfilterz`)).status, 401);
  });
});
