import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { Buckets, encodeKey, Subjects } from "@sextant/bus";
import { Registry } from "@sextant/observability";
import type { NackEvent } from "@sextant/proto";
import { Cluster, ClusterLoadAssignment, Listener, RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import { DEBUG_HEADERS, eventually, metricValue } from "@sextant/testing";
import { XdsMetrics } from "../src/server/metrics.js";
import { DeltaTestClient, namesOf, versionsOf } from "./delta-client.js";
import {
  AdsTestClient,
  grpcNode,
  pushForSuite,
  putConfig,
  registerService,
  startDiscoveryServer,
} from "./harness.js";

/** Each test has hosts of its own, so that one test's config changes send nothing to another's streams. */
const HOSTS = [
  "sub",
  "gone",
  "unsub-a",
  "unsub-b",
  "recon-a",
  "recon-b",
  "nack",
  "stale",
  "eds",
  "warm",
  "dump",
];
const host = (name: string) => `${name}.default.svc.cluster.local`;
/** The listener and route configuration of a host's port 9080. */
const listener = (name: string) => `${host(name)}:9080`;
const cluster = (name: string, subset = "") => `outbound|9080|${subset}|${host(name)}`;

type Syncz = Array<{
  proxyId: string;
  protocol: string;
  types: Record<
    string,
    { versionSent: string; versionAcked: string; resourceNames: string[]; lastNack?: { message: string } }
  >;
}>;

describe("Delta ADS protocol", () => {
  const push = pushForSuite({
    seed: async (bus) => {
      for (const name of HOSTS) {
        await registerService(bus, host(name), { name: "grpc", number: 9080 }, [
          { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
        ]);
      }
    },
  });
  const connect = () => push.closeAfter(new DeltaTestClient(push.xdsAddress));
  /** Opens a stream for pod and subscribes to names of a type; returns the first response. */
  const subscribe = async (client: DeltaTestClient, pod: string, typeUrl: string, names: string[]) => {
    client.send({ node: grpcNode(pod), typeUrl, resourceNamesSubscribe: names });
    return client.next();
  };
  let probes = 0;
  /**
   * Proves that nothing was sent in answer to what came before it: a
   * stream's requests are handled in order, so the next response must be the
   * answer to this new subscription (to a name that does not exist), not a
   * late response to something earlier.
   */
  const assertNothingBefore = async (client: DeltaTestClient) => {
    const probe = `probe-${++probes}.default.svc.cluster.local:1`;
    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNamesSubscribe: [probe] });
    const response = await client.next();
    assert.equal(response.typeUrl, TypeUrl.RouteConfiguration, "something else was sent first");
    assert.deepEqual(response.removedResources, [probe], "something else was sent first");
    assert.equal(client.unread, 0);
    return response;
  };
  /** Reads responses until one carries the resource (config reaches push a little after it is stored). */
  const untilSent = async (client: DeltaTestClient, name: string) => {
    for (;;) {
      const response = await client.next();
      client.ack(response);
      if (response.resources.some((r) => r.name === name)) return response;
    }
  };
  const syncz = async (pod: string) =>
    eventually(async () => {
      const proxies = (await (
        await fetch(`${push.httpUrl}/debug/syncz`, { headers: DEBUG_HEADERS })
      ).json()) as Syncz;
      return proxies.find((p) => p.proxyId === grpcNode(pod).id);
    });
  const metric = async (name: string, ...labels: string[]) =>
    metricValue(await (await fetch(`${push.httpUrl}/metrics`)).text(), name, ...labels);
  const deleteConfig = async (kind: string, name: string) =>
    (await push.bus.bucket(Buckets.config)).delete(encodeKey(kind, "default", name));

  it("answers a subscription of each type with the named resources, their versions, a system version and a nonce", async () => {
    const client = connect();
    const wanted: Array<[string, string, (bytes: Uint8Array) => { name?: string; clusterName?: string }]> = [
      [TypeUrl.Cluster, cluster("sub"), (bytes) => Cluster.decode(bytes)],
      [TypeUrl.ClusterLoadAssignment, cluster("sub"), (bytes) => ClusterLoadAssignment.decode(bytes)],
      [TypeUrl.Listener, listener("sub"), (bytes) => Listener.decode(bytes)],
      [TypeUrl.RouteConfiguration, listener("sub"), (bytes) => RouteConfiguration.decode(bytes)],
    ];
    const nonces = new Set<string>();
    for (const [typeUrl, name, decode] of wanted) {
      const response = await subscribe(client, "subscriber", typeUrl, [name]);
      assert.equal(response.typeUrl, typeUrl);
      assert.ok(response.nonce && response.systemVersionInfo);
      nonces.add(response.nonce);
      assert.deepEqual(response.removedResources, []);
      assert.deepEqual(namesOf(response), [name]);
      const [resource] = response.resources;
      assert.match(resource?.version ?? "", /^[0-9a-f]{16}$/);
      assert.equal(resource?.resource?.typeUrl, typeUrl);
      const decoded = decode(resource!.resource!.value);
      assert.equal(decoded.name ?? decoded.clusterName, name);
      client.ack(response);
    }
    assert.equal(nonces.size, wanted.length);
    // ACKs get no response.
    await assertNothingBefore(client);
    const status = await syncz("subscriber");
    assert.equal(status.protocol, "delta");
    await eventually(async () => {
      const types = (await syncz("subscriber")).types;
      return types[TypeUrl.Listener]?.versionAcked === types[TypeUrl.Listener]?.versionSent;
    });
  });

  it("tells the proxy at once that a named resource does not exist", async () => {
    const client = connect();
    const response = await subscribe(client, "asker", TypeUrl.Listener, [listener("nowhere")]);
    assert.deepEqual(response.resources, []);
    assert.deepEqual(response.removedResources, [listener("nowhere")]);
  });

  it("removes a resource when its config is deleted, and sends it again when it comes back", async () => {
    const subsetRule = {
      kind: "DestinationRule",
      name: "gone",
      spec: { host: "gone", subsets: [{ name: "v1", labels: { version: "v1" } }] },
    };
    await putConfig(push.bus, subsetRule);
    const client = connect();
    client.send({
      node: grpcNode("remover"),
      typeUrl: TypeUrl.Cluster,
      resourceNamesSubscribe: [cluster("gone"), cluster("gone", "v1")],
    });
    await untilSent(client, cluster("gone", "v1"));

    await deleteConfig("DestinationRule", "gone");
    const removal = await client.next();
    assert.equal(removal.typeUrl, TypeUrl.Cluster);
    assert.deepEqual(removal.removedResources, [cluster("gone", "v1")]);
    // The cluster without a subset did not change, so it is not sent again.
    assert.deepEqual(removal.resources, []);
    client.ack(removal);

    await putConfig(push.bus, subsetRule);
    const back = await client.next();
    assert.deepEqual(namesOf(back), [cluster("gone", "v1")]);
    assert.deepEqual(back.removedResources, []);
  });

  it("sends nothing more for a resource once it is unsubscribed", async () => {
    const client = connect();
    const first = await subscribe(client, "unsubscriber", TypeUrl.RouteConfiguration, [
      listener("unsub-a"),
      listener("unsub-b"),
    ]);
    assert.deepEqual(namesOf(first), [listener("unsub-a"), listener("unsub-b")]);
    client.ack(first);
    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNamesUnsubscribe: [listener("unsub-b")] });
    await eventually(
      async () => !JSON.stringify((await syncz("unsubscriber")).types).includes(listener("unsub-b")),
    );
    // A VirtualService that changes both routes.
    await putConfig(push.bus, {
      kind: "VirtualService",
      name: "unsub",
      spec: {
        hosts: ["unsub-a", "unsub-b"],
        http: [{ route: [{ destination: { host: "unsub-a" } }], timeout: "3s" }],
      },
    });
    const pushed = await client.next();
    assert.deepEqual(namesOf(pushed), [listener("unsub-a")]);
    assert.deepEqual(pushed.removedResources, []);
    client.ack(pushed);
    await assertNothingBefore(client);
  });

  it("after a reconnect with initial_resource_versions, sends only what changed and removes what is gone", async () => {
    const names = [listener("recon-a"), listener("recon-b")];
    const first = connect();
    const before = await subscribe(first, "reconnecter", TypeUrl.RouteConfiguration, names);
    const held = versionsOf(before);
    assert.deepEqual(Object.keys(held).sort(), names);
    first.close();

    // While the proxy is away, recon-a's routes change; an observer shows when push has the change.
    const observer = connect();
    const seen = await subscribe(observer, "observer", TypeUrl.RouteConfiguration, [listener("recon-a")]);
    observer.ack(seen);
    await putConfig(push.bus, {
      kind: "VirtualService",
      name: "recon-a",
      spec: { hosts: ["recon-a"], http: [{ route: [{ destination: { host: "recon-b" } }] }] },
    });
    const changed = await observer.next();
    assert.notEqual(versionsOf(changed)[listener("recon-a")], held[listener("recon-a")]);

    // It also held a route that no longer exists.
    const gone = listener("deleted-while-away");
    const second = connect();
    second.send({
      node: grpcNode("reconnecter"),
      typeUrl: TypeUrl.RouteConfiguration,
      resourceNamesSubscribe: [...names, gone],
      initialResourceVersions: { ...held, [gone]: "0123456789abcdef" },
    });
    const resumed = await second.next();
    assert.deepEqual(namesOf(resumed), [listener("recon-a")]);
    assert.deepEqual(versionsOf(resumed), versionsOf(changed));
    assert.deepEqual(resumed.removedResources, [gone]);

    // A proxy that holds everything at the current versions is answered with nothing.
    const third = connect();
    third.send({
      node: grpcNode("reconnecter-2"),
      typeUrl: TypeUrl.RouteConfiguration,
      resourceNamesSubscribe: names,
      initialResourceVersions: { ...held, ...versionsOf(changed) },
    });
    const nothing = await third.next();
    assert.deepEqual(nothing.resources, []);
    assert.deepEqual(nothing.removedResources, []);
    // config_dump still shows what the proxy holds.
    type Dump = { configs: Array<{ typeUrl: string; resources: Array<{ name: string }> }> };
    const dump = (await (
      await fetch(
        `${push.httpUrl}/debug/config_dump?proxyID=${encodeURIComponent(grpcNode("reconnecter-2").id)}`,
        { headers: DEBUG_HEADERS },
      )
    ).json()) as Dump;
    assert.deepEqual(dump.configs[0]?.resources.map((r) => r.name).sort(), names);
  });

  it("records a NACK, reports it, and does not push the rejected resource again", async () => {
    const events: NackEvent[] = [];
    const subscription = push.bus.subject(Subjects.nack).subscribe((event) => {
      events.push(event.value);
    });
    await push.bus.nc.flush();
    const client = connect();
    const routes = await subscribe(client, "nacker", TypeUrl.RouteConfiguration, [listener("nack")]);
    client.ack(routes);
    const listeners = await subscribe(client, "nacker", TypeUrl.Listener, [listener("nack")]);
    client.send({
      typeUrl: TypeUrl.Listener,
      responseNonce: listeners.nonce,
      errorDetail: { code: 3, message: "listener rejected for the test", details: [] },
    });
    await assertNothingBefore(client);
    const status = await syncz("nacker");
    assert.equal(status.types[TypeUrl.Listener]?.lastNack?.message, "listener rejected for the test");
    const event = await eventually(() => events.find((e) => e.proxyId === grpcNode("nacker").id));
    subscription.unsubscribe();
    assert.equal(event.typeUrl, TypeUrl.Listener);
    assert.deepEqual(event.resourceNames, [listener("nack")]);
    assert.ok((await metric("pilot_total_xds_rejects", 'type="lds"')) > 0);

    // A change pushes the routes it alters, and not the rejected listener, which it does not alter.
    await putConfig(push.bus, {
      kind: "VirtualService",
      name: "nack",
      spec: { hosts: ["nack"], http: [{ route: [{ destination: { host: "eds" } }] }] },
    });
    const pushed = await client.next();
    assert.equal(pushed.typeUrl, TypeUrl.RouteConfiguration);
    assert.deepEqual(namesOf(pushed), [listener("nack")]);
    client.ack(pushed);
    await assertNothingBefore(client);
  });

  it("ignores the ACK or NACK of a stale nonce, but not its subscription changes", async () => {
    // NaN (no sample yet) counts as 0.
    const expiredBefore = (await metric("pilot_xds_expired_nonce", 'type="lds"')) || 0;
    const client = connect();
    const first = await subscribe(client, "stale", TypeUrl.Listener, [listener("stale")]);
    client.send({ typeUrl: TypeUrl.Listener, resourceNamesSubscribe: [listener("sub")] });
    const second = await client.next();
    assert.deepEqual(namesOf(second), [listener("sub")]);
    // The first nonce is stale now: its NACK is not recorded.
    client.send({
      typeUrl: TypeUrl.Listener,
      responseNonce: first.nonce,
      errorDetail: { code: 3, message: "a stale rejection", details: [] },
    });
    await assertNothingBefore(client);
    assert.equal((await syncz("stale")).types[TypeUrl.Listener]?.lastNack, undefined);
    assert.ok((await metric("pilot_xds_expired_nonce", 'type="lds"')) > expiredBefore);
    // A stale request that subscribes is still answered.
    client.send({
      typeUrl: TypeUrl.Listener,
      responseNonce: first.nonce,
      resourceNamesSubscribe: [listener("eds")],
    });
    assert.deepEqual(namesOf(await client.next()), [listener("eds")]);
  });

  it("sends an endpoint-only change as the one load assignment that changed", async () => {
    const client = connect();
    for (const typeUrl of [TypeUrl.Cluster, TypeUrl.ClusterLoadAssignment]) {
      client.ack(await subscribe(client, "eds-watcher", typeUrl, [cluster("eds"), cluster("sub")]));
    }
    await registerService(push.bus, host("eds"), { name: "grpc", number: 9080 }, [
      { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
      { address: "10.1.0.2", port: 9080, labels: { version: "v2" } },
    ]);
    const pushed = await client.next();
    assert.equal(pushed.typeUrl, TypeUrl.ClusterLoadAssignment);
    assert.deepEqual(namesOf(pushed), [cluster("eds")]);
    const addresses = ClusterLoadAssignment.decode(pushed.resources[0]!.resource!.value).endpoints.flatMap(
      (locality) => locality.lbEndpoints.map((lb) => lb.endpoint?.address?.socketAddress?.address),
    );
    assert.deepEqual(addresses.sort(), ["10.1.0.1", "10.1.0.2"]);
    client.ack(pushed);
    await assertNothingBefore(client);
  });

  it("sends the endpoints of a changed cluster with it, so that Envoy can warm it", async () => {
    const client = connect();
    for (const typeUrl of [TypeUrl.Cluster, TypeUrl.ClusterLoadAssignment]) {
      client.ack(await subscribe(client, "warmer", typeUrl, [cluster("warm")]));
    }
    await putConfig(push.bus, {
      kind: "DestinationRule",
      name: "warm",
      spec: { host: "warm", trafficPolicy: { outlierDetection: { consecutive5xxErrors: 7 } } },
    });
    const clusters = await client.next();
    assert.equal(clusters.typeUrl, TypeUrl.Cluster);
    assert.deepEqual(namesOf(clusters), [cluster("warm")]);
    const endpoints = await client.next();
    assert.equal(endpoints.typeUrl, TypeUrl.ClusterLoadAssignment);
    assert.deepEqual(namesOf(endpoints), [cluster("warm")]);
  });

  it("keeps a wildcard apart from the names beside it", async () => {
    const client = connect();
    // gRPC generators have nothing for a wildcard, but the subscription is answered.
    const wildcard = await subscribe(client, "wildcarder", TypeUrl.Listener, ["*"]);
    assert.deepEqual(wildcard.resources, []);
    assert.deepEqual(wildcard.removedResources, []);
    client.send({ typeUrl: TypeUrl.Listener, resourceNamesSubscribe: [listener("dump")] });
    assert.deepEqual(namesOf(await client.next()), [listener("dump")]);
    // Unsubscribing a name beside a wildcard is answered: is it still in the wildcard? Here, no.
    client.send({ typeUrl: TypeUrl.Listener, resourceNamesUnsubscribe: [listener("dump")] });
    const dropped = await client.next();
    assert.deepEqual(dropped.resources, []);
    assert.deepEqual(dropped.removedResources, [listener("dump")]);
  });

  it("takes an empty first request for clusters as the legacy wildcard, and ignores types it has no generator for", async () => {
    const client = connect();
    const legacy = await subscribe(client, "legacy", TypeUrl.Cluster, []);
    assert.deepEqual(legacy.resources, []);
    assert.deepEqual(legacy.removedResources, []);
    client.send({ typeUrl: TypeUrl.Secret, resourceNamesSubscribe: ["default"] });
    await assertNothingBefore(client);
    assert.equal(client.error, undefined);
    const { types } = await syncz("legacy");
    assert.deepEqual(types[TypeUrl.Cluster]?.resourceNames, ["*"]);
    assert.equal(types[TypeUrl.Secret], undefined);
  });

  it("shows a delta stream in /debug/syncz and /debug/config_dump, with everything its responses sent", async () => {
    const client = connect();
    client.ack(await subscribe(client, "dumped", TypeUrl.Listener, [listener("dump")]));
    client.send({ typeUrl: TypeUrl.Listener, resourceNamesSubscribe: [listener("sub")] });
    const second = await client.next();
    assert.deepEqual(namesOf(second), [listener("sub")]);
    client.ack(second);
    const status = await syncz("dumped");
    assert.equal(status.protocol, "delta");
    assert.equal(status.types[TypeUrl.Listener]?.versionSent, second.systemVersionInfo);
    type Dump = { configs: Array<{ typeUrl: string; version: string; resources: Array<{ name: string }> }> };
    const dump = (await (
      await fetch(`${push.httpUrl}/debug/config_dump?proxyID=${encodeURIComponent(grpcNode("dumped").id)}`, {
        headers: DEBUG_HEADERS,
      })
    ).json()) as Dump;
    assert.equal(dump.configs[0]?.typeUrl, TypeUrl.Listener);
    assert.deepEqual(dump.configs[0]?.resources.map((r) => r.name).sort(), [
      listener("dump"),
      listener("sub"),
    ]);
  });

  it("refuses a node id it cannot read, with INVALID_ARGUMENT", async () => {
    const client = connect();
    client.send({
      node: { ...grpcNode(), id: "not-an-istio-node-id" },
      typeUrl: TypeUrl.Listener,
      resourceNamesSubscribe: [listener("sub")],
    });
    await eventually(() => client.error);
    assert.equal(client.error?.code, GrpcStatus.INVALID_ARGUMENT);
  });

  it("serves SotW and delta streams of one node side by side", async () => {
    const sotw = push.adsClient();
    sotw.send({ node: grpcNode("both"), typeUrl: TypeUrl.Listener, resourceNames: [listener("sub")] });
    const delta = connect();
    const incremental = await subscribe(delta, "both", TypeUrl.Listener, [listener("sub")]);
    const full = await sotw.next();
    assert.deepEqual(
      full.resources,
      incremental.resources.map((r) => r.resource),
    );
  });
});

describe("Delta ADS authorization", () => {
  it("refuses a stream its authorizer refuses (XDS_AUTH), as for SotW", async () => {
    const registry = new Registry();
    const connected: string[] = [];
    const server = await startDiscoveryServer(
      {
        metrics: new XdsMetrics(registry),
        context: () => undefined,
        events: {
          connected: (connection) => connected.push(connection.proxy.id),
          disconnected: () => {},
          changed: () => {},
          nacked: () => {},
        },
      },
      (_stream, proxy) =>
        proxy.namespace === "default" ? "authorization failed: a refusal for the test" : undefined,
    );
    const delta = new DeltaTestClient(server.address);
    const sotw = new AdsTestClient(server.address);
    try {
      delta.send({ node: grpcNode(), typeUrl: TypeUrl.Listener, resourceNamesSubscribe: [listener("sub")] });
      sotw.send({ node: grpcNode(), typeUrl: TypeUrl.Listener, resourceNames: [listener("sub")] });
      for (const client of [delta, sotw]) {
        await eventually(() => client.error);
        assert.equal(client.error?.code, GrpcStatus.PERMISSION_DENIED);
        assert.match(client.error?.message ?? "", /a refusal for the test/);
      }
      assert.deepEqual(connected, []);
      assert.equal(metricValue(await registry.metrics(), "sextant_xds_auth_failures"), 2);
    } finally {
      delta.close();
      sotw.close();
      await server.close();
    }
  });
});
