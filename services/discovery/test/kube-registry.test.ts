// The Kubernetes registry as Istio builds it (issue 18 §4), against the fake
// kube-apiserver: each case names the istiod code whose behaviour it checks.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type Endpoint, HealthStatus, Protocol, Resolution } from "@sextant/proto";
import { eventually, type FakeKubeApiServer, startFakeKubeApiServer } from "@sextant/testing";
import { endpointsKey, serviceKey } from "../src/registry/keys.js";
import {
  type DiscoveryFixture,
  type Obj,
  startDiscovery,
  startNatsWithClient,
  writeKubeconfig,
} from "./harness.js";

const NS = "apps";
const SHARD = "kubernetes/Kubernetes";
const host = (name: string) => `${name}.${NS}.svc.cluster.local`;

const namespace = (name: string, labels: Record<string, string> = {}): Obj => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels },
});

const service = (name: string, spec: Obj, labels: Record<string, string> = {}): Obj => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: NS, labels },
  spec,
});

const pod = (name: string, ip: string, node: string, extra: { labels?: Obj; spec?: Obj } = {}): Obj => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: NS, labels: { app: name.replace(/-\d+$/, ""), ...extra.labels } },
  spec: { nodeName: node, containers: [{ name: "app" }], ...extra.spec },
  status: { phase: "Running", podIP: ip, podIPs: [{ ip }], conditions: [{ type: "Ready", status: "True" }] },
});

/** An EndpointSlice of a Service: each endpoint as [pod, conditions]. */
const slice = (serviceName: string, ports: Obj[], endpoints: Array<[Obj, Obj]>): Obj => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: {
    name: `${serviceName}-x1`,
    namespace: NS,
    labels: { "kubernetes.io/service-name": serviceName },
  },
  addressType: "IPv4",
  ports,
  endpoints: endpoints.map(([target, conditions]) => ({
    addresses: [target.status.podIP],
    conditions,
    nodeName: target.spec.nodeName,
    targetRef: { kind: "Pod", name: target.metadata.name, namespace: NS },
  })),
});

const READY = { ready: true, serving: true, terminating: false };
const SERVING_TERMINATING = { ready: false, serving: true, terminating: true };

describe("Kubernetes registry as Istio builds it, against the fake kube-apiserver", () => {
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let server: FakeKubeApiServer;
  let discovery: DiscoveryFixture;

  const serviceOf = async (name: string) => (await client.services()).get(serviceKey(NS, host(name)));
  const endpointsOf = async (name: string): Promise<Endpoint[] | undefined> =>
    (await client.endpoints()).get(endpointsKey(NS, host(name), SHARD))?.endpoints;
  const byAddress = async (name: string) =>
    new Map((await endpointsOf(name))?.map((endpoint) => [endpoint.address, endpoint]));

  // Web runs on two nodes; web-1 is shutting down but still serving.
  const web0 = pod("web-0", "10.10.0.1", "node-a");
  const web1 = pod("web-1", "10.10.0.2", "node-b");
  const webPorts = [
    { name: "http", port: 8080, protocol: "TCP" },
    { name: "udp-stats", port: 8125, protocol: "TCP" },
  ];
  // A StatefulSet's pods under a headless service: db-0 named by its pod
  // name, db-1 by spec.hostname; db-2 names no subdomain.
  const db0 = pod("db-0", "10.10.1.1", "node-a", { spec: { subdomain: "db" } });
  const db1 = pod("db-1", "10.10.1.2", "node-b", { spec: { subdomain: "db", hostname: "primary" } });
  const db2 = pod("db-2", "10.10.1.3", "node-b");
  // A pod on a network of its own.
  const edge0 = pod("edge-0", "10.10.2.1", "node-a", { labels: { "topology.istio.io/network": "net-edge" } });

  before(async () => {
    client = await startNatsWithClient();
    server = await startFakeKubeApiServer({ bookmarkIntervalMs: 500 });
    for (const object of [
      namespace("istio-system", { "topology.istio.io/network": "net-cluster" }),
      // A workload namespace's network label is not where Istio reads a network from.
      namespace(NS, { "topology.istio.io/network": "net-namespace" }),
      web0,
      web1,
      db0,
      db1,
      db2,
      edge0,
      service("web", {
        type: "ClusterIP",
        clusterIP: "10.96.5.1",
        clusterIPs: ["10.96.5.1"],
        internalTrafficPolicy: "Local",
        selector: { app: "web" },
        ports: [
          { name: "http", port: 80, targetPort: 8080, protocol: "TCP" },
          { name: "udp-stats", port: 8125, protocol: "TCP" },
        ],
      }),
      slice("web", webPorts, [
        [web0, READY],
        [web1, SERVING_TERMINATING],
      ]),
      service("db", {
        clusterIP: "None",
        publishNotReadyAddresses: true,
        selector: { app: "db" },
        ports: [{ name: "tcp-pg", port: 5432 }],
      }),
      slice(
        "db",
        [{ name: "tcp-pg", port: 5432 }],
        [
          [db0, READY],
          [db1, READY],
          [db2, READY],
        ],
      ),
      service("edge", {
        clusterIP: "10.96.5.3",
        clusterIPs: ["10.96.5.3"],
        selector: { app: "edge" },
        ports: [{ name: "http", port: 80 }],
      }),
      slice("edge", [{ name: "http", port: 80 }], [[edge0, READY]]),
      service("legacy", {
        type: "ExternalName",
        externalName: "legacy.corp.example.com",
        ports: [{ name: "https", port: 443 }],
      }),
    ])
      server.apply(object);
    discovery = await startDiscovery(client.nats.url, {
      KUBERNETES: "on",
      KUBECONFIG: writeKubeconfig(server),
    });
    await eventually(async () => (await endpointsOf("web"))?.length === 2, {
      message: "discovery published web's endpoints",
    });
  });
  after(async () => {
    await discovery?.stop();
    await server?.close();
    await client?.close();
  });

  it("makes a udp- port name UDP even on a TCP port (pkg/config/kube/conversion.go ConvertProtocol)", async () => {
    // ConvertProtocol returns early only for IP protocol UDP; otherwise
    // appProtocol, else the name prefix, goes through protocol.Parse, where
    // "udp" is UDP. Push builds no listener or cluster for a UDP port.
    const web = await serviceOf("web");
    assert.deepEqual(
      web?.ports.map((port) => [port.name, port.protocol]),
      [
        ["http", Protocol.PROTOCOL_HTTP],
        ["udp-stats", Protocol.PROTOCOL_UDP],
      ],
    );
  });

  it("marks a serving, terminating endpoint TERMINATING, and DRAINING once the Service has persistent sessions (endpointslice.go endpointHealthStatus)", async () => {
    // Without istio.io/persistent-session, Istio >= 1.25 calls a shutting-down
    // endpoint model.Terminating, which EDS never sends.
    const before = await byAddress("web");
    assert.equal(before.get("10.10.0.1")?.health, HealthStatus.HEALTH_STATUS_HEALTHY);
    assert.equal(before.get("10.10.0.2")?.health, HealthStatus.HEALTH_STATUS_TERMINATING);
    // Service.SupportsDrainingEndpoints: the label turns the same endpoint DRAINING.
    const web = server.get({ apiVersion: "v1", kind: "Service", name: "web", namespace: NS }) as Obj;
    server.apply({
      ...web,
      apiVersion: "v1",
      kind: "Service",
      metadata: { ...web.metadata, labels: { "istio.io/persistent-session": "SESSION" } },
    });
    await eventually(
      async () => (await byAddress("web")).get("10.10.0.2")?.health === HealthStatus.HEALTH_STATUS_DRAINING,
      { message: "the terminating endpoint of a persistent-session service drains" },
    );
  });

  it("marks an internalTrafficPolicy Local Service node-local and each endpoint with its pod's node (conversion.go ConvertService NodeLocal, endpoint_builder.go nodeName)", async () => {
    assert.equal((await serviceOf("web"))?.nodeLocal, true);
    assert.equal((await serviceOf("edge"))?.nodeLocal, undefined, "a Cluster policy is not node-local");
    const endpoints = await byAddress("web");
    assert.equal(endpoints.get("10.10.0.1")?.nodeName, "node-a");
    assert.equal(endpoints.get("10.10.0.2")?.nodeName, "node-b");
  });

  it("takes an endpoint's network from its pod's label, then the system namespace's label, never its own namespace's (controller.go Controller.Network)", async () => {
    assert.equal((await byAddress("edge")).get("10.10.2.1")?.network, "net-edge");
    assert.equal((await byAddress("db")).get("10.10.1.1")?.network, "net-cluster");
    // A change of the system namespace's network recomputes every endpoint
    // that names none (istiod's onSystemNamespaceEvent, onNetworkChange).
    server.apply(namespace("istio-system", { "topology.istio.io/network": "net-moved" }));
    await eventually(async () => (await byAddress("db")).get("10.10.1.1")?.network === "net-moved", {
      message: "db follows istio-system's network",
    });
    assert.equal((await byAddress("edge")).get("10.10.2.1")?.network, "net-edge");
    // Its own namespace's label changes nothing.
    server.apply(namespace(NS, { "topology.istio.io/network": "net-other" }));
    server.apply(namespace("istio-system", { "topology.istio.io/network": "net-cluster" }));
    await eventually(async () => (await byAddress("db")).get("10.10.1.1")?.network === "net-cluster", {
      message: "db back on istio-system's network",
    });
  });

  it("models an ExternalName Service as an ALIAS of its external name, external, with no endpoints (conversion.go ConvertService, model.Alias)", async () => {
    const legacy = await serviceOf("legacy");
    assert.equal(legacy?.resolution, Resolution.RESOLUTION_ALIAS);
    assert.equal(legacy?.externalName, "legacy.corp.example.com");
    assert.equal(legacy?.meshExternal, true);
    assert.deepEqual(legacy?.addresses, []);
    assert.deepEqual(await endpointsOf("legacy"), []);
  });

  it("gives a headless Service's pods with a subdomain their DNS hostname (endpoint_builder.go NewEndpointBuilder)", async () => {
    const db = await serviceOf("db");
    assert.equal(db?.resolution, Resolution.RESOLUTION_PASSTHROUGH);
    assert.equal(db?.publishNotReadyAddresses, true);
    const endpoints = await byAddress("db");
    // hostname is spec.hostname, else the pod's name, and only with a subdomain:
    // the DNS name is <hostname>.<subdomain>.<namespace>.svc.<suffix>.
    assert.deepEqual(
      [...endpoints.values()].map((e) => [e.address, e.hostname, e.subdomain]),
      [
        ["10.10.1.1", "db-0", "db"],
        ["10.10.1.2", "primary", "db"],
        ["10.10.1.3", undefined, undefined],
      ],
    );
  });
});
