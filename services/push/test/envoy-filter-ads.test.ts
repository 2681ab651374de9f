// EnvoyFilters over ADS, through push's main: a router is served its route
// configuration patched by an EnvoyFilter from NATS; a patch Envoy would
// reject leaves the listener as it was sent and shows at /debug/envoyfilterz.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Bus } from "@sextant/bus";
import {
  type DiscoveryResponse,
  HttpConnectionManager,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { DEBUG_HEADERS, eventually, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import {
  AdsTestClient,
  type PushFixture,
  putConfig,
  registerService,
  startPush,
  testBus,
} from "./harness.js";

const HOST = "reviews.default.svc.cluster.local";

const routerNode = Node.fromPartial({
  id: "router~10.244.3.20~istio-ingressgateway-abc.istio-system~istio-system.svc.cluster.local",
  metadata: { NAMESPACE: "istio-system", LABELS: { istio: "ingressgateway" } },
  userAgentName: "test",
});

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

describe("EnvoyFilters over ADS", () => {
  let nats: NatsServerFixture;
  let bus: Bus;
  let push: PushFixture;
  let client: AdsTestClient;

  before(async () => {
    nats = await startNatsServer();
    bus = await testBus(nats.url);
    await registerService(bus, HOST, { name: "http", number: 9080 }, [
      { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
    ]);
    await putConfig(bus, {
      kind: "Gateway",
      name: "bookinfo-gateway",
      spec: {
        selector: { istio: "ingressgateway" },
        servers: [{ port: { number: 8080, name: "http", protocol: "HTTP" }, hosts: ["*"] }],
      },
    });
    await putConfig(bus, {
      kind: "VirtualService",
      name: "bookinfo",
      spec: {
        hosts: ["*"],
        gateways: ["bookinfo-gateway"],
        http: [{ route: [{ destination: { host: "reviews", port: { number: 9080 } } }] }],
      },
    });
    await putConfig(bus, {
      kind: "EnvoyFilter",
      apiVersion: "networking.istio.io/v1alpha3",
      namespace: "istio-system",
      name: "response-header",
      spec: { configPatches: [ROUTE_HEADER] },
    });
    push = await startPush(nats.url);
    client = new AdsTestClient(push.xdsAddress);
  });
  after(async () => {
    client?.close();
    await push?.stop();
    await bus?.close();
    await nats?.dispose();
  });

  const ack = (response: DiscoveryResponse, resourceNames: string[] = []) =>
    client.send({
      typeUrl: response.typeUrl,
      resourceNames,
      versionInfo: response.versionInfo,
      responseNonce: response.nonce,
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
    client.send({ node: routerNode, typeUrl: TypeUrl.Listener });
    const listeners = await client.next();
    assert.equal(httpFilterNames(listeners).at(-1), "envoy.filters.http.router");
    ack(listeners);
    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["http.8080"] });
    const routes = await client.next();
    const [config] = routes.resources.map((r) => RouteConfiguration.decode(r.value));
    assert.deepEqual(
      config?.responseHeadersToAdd.map((option) => [option.header?.key, option.header?.value]),
      [["x-envoyfilter", "demo"]],
    );
    ack(routes, ["http.8080"]);
  });

  it("keeps the listener it sent when a patch would make Envoy reject it, and lists the failure at /debug/envoyfilterz", async () => {
    await putConfig(bus, {
      kind: "EnvoyFilter",
      apiVersion: "networking.istio.io/v1alpha3",
      namespace: "istio-system",
      name: "after-router",
      spec: { configPatches: [AFTER_ROUTER] },
    });
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
      await fetch(`${push.httpUrl}/debug/config_dump?proxyID=${encodeURIComponent(routerNode.id)}`, {
        headers: DEBUG_HEADERS,
      })
    ).json()) as { configs: Array<{ typeUrl: string; resources: unknown[] }> };
    const held = JSON.stringify(dump.configs.find((c) => c.typeUrl === TypeUrl.Listener)?.resources);
    assert.ok(held.includes("envoy.filters.http.router") && !held.includes('"late"'), held);
    assert.equal((await fetch(`${push.httpUrl}/debug/envoyfilterz`)).status, 401);
  });
});
