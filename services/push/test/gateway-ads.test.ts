// A router proxy over ADS, as the agent's `proxy router` connects: push
// serves it the gateway's listeners, routes, clusters and endpoints from the
// Gateway and VirtualService in NATS, and pushes a Gateway change.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import {
  Cluster,
  ClusterLoadAssignment,
  type DiscoveryResponse,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import {
  type AdsTestClient,
  ingressGatewayNode,
  ingressGatewaySpec,
  pushForSuite,
  putBookinfoGateway,
  putConfig,
} from "./harness.js";

const HOST = "reviews.default.svc.cluster.local";

describe("a router proxy over ADS", () => {
  const push = pushForSuite({ seed: putBookinfoGateway });
  let client: AdsTestClient;
  before(() => {
    client = push.adsClient();
  });

  it("serves the gateway's listener, its route configuration, and the clusters and endpoints they use", async () => {
    client.send({ node: ingressGatewayNode, typeUrl: TypeUrl.Cluster });
    const clusters = await client.next();
    const clusterNames = clusters.resources.map((r) => Cluster.decode(r.value).name);
    assert.ok(clusterNames.includes(`outbound|9080||${HOST}`), clusterNames.join());
    assert.ok(clusterNames.includes("BlackHoleCluster"));
    assert.ok(!clusterNames.includes("PassthroughCluster"));
    client.ack(clusters);

    client.send({ typeUrl: TypeUrl.ClusterLoadAssignment, resourceNames: [`outbound|9080||${HOST}`] });
    const endpoints = await client.next();
    assert.deepEqual(
      endpoints.resources.map((r) => ClusterLoadAssignment.decode(r.value).clusterName),
      [`outbound|9080||${HOST}`],
    );
    client.ack(endpoints, [`outbound|9080||${HOST}`]);

    client.send({ typeUrl: TypeUrl.Listener });
    const listeners = await client.next();
    assert.deepEqual(
      listeners.resources.map((r) => Listener.decode(r.value).name),
      ["0.0.0.0_8080"],
    );
    client.ack(listeners);

    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNames: ["http.8080"] });
    const routes = await client.next();
    const [config] = routes.resources.map((r) => RouteConfiguration.decode(r.value));
    assert.equal(config?.name, "http.8080");
    assert.deepEqual(
      config?.virtualHosts.map((vh) => [vh.name, vh.domains, vh.routes.map((route) => route.route?.cluster)]),
      [["*:8080", ["*"], [`outbound|9080||${HOST}`]]],
    );
    client.ack(routes, ["http.8080"]);
  });

  it("pushes the listeners again when a Gateway changes", async () => {
    await putConfig(push.bus, {
      kind: "Gateway",
      name: "bookinfo-gateway",
      spec: ingressGatewaySpec([8080, 8081]),
    });
    let listeners: DiscoveryResponse | undefined;
    // A full push sends every type the router watches, in the table's order; the listeners come after CDS and EDS.
    while (!listeners) {
      const response = await client.next();
      if (response.typeUrl === TypeUrl.Listener) listeners = response;
      else
        client.ack(
          response,
          response.typeUrl === TypeUrl.ClusterLoadAssignment ? [`outbound|9080||${HOST}`] : [],
        );
    }
    assert.deepEqual(
      listeners.resources.map((r) => Listener.decode(r.value).name),
      ["0.0.0.0_8080", "0.0.0.0_8081"],
    );
  });
});
