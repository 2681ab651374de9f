import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { Buckets, encodeKey, Subjects } from "@sextant/bus";
import {
  ClusterLoadAssignment,
  type DiscoveryResponse,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";
import { DEBUG_HEADERS, eventually, metricValue } from "@sextant/testing";
import { AdsTestClient, grpcNode, pushForSuite, putConfig, registerService, startPush } from "./harness.js";

const HOST = "reviews.default.svc.cluster.local";
const LISTENER = `${HOST}:9080`;

describe("ADS protocol", () => {
  const push = pushForSuite({
    seed: async (bus) => {
      await registerService(bus, HOST, { name: "grpc", number: 9080 }, [
        { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
      ]);
      await registerService(bus, "ratings.default.svc.cluster.local", { name: "grpc", number: 9080 }, [
        { address: "10.1.0.9", port: 9080, labels: { version: "v1" } },
      ]);
    },
  });
  const connect = () => push.adsClient();
  /** Subscribes to the listener and returns the first response. */
  const subscribe = async (client: AdsTestClient, pod = "client-1", metadata = {}) => {
    client.send({ node: grpcNode(pod, metadata), typeUrl: TypeUrl.Listener, resourceNames: [LISTENER] });
    return client.next();
  };
  /**
   * Proves that nothing was sent in answer to the requests before it: a
   * stream's requests are handled in order, so the next response must be the
   * answer to this new subscription, not a late answer to an earlier request.
   */
  const assertNothingBefore = async (client: AdsTestClient) => {
    client.send({ typeUrl: TypeUrl.RouteConfiguration, resourceNames: [LISTENER] });
    const probe = await client.next();
    assert.equal(probe.typeUrl, TypeUrl.RouteConfiguration, "an earlier request was answered");
    assert.equal(client.unread, 0);
    return probe;
  };

  it("answers a new subscription with the named resource, a version and a nonce", async () => {
    const client = connect();
    const response = await subscribe(client);
    assert.equal(response.typeUrl, TypeUrl.Listener);
    assert.ok(response.nonce && response.versionInfo);
    assert.deepEqual(
      response.resources.map((r) => Listener.decode(r.value).name),
      [LISTENER],
    );
  });

  it("does not answer an ACK of the same names, nor a stale nonce", async () => {
    const client = connect();
    const first = await subscribe(client);
    client.send({
      typeUrl: TypeUrl.Listener,
      resourceNames: [LISTENER],
      versionInfo: first.versionInfo,
      responseNonce: first.nonce,
    });
    client.send({
      typeUrl: TypeUrl.Listener,
      resourceNames: [LISTENER, "ratings.default.svc.cluster.local:9080"],
      versionInfo: first.versionInfo,
      responseNonce: "not-a-nonce-we-sent",
    });
    await assertNothingBefore(client);
  });

  it("answers a change of names with the full new set", async () => {
    const client = connect();
    const first = await subscribe(client);
    const both = [LISTENER, "ratings.default.svc.cluster.local:9080"];
    client.send({
      typeUrl: TypeUrl.Listener,
      resourceNames: both,
      versionInfo: first.versionInfo,
      responseNonce: first.nonce,
    });
    const second = await client.next();
    assert.deepEqual(second.resources.map((r) => Listener.decode(r.value).name).sort(), both.sort());
    assert.notEqual(second.versionInfo, first.versionInfo);
  });

  it("records a NACK, does not push it again, and pushes the next change", async () => {
    const client = connect();
    const pod = "nacker";
    const first = await subscribe(client, pod);
    client.send({
      typeUrl: TypeUrl.Listener,
      resourceNames: [LISTENER],
      versionInfo: "",
      responseNonce: first.nonce,
      errorDetail: { code: 3, message: "listener rejected for the test", details: [] },
    });
    const routes = await assertNothingBefore(client);
    const syncz = await eventually(async () => {
      const proxies = (await (
        await fetch(`${push.httpUrl}/debug/syncz`, { headers: DEBUG_HEADERS })
      ).json()) as Array<{
        proxyId: string;
        types: Record<string, { lastNack?: { message: string; version: string } }>;
      }>;
      return proxies.find((p) => p.proxyId === grpcNode(pod).id);
    });
    assert.equal(syncz.types[TypeUrl.Listener]?.lastNack?.message, "listener rejected for the test");
    assert.equal(syncz.types[TypeUrl.Listener]?.lastNack?.version, first.versionInfo);

    // A config change produces new routes, which are pushed.
    client.send({
      typeUrl: TypeUrl.RouteConfiguration,
      resourceNames: [LISTENER],
      versionInfo: routes.versionInfo,
      responseNonce: routes.nonce,
    });
    await putConfig(push.bus, {
      kind: "VirtualService",
      name: "reviews-nack",
      spec: { hosts: ["reviews"], http: [{ route: [{ destination: { host: "ratings" } }] }] },
    });
    const pushed = await client.next();
    assert.equal(pushed.typeUrl, TypeUrl.RouteConfiguration);
    const route = RouteConfiguration.decode(pushed.resources[0]!.value).virtualHosts[0]?.routes[0];
    assert.equal(route?.route?.cluster, "outbound|9080||ratings.default.svc.cluster.local");
  });

  it("ignores a type it has no generator for and keeps the stream", async () => {
    const client = connect();
    await subscribe(client);
    client.send({
      typeUrl: "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret",
      resourceNames: ["default"],
    });
    await assertNothingBefore(client);
    assert.equal(client.error, undefined);
  });

  it("refuses a node id it cannot read, with INVALID_ARGUMENT", async () => {
    const client = connect();
    client.send({
      node: { ...grpcNode(), id: "not-an-istio-node-id" },
      typeUrl: TypeUrl.Listener,
      resourceNames: [LISTENER],
    });
    await eventually(() => client.error);
    assert.equal(client.error?.code, GrpcStatus.INVALID_ARGUMENT);
    assert.match(client.error?.message ?? "", /not of the form/);
  });

  it("answers a reconnect with the same version, so nothing changes for the proxy", async () => {
    const first = connect();
    const before = await subscribe(first, "reconnecter");
    first.close();
    const second = connect();
    second.send({
      node: grpcNode("reconnecter"),
      typeUrl: TypeUrl.Listener,
      resourceNames: [LISTENER],
      versionInfo: before.versionInfo,
    });
    const after = await second.next();
    assert.equal(after.versionInfo, before.versionInfo);
    assert.deepEqual(after.resources, before.resources);
  });

  it("serves a second stream from the same node, and keeps its status until the last stream closes", async () => {
    const proxyStatus = await push.bus.bucket(Buckets.proxyStatus);
    const key = encodeKey(grpcNode("twice").id);
    const a = connect();
    const b = connect();
    await subscribe(a, "twice");
    await subscribe(b, "twice");
    const status = await eventually(async () => {
      const entry = await proxyStatus.get(key);
      return entry?.value.types[TypeUrl.Listener] && entry.value;
    });
    assert.equal(status.generator, "grpc", "a proxyless client's status says so (analysis reads it)");
    a.close();
    await assertNothingBefore(b);
    assert.ok(await proxyStatus.get(key), "status removed while a stream was still open");
    b.close();
    await eventually(async () => !(await proxyStatus.get(key)), {
      message: "status not removed after the last stream",
    });
  });

  // Only the mTLS port proves an identity (test-e2e/test/registration.test.ts
  // registers through it); a plaintext client could claim any group and address.
  it("serves a plaintext proxy naming a WorkloadGroup but does not register it, and counts the refusal", async () => {
    const events: string[] = [];
    const registrations = push.bus.subject(Subjects.registration).subscribe(() => {
      events.push("registration");
    });
    const nacks = push.bus.subject(Subjects.nack).subscribe(() => {
      events.push("nack");
    });
    await push.bus.nc.flush();
    const client = connect();
    const first = await subscribe(client, "vm-1", {
      AUTO_REGISTER_GROUP: "reviews-vms",
      SERVICE_ACCOUNT: "reviews",
      LABELS: { app: "reviews" },
    });
    assert.equal(first.resources.length, 1, "the proxy is served its config");
    const refused = async () =>
      metricValue(
        await (await fetch(`${push.httpUrl}/metrics`)).text(),
        "sextant_registration_refused_total",
        'reason="plaintext"',
      );
    assert.equal(await refused(), 1);
    // push publishes its events in order on one connection: a NACK published
    // after the stream opened arrives after any registration would have.
    client.send({
      typeUrl: TypeUrl.Listener,
      resourceNames: [LISTENER],
      versionInfo: "",
      responseNonce: first.nonce,
      errorDetail: { code: 3, message: "a sentinel NACK", details: [] },
    });
    await eventually(() => events.includes("nack"));
    client.close();
    registrations.unsubscribe();
    nacks.unsubscribe();
    assert.deepEqual(events, ["nack"], "no registration event for a plaintext stream");
  });

  it("gives the same versions from two replicas with the same inputs", async () => {
    const other = await startPush(push.natsUrl);
    try {
      const responses: DiscoveryResponse[] = [];
      for (const address of [push.xdsAddress, other.xdsAddress]) {
        const client = push.closeAfter(new AdsTestClient(address));
        client.send({
          node: grpcNode("replica-check"),
          typeUrl: TypeUrl.RouteConfiguration,
          resourceNames: [LISTENER],
        });
        responses.push(await client.next());
      }
      assert.equal(responses[0]?.versionInfo, responses[1]?.versionInfo);
      assert.deepEqual(responses[0]?.resources, responses[1]?.resources);
    } finally {
      await other.stop();
    }
  });

  it("pushes an endpoint-only change as EDS, and only to the proxies that watch that cluster", async () => {
    const cluster = `outbound|9080||${HOST}`;
    const watching = connect();
    const other = connect();
    const eds = async (client: AdsTestClient, pod: string, name: string) => {
      client.send({ node: grpcNode(pod), typeUrl: TypeUrl.ClusterLoadAssignment, resourceNames: [name] });
      const response = await client.next();
      client.send({
        typeUrl: TypeUrl.ClusterLoadAssignment,
        resourceNames: [name],
        versionInfo: response.versionInfo,
        responseNonce: response.nonce,
      });
      return response;
    };
    const first = await eds(watching, "eds-watcher", cluster);
    await eds(other, "eds-other", "outbound|9080||ratings.default.svc.cluster.local");
    await registerService(push.bus, HOST, { name: "grpc", number: 9080 }, [
      { address: "10.1.0.1", port: 9080, labels: { version: "v1" } },
      { address: "10.1.0.2", port: 9080, labels: { version: "v2" } },
    ]);
    const pushed = await watching.next();
    assert.equal(pushed.typeUrl, TypeUrl.ClusterLoadAssignment);
    assert.notEqual(pushed.versionInfo, first.versionInfo);
    const addresses = ClusterLoadAssignment.decode(pushed.resources[0]!.value).endpoints.flatMap((locality) =>
      locality.lbEndpoints.map((lb) => lb.endpoint?.address?.socketAddress?.address),
    );
    assert.deepEqual(addresses.sort(), ["10.1.0.1", "10.1.0.2"]);
    // The other proxy's first response after the change is the answer to its probe, not an EDS push.
    other.send({ typeUrl: TypeUrl.Listener, resourceNames: [LISTENER] });
    assert.equal((await other.next()).typeUrl, TypeUrl.Listener);
  });

  it("sends an endpoint-only change only the ClusterLoadAssignments that changed (Istio's partial EDS push)", async () => {
    const reviews = `outbound|9080||${HOST}`;
    const ratingsHost = "ratings.default.svc.cluster.local";
    const ratings = `outbound|9080||${ratingsHost}`;
    const client = connect();
    client.send({
      node: grpcNode("eds-both"),
      typeUrl: TypeUrl.ClusterLoadAssignment,
      resourceNames: [reviews, ratings],
    });
    const first = await client.next();
    assert.deepEqual(first.resources.map((r) => ClusterLoadAssignment.decode(r.value).clusterName).sort(), [
      ratings,
      reviews,
    ]);
    client.ack(first, [reviews, ratings]);
    await registerService(push.bus, ratingsHost, { name: "grpc", number: 9080 }, [
      { address: "10.1.0.9", port: 9080, labels: { version: "v1" } },
      { address: "10.1.0.10", port: 9080, labels: { version: "v1" } },
    ]);
    const pushed = await client.next();
    assert.equal(pushed.typeUrl, TypeUrl.ClusterLoadAssignment);
    assert.notEqual(pushed.versionInfo, first.versionInfo);
    assert.deepEqual(
      pushed.resources.map((r) => ClusterLoadAssignment.decode(r.value).clusterName),
      [ratings],
      "only the changed cluster's endpoints",
    );
    client.ack(pushed, [reviews, ratings]);
    // A change of subscription is answered with the whole set, as any request.
    client.send({
      typeUrl: TypeUrl.ClusterLoadAssignment,
      resourceNames: [reviews],
      versionInfo: pushed.versionInfo,
      responseNonce: pushed.nonce,
    });
    const narrowed = await client.next();
    assert.deepEqual(
      narrowed.resources.map((r) => ClusterLoadAssignment.decode(r.value).clusterName),
      [reviews],
    );
  });

  it("dumps what a proxy was last sent, and counts pushes, rejects and streams under istiod's metric names", async () => {
    const client = connect();
    await subscribe(client, "dumped");
    type Dump = { configs: Array<{ typeUrl: string; resources: Array<{ name: string }> }> };
    const response = await fetch(
      `${push.httpUrl}/debug/config_dump?proxyID=${encodeURIComponent(grpcNode("dumped").id)}`,
      { headers: DEBUG_HEADERS },
    );
    assert.equal(response.status, 200);
    const dump = (await response.json()) as Dump;
    assert.equal(dump.configs[0]?.typeUrl, TypeUrl.Listener);
    assert.equal(dump.configs[0]?.resources[0]?.name, LISTENER);
    assert.equal(
      (await fetch(`${push.httpUrl}/debug/config_dump?proxyID=nobody`, { headers: DEBUG_HEADERS })).status,
      404,
    );

    const text = await (await fetch(`${push.httpUrl}/metrics`)).text();
    const value = (name: string, ...labels: string[]) => metricValue(text, name, ...labels);
    assert.ok(value("pilot_xds_pushes", 'type="lds"') > 0);
    assert.ok(value("pilot_total_xds_rejects", 'type="lds"') > 0);
    assert.ok(value("pilot_xds_expired_nonce", 'type="lds"') > 0);
    assert.ok(value("pilot_xds") > 0);
    assert.ok(value("pilot_xds_config_size_bytes_count", 'type="lds"') > 0);
    // Convergence is observed for pushes caused by a change (the NACK test made one).
    assert.ok(value("pilot_proxy_convergence_time_count") > 0);
  });
});
