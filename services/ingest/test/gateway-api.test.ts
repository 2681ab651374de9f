import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isDeepStrictEqual } from "node:util";
import { Buckets, type Bus, encodeKey } from "@sextant/bus";
import { Protocol, Service } from "@sextant/proto";
import {
  eventually,
  type FakeKubeApiServer,
  type ResourceDefinition,
  startFakeKubeApiServer,
} from "@sextant/testing";
import { KINDS } from "@sextant/validation";
import { watchedKinds } from "../src/sources/kube-objects.js";
import {
  get,
  type IngestFixture,
  ingestForSuite,
  type Json,
  post,
  startIngest,
  startNatsWithClient,
} from "./harness.js";

const GROUP = "gateway.networking.k8s.io";

const kubernetesGateway = (name: string, port = 80) => ({
  apiVersion: `${GROUP}/v1`,
  kind: "Gateway",
  metadata: { name, namespace: "shop" },
  spec: { gatewayClassName: "istio", listeners: [{ name: "http", port, protocol: "HTTP" }] },
});
const httpRoute = (name: string, port = 9080) => ({
  apiVersion: `${GROUP}/v1`,
  kind: "HTTPRoute",
  metadata: { name, namespace: "shop" },
  spec: {
    parentRefs: [{ name: "gw" }],
    hostnames: ["shop.example.com"],
    rules: [
      { matches: [{ path: { type: "PathPrefix", value: "/" } }], backendRefs: [{ name: "web", port }] },
    ],
  },
});
const istioGateway = {
  apiVersion: "networking.istio.io/v1",
  kind: "Gateway",
  metadata: { name: "gw", namespace: "shop" },
  spec: {
    selector: { istio: "ingressgateway" },
    servers: [{ port: { number: 80, name: "http", protocol: "HTTP" }, hosts: ["*"] }],
  },
};
const gatewayClass = {
  apiVersion: `${GROUP}/v1`,
  kind: "GatewayClass",
  metadata: { name: "istio" },
  spec: { controllerName: "istio.io/gateway-controller" },
};
/** Puts a Service into the registry (sextant-services), as discovery would. */
async function registerService(bus: Bus, name: string, namespace: string, port: number): Promise<void> {
  const hostname = `${name}.${namespace}.svc.cluster.local`;
  await (await bus.bucket(Buckets.services)).put(
    encodeKey(namespace, hostname),
    Service.fromPartial({
      hostname,
      namespace,
      name,
      ports: [{ name: "http", number: port, protocol: Protocol.PROTOCOL_HTTP }],
    }),
  );
}

/** The type, status and reason of each condition, e.g. "Accepted True Accepted". */
const conditionsOf = (conditions: Array<{ type: string; status: string; reason: string }> = []) =>
  conditions.map(({ type, status, reason }) => `${type} ${status} ${reason}`);

const yaml = (...objects: unknown[]) => objects.map((o) => JSON.stringify(o)).join("\n---\n");

describe("ingest stores the Gateway API's kinds (HTTP API)", () => {
  const ingest = ingestForSuite();

  it("applies, reads, lists and deletes them; a Gateway API Gateway and an Istio Gateway of one name are two resources", async () => {
    const applied = await post(
      `${ingest.url}/v1/apply`,
      yaml(kubernetesGateway("gw"), istioGateway, httpRoute("web")),
    );
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    assert.deepEqual(
      applied.json.resources.map((r: { kind: string; result: string }) => `${r.kind} ${r.result}`),
      ["KubernetesGateway created", "Gateway created", "HTTPRoute created"],
    );

    const k8s = await get(`${ingest.url}/v1/config/gateways.${GROUP}/shop/gw`);
    assert.equal(k8s.status, 200, JSON.stringify(k8s.json));
    assert.equal(k8s.json.apiVersion, `${GROUP}/v1`);
    assert.equal(k8s.json.kind, "Gateway");
    assert.equal(k8s.json.spec.gatewayClassName, "istio");
    // The same resource by Sextant's kind name.
    assert.equal(
      (await get(`${ingest.url}/v1/config/KubernetesGateway/shop/gw`)).json.spec.gatewayClassName,
      "istio",
    );
    // "gateway" alone is Istio's, as before the Gateway API kinds.
    const istio = await get(`${ingest.url}/v1/config/gateway/shop/gw`);
    assert.equal(istio.json.apiVersion, "networking.istio.io/v1");
    assert.deepEqual(istio.json.spec.selector, { istio: "ingressgateway" });

    const routes = await get(`${ingest.url}/v1/config?kind=httproutes&namespace=shop`);
    assert.deepEqual(
      routes.json.items.map(
        (item: { kind: string; metadata: { name: string } }) => `${item.kind}/${item.metadata.name}`,
      ),
      ["HTTPRoute/web"],
    );
    // Stored as written: no defaults filled in, no field renamed.
    assert.deepEqual(routes.json.items[0].spec, httpRoute("web").spec);

    const changed = await post(`${ingest.url}/v1/apply`, yaml(httpRoute("web", 9081)));
    assert.equal(changed.json.resources[0].result, "configured");
    const url = `${ingest.url}/v1/config/httproute/shop/web`;
    assert.equal((await get(url)).json.spec.rules[0].backendRefs[0].port, 9081);
    assert.equal((await fetch(url, { method: "DELETE" })).status, 200);
    assert.equal((await get(url)).status, 404);
    assert.equal(
      (await fetch(`${ingest.url}/v1/config/gateways.${GROUP}/shop/gw`, { method: "DELETE" })).status,
      200,
    );
    assert.equal((await get(`${ingest.url}/v1/config/gateway/shop/gw`)).status, 200, "Istio's Gateway stays");
  });

  it("keeps a cluster-scoped GatewayClass under one key, whatever namespace a manifest gives it", async () => {
    const applied = await post(
      `${ingest.url}/v1/apply`,
      yaml(gatewayClass, { ...gatewayClass, metadata: { name: "other", namespace: "shop" } }),
    );
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    const listed = await get(`${ingest.url}/v1/config?kind=gatewayclasses`);
    assert.deepEqual(
      listed.json.items.map((item: { metadata: { name: string; namespace?: string } }) => item.metadata),
      [
        { name: "istio", generation: 1, resourceVersion: listed.json.items[0].metadata.resourceVersion },
        { name: "other", generation: 1, resourceVersion: listed.json.items[1].metadata.resourceVersion },
      ],
    );
    assert.equal((await get(`${ingest.url}/v1/config/gatewayclass/default/other`)).status, 200);
  });

  it("rejects what the Gateway API's schema or CEL rules reject, naming the field", async () => {
    const bad = httpRoute("bad");
    bad.spec.rules[0]!.backendRefs = [{ name: "web" } as { name: string; port: number }];
    const rejected = await post(`${ingest.url}/v1/apply`, yaml(bad));
    assert.equal(rejected.status, 400, JSON.stringify(rejected.json));
    const errors = JSON.stringify(rejected.json);
    assert.ok(errors.includes("spec.rules[0].backendRefs[0]"), errors);
    assert.ok(errors.includes("Must have port for Service reference"), errors);
    const unknown = await post(
      `${ingest.url}/v1/apply`,
      yaml({ ...kubernetesGateway("gw"), spec: { listeners: [] } }),
    );
    assert.equal(unknown.status, 400);
    assert.ok(JSON.stringify(unknown.json).includes("spec.gatewayClassName"), JSON.stringify(unknown.json));
  });
});

describe("the Gateway API's status through ingest's API", () => {
  const ingest = ingestForSuite();

  it("shows a Gateway's and its route's status, with ResolvedRefs BackendNotFound until the backend Service exists", async () => {
    await registerService(ingest.bus, "gw-istio", "shop", 80);
    const applied = await post(
      `${ingest.url}/v1/apply`,
      yaml(gatewayClass, kubernetesGateway("gw"), httpRoute("web")),
    );
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    const read = async (path: string) => (await get(`${ingest.url}/v1/config/${path}`)).json;

    const route = await eventually(
      async () => {
        const { status } = await read("httproutes/shop/web");
        return status?.parents?.length === 1 && status;
      },
      { message: "the route's status" },
    );
    assert.deepEqual(route.parents[0].parentRef, { group: GROUP, kind: "Gateway", name: "gw" });
    assert.equal(route.parents[0].controllerName, "istio.io/gateway-controller");
    assert.deepEqual(conditionsOf(route.parents[0].conditions), [
      "Accepted True Accepted",
      "ResolvedRefs False BackendNotFound",
    ]);
    for (const condition of route.parents[0].conditions) {
      assert.equal(condition.observedGeneration, 1);
      assert.match(condition.lastTransitionTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    }

    const gateway = await read(`gateways.${GROUP}/shop/gw`);
    assert.deepEqual(conditionsOf(gateway.status.conditions), [
      "Accepted True Accepted",
      "Programmed True Programmed",
      "ResolvedRefs True ResolvedRefs",
    ]);
    assert.deepEqual(gateway.status.addresses, [
      { type: "Hostname", value: "gw-istio.shop.svc.cluster.local" },
    ]);
    assert.equal(gateway.status.listeners[0].name, "http");
    assert.equal(gateway.status.listeners[0].attachedRoutes, 1);
    // The status subresource's path answers the same; lists show statuses too.
    assert.deepEqual((await read(`gateways.${GROUP}/shop/gw/status`)).status, gateway.status);
    const listed = await read(`?kind=gatewayclasses`);
    assert.deepEqual(conditionsOf(listed.items[0].status.conditions), ["Accepted True Accepted"]);

    // The backend appears in the registry: ResolvedRefs turns True, with a new transition time.
    const before = route.parents[0].conditions[1].lastTransitionTime;
    await registerService(ingest.bus, "web", "shop", 9080);
    const resolved = await eventually(
      async () => {
        const { status } = await read("httproutes/shop/web");
        return status.parents[0].conditions[1].status === "True" && status.parents[0].conditions;
      },
      { message: "ResolvedRefs True once the Service exists" },
    );
    assert.equal(resolved[1].reason, "ResolvedRefs");
    assert.equal(resolved[0].lastTransitionTime, route.parents[0].conditions[0].lastTransitionTime);
    assert.ok(resolved[1].lastTransitionTime >= before);

    // An Istio kind shows no status.
    await post(`${ingest.url}/v1/apply`, yaml(istioGateway));
    assert.equal((await read("gateway/shop/gw")).status, undefined);
  });
});

describe("ingest reads the Gateway API's kinds from CONFIG_DIR", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: IngestFixture;
  let dir: string;
  before(async () => {
    env = await startNatsWithClient();
    dir = mkdtempSync(join(tmpdir(), "sextant-gwapi-"));
    writeFileSync(join(dir, "gateway.yaml"), yaml(kubernetesGateway("gw"), httpRoute("web")));
    ingest = await startIngest(env.nats.url, { CONFIG_DIR: dir, CONFIG_DIR_RESCAN_MS: "200" });
  });
  after(async () => {
    await ingest?.stop();
    await env?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("stores each document of a file", async () => {
    await eventually(async () => (await get(`${ingest.url}/v1/config/httproutes/shop/web`)).status === 200, {
      message: "HTTPRoute stored",
    });
    const gw = await get(`${ingest.url}/v1/config/gateways.${GROUP}/shop/gw`);
    assert.equal(gw.json.kind, "Gateway");
    assert.equal(gw.json.apiVersion, `${GROUP}/v1`);
  });
});

/** Istio's CRDs, every version served, from @sextant/validation's KINDS. */
const ISTIO_CRDS: ResourceDefinition[] = [...KINDS.values()]
  .filter((info) => info.group !== GROUP)
  .map((info) => ({
    group: info.group,
    versions: [...info.versions],
    kind: info.kind,
    plural: info.plural,
    namespaced: true,
    subresources: { status: {} },
  }));

/** The Gateway API's CRDs as a cluster with them installed serves them. */
const GATEWAY_API_CRDS: ResourceDefinition[] = [
  ["GatewayClass", "gatewayclasses", ["v1", "v1beta1"]],
  ["Gateway", "gateways", ["v1", "v1beta1"]],
  ["HTTPRoute", "httproutes", ["v1", "v1beta1"]],
  ["GRPCRoute", "grpcroutes", ["v1"]],
  ["TLSRoute", "tlsroutes", ["v1", "v1alpha2"]],
  ["TCPRoute", "tcproutes", ["v1alpha2"]],
  ["ReferenceGrant", "referencegrants", ["v1beta1", "v1"]],
  ["BackendTLSPolicy", "backendtlspolicies", ["v1"]],
].map(([kind, plural, versions]) => ({
  group: GROUP,
  versions: versions as string[],
  kind: kind as string,
  plural: plural as string,
  // GatewayClass is cluster-scoped.
  namespaced: kind !== "GatewayClass",
  subresources: { status: {} },
}));

describe("the Gateway API's kinds the Kubernetes source watches", () => {
  it("each at the version Istio reads it, only if served, GatewayClass cluster-wide", () => {
    const gatewayApi = watchedKinds().filter((kind) => kind.group === GROUP);
    assert.deepEqual(
      gatewayApi.map((kind) => `${kind.kind} ${kind.path}${kind.clusterScoped ? " (cluster)" : ""}`),
      [
        `GatewayClass /apis/${GROUP}/v1/gatewayclasses (cluster)`,
        `KubernetesGateway /apis/${GROUP}/v1/gateways`,
        `HTTPRoute /apis/${GROUP}/v1/httproutes`,
        `GRPCRoute /apis/${GROUP}/v1/grpcroutes`,
        `TLSRoute /apis/${GROUP}/v1/tlsroutes`,
        `TCPRoute /apis/${GROUP}/v1alpha2/tcproutes`,
        `ReferenceGrant /apis/${GROUP}/v1beta1/referencegrants`,
        `BackendTLSPolicy /apis/${GROUP}/v1/backendtlspolicies`,
      ],
    );
    assert.ok(gatewayApi.every((kind) => kind.optional));
    assert.ok(watchedKinds().every((kind) => kind.optional === (kind.group === GROUP)));
  });
});

describe("the Kubernetes source and the Gateway API's kinds", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  const servers: FakeKubeApiServer[] = [];
  const ingests: IngestFixture[] = [];
  let dir: string;

  const startWith = async (resources: ResourceDefinition[]) => {
    const server = await startFakeKubeApiServer({ resources });
    servers.push(server);
    const kubeconfig = join(dir, `kubeconfig-${servers.length}`);
    writeFileSync(kubeconfig, server.kubeconfigYaml());
    return { server, kubeconfig };
  };
  const startIngestOn = async (kubeconfig: string) => {
    const ingest = await startIngest(env.nats.url, { KUBERNETES_CONFIG: "true", KUBECONFIG: kubeconfig });
    ingests.push(ingest);
    await eventually(async () => (await fetch(`${ingest.url}/ready`)).status === 200, {
      message: "ingest ready",
    });
    return ingest;
  };

  before(async () => {
    env = await startNatsWithClient();
    dir = mkdtempSync(join(tmpdir(), "sextant-gwapi-kube-"));
  });
  after(async () => {
    for (const ingest of ingests) await ingest.stop();
    for (const server of servers) await server.close();
    await env?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("stores the cluster's Gateway API objects, follows their changes and deletions, and writes no Istio validationMessages to them", async () => {
    const { server, kubeconfig } = await startWith([...ISTIO_CRDS, ...GATEWAY_API_CRDS]);
    server.apply(kubernetesGateway("gw"));
    server.apply(httpRoute("web"));
    server.apply(gatewayClass);
    const ingest = await startIngestOn(kubeconfig);
    const stored = async (path: string) => {
      const { status, json } = await get(`${ingest.url}/v1/config/${path}`);
      return status === 200 ? json : undefined;
    };
    await eventually(() => stored(`gateways.${GROUP}/shop/gw`), { message: "Gateway stored" });
    await eventually(() => stored("httproutes/shop/web"), { message: "HTTPRoute stored" });
    // Cluster-scoped: kept under "default", shown without a namespace.
    const cls = await eventually(() => stored("gatewayclasses/default/istio"), {
      message: "GatewayClass stored",
    });
    assert.equal(cls.metadata.namespace, undefined);
    assert.equal(cls.spec.controllerName, "istio.io/gateway-controller");

    server.apply(httpRoute("web", 9081));
    await eventually(
      async () => (await stored("httproutes/shop/web"))?.spec.rules[0].backendRefs[0].port === 9081,
      {
        message: "the change stored",
      },
    );
    // An object the rules reject is not stored; what was stored before stays.
    const invalid = httpRoute("web");
    invalid.spec.rules[0]!.matches = [{ path: { type: "PathPrefix", value: "relative" } }];
    server.apply(invalid);
    server.apply(httpRoute("other"));
    await eventually(() => stored("httproutes/shop/other"), { message: "a later object stored" });
    assert.equal((await stored("httproutes/shop/web"))?.spec.rules[0].backendRefs[0].port, 9081);

    server.delete({ apiVersion: `${GROUP}/v1`, kind: "HTTPRoute", namespace: "shop", name: "other" });
    await eventually(async () => (await stored("httproutes/shop/other")) === undefined, {
      message: "deleted",
    });
    // Their status is the Gateway API's (see below), never Istio's validationMessages, even when invalid.
    const route = server.get({
      apiVersion: `${GROUP}/v1`,
      kind: "HTTPRoute",
      namespace: "shop",
      name: "web",
    });
    assert.equal(
      (route?.status as { validationMessages?: unknown } | undefined)?.validationMessages,
      undefined,
    );
  });

  it("writes the Gateway API status to the objects: Gateway Accepted and Programmed, the route's parents, BackendNotFound until the Service exists", async () => {
    const { server, kubeconfig } = await startWith([...ISTIO_CRDS, ...GATEWAY_API_CRDS]);
    await registerService(env.bus, "gw-istio", "shop", 80);
    server.apply(gatewayClass);
    server.apply(kubernetesGateway("gw"));
    // Another implementation's class and Gateway: their status is its controller's.
    server.apply({
      ...gatewayClass,
      metadata: { name: "other" },
      spec: { controllerName: "example.com/other" },
    });
    const theirs = kubernetesGateway("theirs");
    theirs.spec.gatewayClassName = "other";
    server.apply(theirs);
    // An earlier spec first, so that the object's generation (2) is not Sextant's (1); and
    // another controller's parent in its status, which must stay.
    const otherParent = {
      parentRef: { group: GROUP, kind: "Gateway", name: "theirs" },
      controllerName: "example.com/other-controller",
      conditions: [
        {
          type: "Accepted",
          status: "True",
          reason: "Accepted",
          message: "theirs",
          observedGeneration: 2,
          lastTransitionTime: "2026-01-01T00:00:00Z",
        },
      ],
    };
    server.apply(httpRoute("web", 9081));
    server.apply({ ...httpRoute("web"), status: { parents: [otherParent] } });
    const ingest = await startIngestOn(kubeconfig);
    const ref = (kind: string, name: string) => ({
      apiVersion: `${GROUP}/v1`,
      kind,
      namespace: "shop",
      name,
    });
    type Status = Record<string, Json>;
    const statusOf = (kind: string, name: string) => (server.get(ref(kind, name))?.status ?? {}) as Status;

    const parents = await eventually(
      () => {
        const { parents } = statusOf("HTTPRoute", "web");
        return parents?.length === 2 && parents;
      },
      { message: "the route's parents status" },
    );
    assert.deepEqual(parents[0], otherParent);
    assert.deepEqual(parents[1].parentRef, { group: GROUP, kind: "Gateway", name: "gw" });
    assert.deepEqual(conditionsOf(parents[1].conditions), [
      "Accepted True Accepted",
      "ResolvedRefs False BackendNotFound",
    ]);
    assert.deepEqual(
      parents[1].conditions.map((c: Json) => c.observedGeneration),
      [2, 2],
      "the object's generation",
    );
    const gateway = await eventually(
      () => {
        const status = statusOf("Gateway", "gw");
        return status.conditions && status;
      },
      { message: "the Gateway's status" },
    );
    assert.deepEqual(conditionsOf(gateway.conditions), [
      "Accepted True Accepted",
      "Programmed True Programmed",
      "ResolvedRefs True ResolvedRefs",
    ]);
    assert.deepEqual(gateway.addresses, [{ type: "Hostname", value: "gw-istio.shop.svc.cluster.local" }]);
    assert.equal(gateway.listeners[0].attachedRoutes, 1);
    const cls = await eventually(
      () => server.get({ apiVersion: `${GROUP}/v1`, kind: "GatewayClass", name: "istio" })?.status,
      {
        message: "the GatewayClass's status",
      },
    );
    assert.deepEqual(conditionsOf((cls as Status).conditions), ["Accepted True Accepted"]);
    assert.equal((cls as Status).validationMessages, undefined, "no Istio validationMessages");

    // Computed in the same snapshot as the others: another controller's resources got no status.
    assert.equal((await get(`${ingest.url}/v1/config/gateways.${GROUP}/shop/theirs`)).json.status, undefined);
    assert.equal((await get(`${ingest.url}/v1/config/gatewayclasses/default/other`)).json.status, undefined);
    assert.equal(server.requestCount({ verb: "patch", subresource: "status", name: "theirs" }), 0);
    assert.equal(server.requestCount({ verb: "patch", subresource: "status", name: "other" }), 0);

    // Fixed: the backend Service appears; the route's ResolvedRefs turns True.
    await registerService(env.bus, "web", "shop", 9080);
    await eventually(() => statusOf("HTTPRoute", "web").parents?.[1]?.conditions?.[1]?.status === "True", {
      message: "ResolvedRefs True once the Service exists",
    });

    // The route moves to the other controller's Gateway: Sextant's entry goes, the other's stays.
    const moved = httpRoute("web");
    moved.spec.parentRefs = [{ name: "theirs" }];
    server.apply({ ...moved, status: statusOf("HTTPRoute", "web") });
    await eventually(() => isDeepStrictEqual(statusOf("HTTPRoute", "web").parents, [otherParent]), {
      message: "Sextant's parent entry removed",
    });
  });

  it("becomes ready on a cluster without the Gateway API's CRDs, watching Istio's kinds alone", async () => {
    const { server, kubeconfig } = await startWith(ISTIO_CRDS);
    server.apply({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "reviews-kube", namespace: "default" },
      spec: { hosts: ["reviews"], http: [{ route: [{ destination: { host: "reviews" } }] }] },
    });
    const ingest = await startIngestOn(kubeconfig);
    const vs = await get(`${ingest.url}/v1/config/VirtualService/default/reviews-kube`);
    assert.equal(vs.status, 200);
    assert.equal(server.requestCount({ verb: "watch", resource: "httproutes" }), 0);
  });
});
