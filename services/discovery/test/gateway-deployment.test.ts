import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { ISTIO_CONTROLLER, SEXTANT_CONTROLLER } from "@sextant/gateway-api";
import { createLogger, ReadinessGate } from "@sextant/observability";
import {
  checkGoldenDir,
  eventually,
  type FakeKubeApiServer,
  type KubeObject,
  startFakeKubeApiServer,
} from "@sextant/testing";
import { parseAllDocuments, stringify } from "yaml";
import { GatewayDeployer, keepLegacySelector } from "../src/gateway-deployment/gateway-deployer.js";
import {
  deploymentNames,
  type GatewayDeploymentSettings,
  isManaged,
  type KubeGateway,
  renderGatewayDeployment,
  servicePorts,
} from "../src/gateway-deployment/render.js";
import { type DiscoveryFixture, startDiscovery, startNatsWithClient, writeKubeconfig } from "./harness.js";

const SETTINGS: GatewayDeploymentSettings = {
  proxyImage: "registry.example/sextant/proxy:1.2.3",
  caAddress: "sextant-ca.istio-system.svc:8060",
  discoveryAddress: "sextant-push.istio-system.svc:15012",
  domainSuffix: "cluster.local",
  trustDomain: "cluster.local",
  clusterId: "Kubernetes",
  network: "",
};

const testdata = fileURLToPath(new URL("testdata/gateway-deployment", import.meta.url));

describe("renderGatewayDeployment (golden: testdata/gateway-deployment)", () => {
  it("renders the ServiceAccount, Deployment and Service istiod's kube-gateway template makes", () => {
    const produced = checkGoldenDir(testdata, (testCase) => {
      const [gateway] = parseAllDocuments(testCase.input).map((doc) => doc.toJS() as KubeGateway);
      const controller =
        gateway?.spec?.gatewayClassName === "sextant" ? SEXTANT_CONTROLLER : ISTIO_CONTROLLER;
      const objects = renderGatewayDeployment(gateway!, SETTINGS, controller);
      return { objects: objects.map((object) => stringify(object)).join("---\n") };
    });
    assert.ok(produced.length >= 3);
  });
});

describe("which Gateways are deployed, and how they are named", () => {
  it("deploys a Gateway without addresses or with one IP address, as istiod's IsManaged", () => {
    const withAddresses = (addresses: Array<{ type?: string; value: string }>): KubeGateway => ({
      spec: { addresses },
    });
    assert.ok(isManaged({ spec: {} }));
    assert.ok(isManaged(withAddresses([{ value: "10.0.0.1" }])));
    assert.ok(isManaged(withAddresses([{ type: "IPAddress", value: "10.0.0.1" }])));
    assert.ok(!isManaged(withAddresses([{ type: "Hostname", value: "gw.example.com" }])));
    assert.ok(!isManaged(withAddresses([{ type: "example.com/named", value: "x" }])));
    assert.ok(!isManaged(withAddresses([{ value: "10.0.0.1" }, { value: "10.0.0.2" }])));
  });

  it("names the objects <gateway>-<class>, unless annotations say otherwise", () => {
    assert.deepEqual(deploymentNames({ metadata: { name: "gw" }, spec: { gatewayClassName: "istio" } }), {
      deployment: "gw-istio",
      serviceAccount: "gw-istio",
    });
  });

  it("cuts a listener-named port to 63 characters and names an unnamed one <protocol>-<index>", () => {
    const ports = servicePorts({
      spec: {
        listeners: [
          { name: "x".repeat(70), port: 80, protocol: "HTTP" },
          { port: 81, protocol: "TCP" },
        ],
      },
    });
    assert.deepEqual(
      ports.map((port) => port.name),
      ["status-port", "x".repeat(63), "tcp-1"],
    );
  });
});

const GATEWAY_API_RESOURCES = [
  {
    group: "gateway.networking.k8s.io",
    versions: ["v1"],
    kind: "Gateway",
    plural: "gateways",
    namespaced: true,
    subresources: { status: {} },
  },
  {
    group: "gateway.networking.k8s.io",
    versions: ["v1"],
    kind: "GatewayClass",
    plural: "gatewayclasses",
    namespaced: false,
    subresources: { status: {} },
  },
];

function gateway(
  name: string,
  spec: Record<string, unknown>,
  annotations: Record<string, string> = {},
): KubeObject {
  return {
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "Gateway",
    metadata: { name, namespace: "default", annotations },
    spec: { listeners: [{ name: "http", port: 80, protocol: "HTTP" }], ...spec },
  };
}

describe("GatewayDeployer against the fake kube-apiserver", () => {
  let server: FakeKubeApiServer;
  let deployer: GatewayDeployer;
  let leader = true;
  const readiness = new ReadinessGate();
  const get = (kind: string, name: string) =>
    server.get({ apiVersion: kind === "Deployment" ? "apps/v1" : "v1", kind, name, namespace: "default" });

  before(async () => {
    server = await startFakeKubeApiServer({ resources: GATEWAY_API_RESOURCES });
    server.apply({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "GatewayClass",
      metadata: { name: "other" },
      spec: { controllerName: "example.com/another-controller" },
    });
    server.apply({
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "GatewayClass",
      metadata: { name: "custom-sextant" },
      spec: { controllerName: "sextant.io/gateway-controller" },
    });
    deployer = new GatewayDeployer({
      kubeConfig: server.kubeConfig(KubeConfig),
      settings: SETTINGS,
      isLeader: () => leader,
      logger: createLogger({ service: "test", level: "silent" }),
      readiness,
      backoff: { initialMs: 50, maxMs: 200 },
    });
    await deployer.start();
    await eventually(() => readiness.ready, { message: "the deployer's first sync" });
  });

  after(async () => {
    await deployer?.close();
    await server?.close();
  });

  it("gives a Gateway of class istio a ServiceAccount, Deployment and Service owned by it", async () => {
    const created = server.apply(gateway("front", { gatewayClassName: "istio" }));
    await eventually(() => get("Service", "front-istio"));
    for (const kind of ["ServiceAccount", "Deployment", "Service"]) {
      const object = get(kind, "front-istio");
      assert.ok(object, kind);
      assert.deepEqual(
        object.metadata?.ownerReferences,
        [
          {
            apiVersion: "gateway.networking.k8s.io/v1",
            kind: "Gateway",
            name: "front",
            uid: created.metadata?.uid,
            controller: true,
          },
        ],
        kind,
      );
      assert.equal(object.metadata?.labels?.["gateway.istio.io/managed"], "istio.io-gateway-controller");
    }
    const deployment = get("Deployment", "front-istio") as KubeObject & {
      spec: { template: { spec: { serviceAccountName: string } } };
    };
    assert.equal(deployment.spec.template.spec.serviceAccountName, "front-istio");
    // Server-side apply with Istio's field manager.
    const applies = server.requestsMatching({ verb: "patch", resource: "deployments" });
    assert.ok(applies.length > 0);
  });

  it("gives a Gateway of a class whose controller is Sextant's the objects too, labelled as that controller's", async () => {
    server.apply(gateway("own", { gatewayClassName: "custom-sextant" }));
    const deployment = await eventually(() => get("Deployment", "own-custom-sextant"));
    assert.equal(deployment.metadata?.labels?.["gateway.istio.io/managed"], "sextant.io-gateway-controller");
  });

  it("leaves alone a Gateway with a hostname address, one of another controller's class, and one of an unknown class", async () => {
    server.apply(
      gateway("by-address", {
        gatewayClassName: "istio",
        addresses: [{ type: "Hostname", value: "lb.example.com" }],
      }),
    );
    server.apply(gateway("foreign", { gatewayClassName: "other" }));
    server.apply(gateway("unknown", { gatewayClassName: "nonexistent" }));
    // A Gateway to deploy after them: once its objects exist, the three before it were reconciled.
    server.apply(gateway("marker", { gatewayClassName: "istio" }));
    await eventually(() => get("Service", "marker-istio"));
    await deployer.idle();
    for (const name of ["by-address-istio", "foreign-other", "unknown-nonexistent"])
      for (const kind of ["ServiceAccount", "Deployment", "Service"])
        assert.equal(get(kind, name), undefined, name);
  });

  it("updates the Service when a listener's port changes", async () => {
    server.apply(gateway("ports", { gatewayClassName: "istio" }));
    await eventually(() => get("Service", "ports-istio"));
    server.apply(
      gateway("ports", {
        gatewayClassName: "istio",
        listeners: [{ name: "http", port: 8080, protocol: "HTTP" }],
      }),
    );
    await eventually(() => {
      const service = get("Service", "ports-istio") as KubeObject & {
        spec: { ports: Array<{ port: number }> };
      };
      return service.spec.ports.map((port) => port.port).join() === "15021,8080";
    });
  });

  it("puts back a deployed object that someone deletes or edits", async () => {
    server.apply(gateway("repaired", { gatewayClassName: "istio" }));
    await eventually(() => get("Service", "repaired-istio"));
    server.delete({
      apiVersion: "apps/v1",
      kind: "Deployment",
      name: "repaired-istio",
      namespace: "default",
    });
    await eventually(() => get("Deployment", "repaired-istio"), { message: "the Deployment is back" });
    const service = get("Service", "repaired-istio")!;
    server.apply({ ...service, spec: { ...(service.spec as object), type: "NodePort" } });
    await eventually(
      () =>
        (get("Service", "repaired-istio")?.spec as { type?: string } | undefined)?.type === "LoadBalancer",
      {
        message: "the Service's type is put back",
      },
    );
  });

  it("never takes over an object of that name that it did not create", async () => {
    server.apply({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: "taken-istio", namespace: "default" },
      spec: { ports: [{ name: "web", port: 9999 }] },
    });
    server.apply(gateway("taken", { gatewayClassName: "istio" }));
    await eventually(() => get("Deployment", "taken-istio"));
    await deployer.idle();
    const service = get("Service", "taken-istio") as KubeObject & {
      spec: { ports: Array<{ port: number }> };
    };
    assert.deepEqual(
      service.spec.ports.map((port) => port.port),
      [9999],
    );
    assert.equal(service.metadata?.labels?.["gateway.istio.io/managed"], undefined);
  });

  it("keeps the istio.io/gateway-name selector of a Deployment istiod made before 1.24 (a selector cannot change)", async () => {
    const legacySelector = {
      "istio.io/gateway-name": "old",
      "gateway.networking.k8s.io/gateway-name": "old",
    };
    server.apply({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: {
        name: "old-istio",
        namespace: "default",
        labels: { "gateway.istio.io/managed": "istio.io-gateway-controller" },
      },
      spec: {
        selector: { matchLabels: legacySelector },
        template: {
          metadata: { labels: legacySelector },
          spec: { containers: [{ name: "istio-proxy", image: "x" }] },
        },
      },
    });
    server.apply(gateway("old", { gatewayClassName: "istio" }));
    await eventually(() => get("Service", "old-istio"));
    await deployer.idle();
    const deployment = get("Deployment", "old-istio") as KubeObject & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: Array<{ image: string }> };
        };
      };
    };
    assert.deepEqual(deployment.spec.selector.matchLabels, legacySelector);
    assert.equal(deployment.spec.template.metadata.labels["istio.io/gateway-name"], "old");
    assert.equal(deployment.spec.template.spec.containers[0]?.image, SETTINGS.proxyImage);
    // The fake merges an applied map where the real server replaces the (atomic) selector: check the body itself.
    const [, rendered] = renderGatewayDeployment(
      { metadata: { name: "old", namespace: "default" }, spec: { gatewayClassName: "istio" } },
      SETTINGS,
    );
    const body = keepLegacySelector(rendered!, deployment as never) as unknown as typeof deployment;
    assert.deepEqual(body.spec.selector.matchLabels, legacySelector);
    assert.equal(body.spec.template.metadata.labels["istio.io/gateway-name"], "old");
    const fresh = keepLegacySelector(rendered!, {
      metadata: {},
      spec: { selector: { matchLabels: { a: "b" } } },
    } as never);
    assert.equal(fresh, rendered, "a Deployment without the legacy label gets the rendered selector");
  });

  it("does nothing while it does not lead, and applies every Gateway once it leads", async () => {
    leader = false;
    deployer.leaderChanged(false);
    server.clearRequests();
    server.apply(gateway("standby", { gatewayClassName: "istio" }));
    // What the queue would do with the Gateway's key: nothing, and no request, while not leading.
    await deployer.reconcile("default/standby");
    assert.equal(server.requestCount({ verb: "patch" }) + server.requestCount({ verb: "get" }), 0);
    assert.equal(get("ServiceAccount", "standby-istio"), undefined);
    leader = true;
    deployer.leaderChanged(true);
    await eventually(() => get("Service", "standby-istio"));
  });
});

describe("GatewayDeployer without the Gateway API", () => {
  it("is ready and deploys nothing when the API server does not serve Gateways", async () => {
    const server = await startFakeKubeApiServer();
    const readiness = new ReadinessGate();
    const deployer = new GatewayDeployer({
      kubeConfig: server.kubeConfig(KubeConfig),
      settings: SETTINGS,
      isLeader: () => true,
      logger: createLogger({ service: "test", level: "silent" }),
      readiness,
      backoff: { initialMs: 50, maxMs: 200 },
    });
    try {
      await deployer.start();
      await eventually(() => readiness.ready);
      assert.equal(server.requestCount({ verb: "watch" }), 0);
    } finally {
      await deployer.close();
      await server.close();
    }
  });
});

describe("the discovery service deploys Gateways (main.ts's wiring: settings, leadership)", () => {
  it("applies a Gateway's objects with its settings once it leads, and nothing with the controller turned off", async () => {
    const client = await startNatsWithClient();
    const kube = await startFakeKubeApiServer({ resources: GATEWAY_API_RESOURCES });
    const kubeconfig = writeKubeconfig(kube);
    const off = await startDiscovery(client.nats.url, {
      KUBERNETES: "on",
      KUBECONFIG: kubeconfig,
      PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER: "false",
    });
    let discovery: DiscoveryFixture | undefined;
    let offRunning = true;
    try {
      await eventually(async () => (await fetch(`${off.url}/ready`)).ok, { message: "ready with it off" });
      assert.equal(
        kube.requestCount({ resource: "gateways" }),
        0,
        "not even asked whether Gateways are served",
      );
      await off.stop();
      offRunning = false;
      kube.apply(gateway("edge", { gatewayClassName: "sextant" }));
      discovery = await startDiscovery(client.nats.url, {
        KUBERNETES: "on",
        KUBECONFIG: kubeconfig,
        SIDECAR_PROXY_IMAGE: "registry.example/proxy:9.9.9",
        // The stopped replica released its lease: this one leads at once.
        LEASE_RENEW_MS: "100",
        LEASE_DURATION_MS: "1000",
      });
      const deployment = (await eventually(
        () =>
          kube.get({ apiVersion: "apps/v1", kind: "Deployment", name: "edge-sextant", namespace: "default" }),
        { message: "the Gateway's Deployment" },
      )) as KubeObject & { spec: { template: { spec: { containers: Array<{ image: string }> } } } };
      assert.equal(deployment.spec.template.spec.containers[0]?.image, "registry.example/proxy:9.9.9");
    } finally {
      await discovery?.stop();
      if (offRunning) await off.stop();
      await kube.close();
      await client.close();
    }
  });
});
