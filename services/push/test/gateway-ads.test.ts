// A router proxy over ADS, as the agent's `proxy router` connects: push
// serves it the gateway's listeners, routes, clusters and endpoints from the
// Gateway and VirtualService in NATS, and pushes a Gateway change.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Bus } from "@sextant/bus";
import {
  Cluster,
  ClusterLoadAssignment,
  type DiscoveryResponse,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { type NatsServerFixture, startNatsServer } from "@sextant/testing";
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

const gatewaySpec = (ports: number[]) => ({
  selector: { istio: "ingressgateway" },
  servers: ports.map((number) => ({
    port: { number, name: `http-${number}`, protocol: "HTTP" },
    hosts: ["*"],
  })),
});

describe("a router proxy over ADS", () => {
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
    await putConfig(bus, { kind: "Gateway", name: "bookinfo-gateway", spec: gatewaySpec([8080]) });
    await putConfig(bus, {
      kind: "VirtualService",
      name: "bookinfo",
      spec: {
        hosts: ["*"],
        gateways: ["bookinfo-gateway"],
        http: [{ route: [{ destination: { host: "reviews", port: { number: 9080 } } }] }],
      },
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

  it("serves the gateway's listener, its route configuration, and the clusters and endpoints they use", async () => {
    client.send({ node: routerNode, typeUrl: TypeUrl.Cluster });
    const clusters = await client.next();
    const clusterNames = clusters.resources.map((r) => Cluster.decode(r.value).name);
    assert.ok(clusterNames.includes(`outbound|9080||${HOST}`), clusterNames.join());
    assert.ok(clusterNames.includes("BlackHoleCluster"));
    assert.ok(!clusterNames.includes("PassthroughCluster"));
    ack(clusters);

    client.send({ typeUrl: TypeUrl.ClusterLoadAssignment, resourceNames: [`outbound|9080||${HOST}`] });
    const endpoints = await client.next();
    assert.deepEqual(
      endpoints.resources.map((r) => ClusterLoadAssignment.decode(r.value).clusterName),
      [`outbound|9080||${HOST}`],
    );
    ack(endpoints, [`outbound|9080||${HOST}`]);

    client.send({ typeUrl: TypeUrl.Listener });
    const listeners = await client.next();
    assert.deepEqual(
      listeners.resources.map((r) => Listener.decode(r.value).name),
      ["0.0.0.0_8080"],
    );
    ack(listeners);

    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["http.8080"] });
    const routes = await client.next();
    const [config] = routes.resources.map((r) => RouteConfiguration.decode(r.value));
    assert.equal(config?.name, "http.8080");
    assert.deepEqual(
      config?.virtualHosts.map((vh) => [vh.name, vh.domains, vh.routes.map((route) => route.route?.cluster)]),
      [["*:8080", ["*"], [`outbound|9080||${HOST}`]]],
    );
    ack(routes, ["http.8080"]);
  });

  it("pushes the listeners again when a Gateway changes", async () => {
    await putConfig(bus, { kind: "Gateway", name: "bookinfo-gateway", spec: gatewaySpec([8080, 8081]) });
    let listeners: DiscoveryResponse | undefined;
    // A full push sends every type the router watches, in the table's order; the listeners come after CDS and EDS.
    while (!listeners) {
      const response = await client.next();
      if (response.typeUrl === TypeUrl.Listener) listeners = response;
      else
        ack(response, response.typeUrl === TypeUrl.ClusterLoadAssignment ? [`outbound|9080||${HOST}`] : []);
    }
    assert.deepEqual(
      listeners.resources.map((r) => Listener.decode(r.value).name),
      ["0.0.0.0_8080", "0.0.0.0_8081"],
    );
  });
});
