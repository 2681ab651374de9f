import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Subjects } from "@sextant/bus";
import { HealthStatus, RegistrationEventType, Resolution, type WorkloadRegistration } from "@sextant/proto";
import { DEBUG_HEADERS, eventually, metricValue, ordersOnOneAddressYaml } from "@sextant/testing";
import { endpointsKey, serviceKey } from "../src/registry/keys.js";
import { type DiscoveryFixture, startDiscovery, startIngest, startNatsWithClient } from "./harness.js";

const GRACE_MS = 1_500;

/** The identity push verified on its mTLS port, as it puts it in the event. */
const verified = (namespace: string, serviceAccount: string) => ({
  trustDomain: "cluster.local",
  namespace,
  serviceAccount,
});

/** A registration of a proxy of vms naming the group reviews-vm (whose template names service account reviews-vm). */
const registration = (
  type: RegistrationEventType,
  address: string,
  identity = verified("vms", "reviews-vm"),
): WorkloadRegistration => ({
  type,
  workloadGroup: "reviews-vm",
  namespace: "vms",
  proxyId: `sidecar~${address}~vm-1.vms~vms.svc.cluster.local`,
  address,
  labels: { version: "v9" },
  serviceAccount: "",
  network: "",
  locality: { region: "eu", zone: "eu-1", subzone: "" },
  identity,
  replica: "push-0",
  at: new Date(),
});

async function apply(ingestUrl: string, yaml: string): Promise<void> {
  const response = await fetch(`${ingestUrl}/v1/apply`, { method: "POST", body: yaml });
  assert.equal(response.status, 200, await response.text());
}

async function remove(ingestUrl: string, kind: string, namespace: string, name: string): Promise<void> {
  const response = await fetch(`${ingestUrl}/v1/config/${kind}/${namespace}/${name}`, { method: "DELETE" });
  assert.equal(response.status, 200, await response.text());
}

describe("ServiceEntry source and auto-registration, through ingest", () => {
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: Awaited<ReturnType<typeof startIngest>>;
  let ingestUrl: string;
  let discovery: DiscoveryFixture;

  before(async () => {
    client = await startNatsWithClient();
    ingest = await startIngest(client.nats.url, {
      ANALYSIS_DEBOUNCE_MS: "20",
      // This suite is about the registry; ingest-auth.test.ts runs discovery against an authenticating ingest.
      API_AUTH: "none",
    });
    ingestUrl = ingest.url;
    discovery = await startDiscovery(client.nats.url, {
      INGEST_URL: ingestUrl,
      WORKLOAD_ENTRY_GRACE_PERIOD_MS: String(GRACE_MS),
    });
  });
  after(async () => {
    await discovery?.stop();
    await ingest?.stop();
    await client?.close();
  });

  it("publishes a STATIC ServiceEntry with inline endpoints", async () => {
    await apply(
      ingestUrl,
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ratings-vm, namespace: bookinfo}
spec:
  hosts: [ratings.vm.example.com]
  addresses: [240.0.0.10]
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP, targetPort: 8080}]
  endpoints:
  - {address: 10.1.0.1, labels: {version: v1}}
  - {address: 10.1.0.2, ports: {http: 18080}, labels: {version: v2}}
`,
    );
    const shard = await eventually(async () =>
      (await client.endpoints()).get(
        endpointsKey("bookinfo", "ratings.vm.example.com", "serviceentry/bookinfo/ratings-vm"),
      ),
    );
    assert.deepEqual(
      shard.endpoints.map((e) => [e.address, e.ports.http, e.labels.version]),
      [
        ["10.1.0.1", 8080, "v1"],
        ["10.1.0.2", 18080, "v2"],
      ],
    );
    const service = (await client.services()).get(serviceKey("bookinfo", "ratings.vm.example.com"));
    assert.equal(service?.resolution, Resolution.RESOLUTION_STATIC);
    assert.deepEqual(service?.addresses, ["240.0.0.10"]);
    assert.equal(service?.registry, "serviceentry");
  });

  it("publishes a DNS ServiceEntry whose hosts are their own endpoints", async () => {
    await apply(
      ingestUrl,
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: external, namespace: egress}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  resolution: DNS
  ports: [{number: 443, name: tls, protocol: TLS}]
`,
    );
    const shard = await eventually(async () =>
      (await client.endpoints()).get(
        endpointsKey("egress", "api.example.com", "serviceentry/egress/external"),
      ),
    );
    assert.deepEqual(
      shard.endpoints.map((e) => [e.address, e.ports.tls]),
      [["api.example.com", 443]],
    );
    const service = (await client.services()).get(serviceKey("egress", "api.example.com"));
    assert.equal(service?.resolution, Resolution.RESOLUTION_DNS);
    assert.equal(service?.meshExternal, true);
  });

  it("keeps two WorkloadEntries on one address with different ports as two endpoints (IstioEndpoint.Key)", async () => {
    // Istio keys an endpoint by workload and address, among others (see ordersOnOneAddressYaml).
    await apply(ingestUrl, ordersOnOneAddressYaml("10.4.0.7"));
    const key = endpointsKey("shop", "orders.shop.example", "serviceentry/shop/orders");
    const endpoints = async () =>
      (await client.endpoints())
        .get(key)
        ?.endpoints.map((e) => `${e.address}:${e.ports.http} ${e.workloadName} ${e.labels.version}`);
    await eventually(
      async () => (await endpoints())?.join() === "10.4.0.7:8081 orders-v1 v1,10.4.0.7:8082 orders-v2 v2",
      { message: "both WorkloadEntries of one address, each with its port" },
    );
    await remove(ingestUrl, "ServiceEntry", "shop", "orders");
  });

  it("selects WorkloadEntries with a workloadSelector, follows their changes, and removes the keys with the entry", async () => {
    await apply(
      ingestUrl,
      `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: details-vms, namespace: bookinfo}
spec:
  hosts: [details.vms.example]
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}]
  workloadSelector: {labels: {app: details}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: details-vm-1, namespace: bookinfo}
spec: {address: 10.2.0.1, ports: {http: 7070}, labels: {app: details}, serviceAccount: details}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: details-vm-2, namespace: bookinfo}
spec: {address: 10.2.0.2, labels: {app: details}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: other-vm, namespace: bookinfo}
spec: {address: 10.2.0.3, labels: {app: other}}
`,
    );
    const key = endpointsKey("bookinfo", "details.vms.example", "serviceentry/bookinfo/details-vms");
    const addresses = async () =>
      (await client.endpoints()).get(key)?.endpoints.map((e) => `${e.address}:${e.ports.http}`);
    await eventually(async () => (await addresses())?.join() === "10.2.0.1:7070,10.2.0.2:9080", {
      message: "both selected WorkloadEntries, ports mapped by name",
    });
    await remove(ingestUrl, "WorkloadEntry", "bookinfo", "details-vm-2");
    await eventually(async () => (await addresses())?.join() === "10.2.0.1:7070", {
      message: "removed entry",
    });
    await remove(ingestUrl, "ServiceEntry", "bookinfo", "details-vms");
    await eventually(
      async () =>
        !(await client.endpoints()).has(key) &&
        !(await client.services()).has(serviceKey("bookinfo", "details.vms.example")),
      { message: "keys removed with the ServiceEntry" },
    );
  });

  it("auto-registers a workload through ingest and removes it after the grace period unless it reconnects", async () => {
    await apply(
      ingestUrl,
      `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews-vm, namespace: vms}
spec:
  metadata: {labels: {app: reviews, class: vm}}
  template: {ports: {http: 9081}, serviceAccount: reviews-vm}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews-vm, namespace: vms}
spec:
  hosts: [reviews.vms.example]
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}]
  workloadSelector: {labels: {app: reviews}}
`,
    );
    const subject = client.bus.subject(Subjects.registration);
    const event = (type: RegistrationEventType) => registration(type, "10.3.0.7");
    const entryUrl = `${ingestUrl}/v1/config/WorkloadEntry/vms/reviews-vm-10.3.0.7`;
    const key = endpointsKey("vms", "reviews.vms.example", "serviceentry/vms/reviews-vm");
    const endpoint = async () => (await client.endpoints()).get(key)?.endpoints[0];

    // Wait until discovery has read the group before the proxy "connects".
    await eventually(async () => {
      const body = (await (
        await fetch(`${discovery.url}/debug/registryz`, { headers: DEBUG_HEADERS })
      ).json()) as {
        inputs: { workloadGroups: number };
      };
      return body.inputs.workloadGroups === 1;
    });
    subject.publish(event(RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED));
    await eventually(async () => (await fetch(entryUrl)).status === 200, {
      message: "WorkloadEntry created in ingest",
    });
    const stored = (await (await fetch(entryUrl)).json()) as {
      metadata: { annotations: Record<string, string> };
      spec: Record<string, unknown>;
    };
    assert.equal(stored.metadata.annotations["istio.io/autoRegistrationGroup"], "reviews-vm");
    assert.deepEqual(stored.spec.labels, { app: "reviews", class: "vm", version: "v9" });
    assert.equal(stored.spec.locality, "eu/eu-1");
    const registered = await eventually(endpoint, {
      message: "the ServiceEntry selects the registered workload",
    });
    assert.deepEqual(
      [registered.address, registered.ports.http, registered.serviceAccount, registered.health],
      ["10.3.0.7", 9081, "reviews-vm", HealthStatus.HEALTH_STATUS_HEALTHY],
    );

    // A disconnection followed by a reconnection within the grace period keeps the entry.
    subject.publish(event(RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED));
    await new Promise((resolve) => setTimeout(resolve, GRACE_MS / 3));
    subject.publish(event(RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED));
    await new Promise((resolve) => setTimeout(resolve, GRACE_MS * 1.5));
    assert.equal((await fetch(entryUrl)).status, 200, "a reconnected workload keeps its entry");

    // The last disconnection removes it after the grace period.
    subject.publish(event(RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED));
    await eventually(async () => (await fetch(entryUrl)).status === 404, {
      message: "WorkloadEntry removed",
    });
    await eventually(async () => (await client.endpoints()).get(key)?.endpoints.length === 0, {
      message: "its endpoint is gone",
    });
  });

  it("writes no WorkloadEntry for an event without a verified identity or with one the group does not allow", async () => {
    const subject = client.bus.subject(Subjects.registration);
    const connected = RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED;
    const entry = (address: string) => `${ingestUrl}/v1/config/WorkloadEntry/vms/reviews-vm-${address}`;
    // The group of the test before, which discovery has read.
    await eventually(async () => {
      const body = (await (
        await fetch(`${discovery.url}/debug/registryz`, { headers: DEBUG_HEADERS })
      ).json()) as {
        inputs: { workloadGroups: number };
      };
      return body.inputs.workloadGroups === 1;
    });
    subject.publish({ ...registration(connected, "10.3.0.20"), identity: undefined });
    subject.publish(registration(connected, "10.3.0.21", verified("other", "reviews-vm")));
    subject.publish(registration(connected, "10.3.0.22", verified("vms", "intruder")));
    // Events are handled in order: once the allowed one is written, the others were refused.
    subject.publish(registration(connected, "10.3.0.23"));
    await eventually(async () => (await fetch(entry("10.3.0.23"))).status === 200, {
      message: "the allowed identity's WorkloadEntry",
    });
    for (const address of ["10.3.0.20", "10.3.0.21", "10.3.0.22"])
      assert.equal((await fetch(entry(address))).status, 404, `no WorkloadEntry for ${address}`);
    const metrics = await (await fetch(`${discovery.url}/metrics`)).text();
    for (const reason of ["no_identity", "namespace", "service_account"])
      assert.equal(
        metricValue(metrics, "sextant_discovery_registration_refused_total", `reason="${reason}"`),
        1,
        reason,
      );
    subject.publish(registration(RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED, "10.3.0.23"));
    await eventually(async () => (await fetch(entry("10.3.0.23"))).status === 404, {
      message: "WorkloadEntry removed",
    });
  });
});
