import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Buckets } from "@sextant/bus";
import { HealthStatus, Protocol } from "@sextant/proto";
import { DEBUG_HEADERS, eventually, type FakeKubeApiServer } from "@sextant/testing";
import { endpointsKey, serviceKey } from "../src/registry/keys.js";
import {
  type DiscoveryFixture,
  type Obj,
  type Platform,
  podOf,
  setPodReady,
  sliceOf,
  startBookinfoCluster,
  startDiscovery,
  startNatsWithClient,
  writeKubeconfig,
} from "./harness.js";

const SHARD = "kubernetes/Kubernetes";
const host = (name: string) => `${name}.default.svc.cluster.local`;
const epKey = (name: string) => endpointsKey("default", host(name), SHARD);

describe("Kubernetes source, against the fake kube-apiserver with Bookinfo", () => {
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let cluster: { server: FakeKubeApiServer; platform: Platform };
  let discovery: DiscoveryFixture;

  before(async () => {
    client = await startNatsWithClient();
    cluster = await startBookinfoCluster();
    discovery = await startDiscovery(client.nats.url, {
      KUBERNETES: "on",
      KUBECONFIG: writeKubeconfig(cluster.server),
    });
  });
  after(async () => {
    await discovery?.stop();
    await cluster?.server.close();
    await client?.close();
  });

  it("is ready only after the initial sync, and then holds the four Bookinfo services on port 9080", async () => {
    const ready = await fetch(`${discovery.url}/ready`);
    assert.equal(ready.status, 200, "startService returns once every runner started, so it is ready");
    const services = await client.services();
    assert.deepEqual(
      [...services.keys()].sort(),
      ["details", "productpage", "ratings", "reviews"].map((name) => serviceKey("default", host(name))),
    );
    for (const service of services.values()) {
      assert.equal(service.namespace, "default");
      assert.equal(service.registry, "kubernetes");
      assert.deepEqual(service.ports, [
        { name: "http", number: 9080, targetPort: 0, protocol: Protocol.PROTOCOL_HTTP },
      ]);
      assert.equal(service.addresses.length, 1);
      assert.deepEqual(service.selector, { app: service.name });
    }
  });

  it("gives reviews the endpoints of v1, v2 and v3 with their version labels, service account and locality", async () => {
    const shard = (await client.endpoints()).get(epKey("reviews"));
    assert.ok(shard, "reviews has a Kubernetes endpoint shard");
    assert.equal(shard.shard, SHARD);
    assert.deepEqual(shard.endpoints.map((e) => e.labels.version).sort(), ["v1", "v2", "v3"]);
    for (const endpoint of shard.endpoints) {
      assert.equal(endpoint.serviceAccount, "bookinfo-reviews");
      assert.deepEqual(endpoint.ports, { http: 9080 });
      assert.equal(endpoint.health, HealthStatus.HEALTH_STATUS_HEALTHY);
      assert.equal(endpoint.workloadName, `reviews-${endpoint.labels.version}`);
      assert.equal(endpoint.namespace, "default");
      assert.equal(endpoint.locality?.region, "eu-west");
      assert.match(endpoint.locality?.zone ?? "", /^eu-west-1[ab]$/);
    }
  });

  it("updates an endpoint's health when its pod turns not-ready, and back", async () => {
    const pod = cluster.platform.pods.find(
      (p) => p.metadata.labels.version === "v2" && p.metadata.labels.app === "reviews",
    )!;
    const healthOfPod = async () =>
      (await client.endpoints()).get(epKey("reviews"))?.endpoints.find((e) => e.address === pod.status.podIP)
        ?.health;
    setPodReady(cluster.server, pod, false);
    await eventually(async () => (await healthOfPod()) === HealthStatus.HEALTH_STATUS_UNHEALTHY, {
      message: "endpoint unhealthy",
    });
    setPodReady(cluster.server, pod, true);
    await eventually(async () => (await healthOfPod()) === HealthStatus.HEALTH_STATUS_HEALTHY, {
      message: "endpoint healthy again",
    });
  });

  it("relists after a dropped watch and a 410 Gone, with no duplicate and no lost endpoint", async () => {
    const { server, platform } = cluster;
    const endpoints = await (await client.bus.bucket(Buckets.endpoints)).get(epKey("productpage"));
    const lists = () => server.requestCount({ verb: "list", resource: "endpointslices" });
    const listsBefore = lists();

    // A dropped watch: changes made while discovery is cut off arrive after it re-watches.
    server.pauseWatches();
    assert.ok(server.dropWatches() >= 5, "every informer's watch is dropped");
    const reviews = platform.services.find((s) => s.metadata.name === "reviews")!;
    const template = {
      metadata: { name: "reviews-v2", namespace: "default" },
      spec: {
        template: {
          metadata: { labels: { app: "reviews", version: "v2" } },
          spec: { serviceAccountName: "bookinfo-reviews", containers: [] },
        },
      },
    };
    const extra = podOf(template, 40, "10.244.9.40", "node-b");
    server.apply(extra);
    const reviewsPods = platform.pods.filter((p) => p.metadata.labels.app === "reviews");
    server.apply(sliceOf(reviews, [...reviewsPods, extra]));
    server.resumeWatches();
    await eventually(
      async () =>
        (await client.endpoints()).get(epKey("reviews"))?.endpoints.some((e) => e.address === "10.244.9.40"),
      { message: "the change made while the watch was down arrives" },
    );

    // A dropped watch whose resourceVersion is compacted away meanwhile: 410 Gone, relist.
    server.pauseWatches();
    server.dropWatches();
    const ratingsPod = platform.pods.find((p) => p.metadata.labels.app === "ratings")!;
    const ratings = platform.services.find((s) => s.metadata.name === "ratings")!;
    const replacement = {
      ...podOf(
        {
          metadata: { name: "ratings-v1", namespace: "default" },
          spec: {
            template: {
              metadata: { labels: { app: "ratings", version: "v1" } },
              spec: { serviceAccountName: "bookinfo-ratings", containers: [] },
            },
          },
        },
        41,
        "10.244.9.41",
        "node-a",
      ),
    };
    server.delete({
      apiVersion: "v1",
      kind: "Pod",
      name: String(ratingsPod.metadata?.name),
      namespace: "default",
    });
    server.apply(replacement);
    server.apply(sliceOf(ratings, [replacement]));
    server.compact();
    server.resumeWatches();

    await eventually(() => lists() > listsBefore, { message: "the informers relisted", timeoutMs: 20_000 });
    await eventually(
      async () => {
        const shard = (await client.endpoints()).get(epKey("ratings"));
        return shard?.endpoints.length === 1 && shard.endpoints[0]?.address === "10.244.9.41";
      },
      { message: "ratings converges on the replacement pod", timeoutMs: 20_000 },
    );
    const all = await client.endpoints();
    for (const [key, shard] of all) {
      const addresses = shard.endpoints.map((e) => e.address);
      assert.equal(new Set(addresses).size, addresses.length, `no duplicate endpoint in ${key}`);
    }
    assert.deepEqual(
      all
        .get(epKey("reviews"))
        ?.endpoints.map((e) => e.labels.version)
        .sort(),
      ["v1", "v2", "v2", "v3"],
      "no reviews endpoint lost",
    );
    assert.equal(all.get(epKey("details"))?.endpoints.length, 1);
    const after = await (await client.bus.bucket(Buckets.endpoints)).get(epKey("productpage"));
    assert.equal(after?.revision, endpoints?.revision, "an unchanged shard is not rewritten by the relist");
  });

  it("removes a deleted Service's keys from both buckets", async () => {
    const { server } = cluster;
    server.delete({ apiVersion: "v1", kind: "Service", name: "details", namespace: "default" });
    await eventually(
      async () => {
        const [services, endpoints] = await Promise.all([client.services(), client.endpoints()]);
        return !services.has(serviceKey("default", host("details"))) && !endpoints.has(epKey("details"));
      },
      { message: "details is gone from sextant-services and sextant-endpoints" },
    );
    assert.equal((await client.services()).size, 3);
  });

  it("serves the registry on /debug/registryz", async () => {
    const body = (await (
      await fetch(`${discovery.url}/debug/registryz`, { headers: DEBUG_HEADERS })
    ).json()) as Obj;
    assert.equal(body.leader.leader, true);
    assert.deepEqual(
      body.services.map((s: Obj) => s.hostname),
      ["productpage", "ratings", "reviews"].map(host),
    );
    assert.ok(body.endpoints.length >= 3);
    const metrics = await (await fetch(`${discovery.url}/metrics`)).text();
    assert.match(metrics, /sextant_discovery_leader\{service="discovery"\} 1/);
    assert.match(
      metrics,
      /sextant_discovery_kv_writes_total\{bucket="endpoints",op="put",service="discovery"\}/,
    );
  });
});
