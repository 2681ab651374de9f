import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { Buckets } from "@sextant/bus";
import { configKey } from "@sextant/model";
import {
  bookinfoNetworkingDir,
  eventually,
  type FakeKubeApiServer,
  type KubeObject,
  type ResourceDefinition,
  startFakeKubeApiServer,
} from "@sextant/testing";
import { parseAllDocuments } from "yaml";
import { get, type IngestFixture, post, startIngest, startNatsWithClient } from "./harness.js";

/** Istio's CRDs as a cluster serves them: every version, the first one stored, with a status subresource. */
const ISTIO_CRDS: ResourceDefinition[] = [
  ...[
    ["VirtualService", "virtualservices"],
    ["DestinationRule", "destinationrules"],
    ["Gateway", "gateways"],
    ["ServiceEntry", "serviceentries"],
    ["WorkloadEntry", "workloadentries"],
    ["WorkloadGroup", "workloadgroups"],
    ["Sidecar", "sidecars"],
  ].map(([kind, plural]) => ({
    group: "networking.istio.io",
    versions: ["v1alpha3", "v1beta1", "v1"],
    kind: kind!,
    plural: plural!,
    namespaced: true,
    subresources: { status: {} },
  })),
  ...[
    ["PeerAuthentication", "peerauthentications"],
    ["AuthorizationPolicy", "authorizationpolicies"],
    ["RequestAuthentication", "requestauthentications"],
  ].map(([kind, plural]) => ({
    group: "security.istio.io",
    versions: ["v1beta1", "v1"],
    kind: kind!,
    plural: plural!,
    namespaced: true,
    subresources: { status: {} },
  })),
  {
    group: "extensions.istio.io",
    versions: ["v1alpha1"],
    kind: "WasmPlugin",
    plural: "wasmplugins",
    namespaced: true,
    subresources: { status: {} },
  },
  // Istio serves ProxyConfig in v1beta1 only.
  {
    group: "networking.istio.io",
    versions: ["v1beta1"],
    kind: "ProxyConfig",
    plural: "proxyconfigs",
    namespaced: true,
    subresources: { status: {} },
  },
  // Istio serves EnvoyFilter at v1alpha3 only.
  {
    group: "networking.istio.io",
    versions: ["v1alpha3"],
    kind: "EnvoyFilter",
    plural: "envoyfilters",
    namespaced: true,
    subresources: { status: {} },
  },
  // Istio serves Telemetry at v1 and v1alpha1.
  {
    group: "telemetry.istio.io",
    versions: ["v1alpha1", "v1"],
    kind: "Telemetry",
    plural: "telemetries",
    namespaced: true,
    subresources: { status: {} },
  },
];

/** Bookinfo samples with no name used twice, created in the cluster before ingest starts. */
const BOOKINFO_FILES = [
  "bookinfo-gateway.yaml",
  "destination-rule-all.yaml",
  "virtual-service-all-v1.yaml",
  "egress-rule-google-apis.yaml",
];

const VS = { group: "networking.istio.io", version: "v1", plural: "virtualservices", namespace: "default" };

function bookinfoObjects(): KubeObject[] {
  return BOOKINFO_FILES.flatMap((file) =>
    parseAllDocuments(readFileSync(join(bookinfoNetworkingDir(), file), "utf8"))
      .map((document) => document.toJSON() as KubeObject | null)
      .filter((object): object is KubeObject => object !== null),
  );
}

function virtualService(name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}) {
  return {
    apiVersion: "networking.istio.io/v1",
    kind: "VirtualService",
    metadata: { name, namespace: "default", ...metadata },
    spec,
  };
}

/** What ingest writes to an object's status subresource. */
interface WrittenStatus {
  observedGeneration?: number;
  validationMessages?: Array<{
    type: { code: string; name: string };
    level: string;
    documentationUrl?: string;
    message: string;
  }>;
}

const route = (host: string, extra: Record<string, unknown> = {}) => ({
  hosts: [host],
  ...extra,
  http: [{ route: [{ destination: { host } }] }],
});

describe("Kubernetes source", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let server: FakeKubeApiServer;
  let serverClosed = false;
  let api: CustomObjectsApi;
  let ingest: IngestFixture;
  let dir: string;
  let kubeconfig: string;

  const start = () => startIngest(env.nats.url, { KUBERNETES_CONFIG: "true", KUBECONFIG: kubeconfig });
  const isReady = async () => (await fetch(`${ingest.url}/ready`)).status === 200;
  const stored = async (kind: string, name: string) => {
    const { status, json } = await get(`${ingest.url}/v1/config/${kind}/default/${name}`);
    return status === 200 ? json : undefined;
  };
  const kubeVs = (name: string) =>
    server.get({ apiVersion: "networking.istio.io/v1", kind: "VirtualService", namespace: "default", name });
  const statusPatches = (name: string) =>
    server.requestCount({ verb: "patch", subresource: "status", resource: "virtualservices", name });
  const sources = async () =>
    new Map(
      (await (await env.bus.bucket(Buckets.configStatus)).list()).map((entry) => [
        entry.key,
        entry.value.source,
      ]),
    );
  /** The store holds exactly the cluster's VirtualServices (besides resources other sources own). */
  const converged = async () => {
    const inCluster = new Set(
      server
        .objects({ group: "networking.istio.io", resource: "virtualservices" })
        .map((o) => o.metadata!.name!),
    );
    const { json } = await get(`${ingest.url}/v1/config?kind=VirtualService&namespace=default`);
    const inStore = new Set<string>(
      json.items.map((item: { metadata: { name: string } }) => item.metadata.name),
    );
    const owners = await sources();
    const missing = [...inCluster].filter((name) => !inStore.has(name));
    const extra = [...inStore].filter(
      (name) =>
        !inCluster.has(name) &&
        owners.get(configKey({ kind: "VirtualService", namespace: "default", name })) === "kubernetes",
    );
    return missing.length === 0 && extra.length === 0;
  };
  /** A round trip through the source's queue: once it is stored, earlier events have been handled. */
  const roundTrip = async (name: string) => {
    server.apply(virtualService(name, route(name)));
    await eventually(() => stored("VirtualService", name), { message: `${name} stored` });
  };

  before(async () => {
    env = await startNatsWithClient();
    server = await startFakeKubeApiServer({ resources: ISTIO_CRDS });
    api = server.kubeConfig(KubeConfig).makeApiClient(CustomObjectsApi);
    dir = mkdtempSync(join(tmpdir(), "sextant-kube-"));
    kubeconfig = join(dir, "kubeconfig");
    writeFileSync(kubeconfig, server.kubeconfigYaml());
    for (const object of bookinfoObjects()) server.apply(object);
    ingest = await start();
    await eventually(isReady, { message: "ingest ready" });
  });
  after(async () => {
    await ingest?.stop();
    if (!serverClosed) await server?.close();
    await env?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("stores every Bookinfo resource of the cluster before it reports ready", async () => {
    // No waiting here: ready must mean the initial lists are stored.
    const { json } = await get(`${ingest.url}/v1/config?namespace=default`);
    const names = (items: Array<{ kind: string; metadata: { name: string } }>) =>
      items.map((item) => `${item.kind}/${item.metadata.name}`).sort();
    const expected = bookinfoObjects().map((object) => ({
      kind: object.kind!,
      metadata: { name: object.metadata!.name! },
    }));
    assert.deepEqual(names(json.items), names(expected));
    assert.ok(json.items.every((item: { apiVersion: string }) => item.apiVersion.endsWith("/v1")));
    const reviews = await stored("DestinationRule", "reviews");
    assert.deepEqual(
      reviews.spec.subsets.map((subset: { name: string }) => subset.name),
      ["v1", "v2", "v3"],
    );
  });

  it("stores a ProxyConfig, which the cluster serves at v1beta1 only", async () => {
    server.apply({
      apiVersion: "networking.istio.io/v1beta1",
      kind: "ProxyConfig",
      metadata: { name: "threads", namespace: "default" },
      spec: { concurrency: 2, environmentVariables: { A: "b" } },
    });
    const pc = await eventually(() => stored("ProxyConfig", "threads"), { message: "ProxyConfig stored" });
    assert.equal(pc.apiVersion, "networking.istio.io/v1beta1");
    assert.deepEqual(pc.spec, { concurrency: 2, environmentVariables: { A: "b" } });
  });

  it("follows creates, updates and deletes made through the API server", async () => {
    await api.createNamespacedCustomObject({ ...VS, body: virtualService("follow", route("follow")) });
    const created = await eventually(() => stored("VirtualService", "follow"), { message: "created" });
    assert.equal(created.metadata.generation, 1);

    await api.patchNamespacedCustomObject(
      { ...VS, name: "follow", body: { spec: route("follow", { gateways: ["mesh"] }) } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const updated = await eventually(
      async () => {
        const resource = await stored("VirtualService", "follow");
        return resource?.spec.gateways?.[0] === "mesh" && resource;
      },
      { message: "updated" },
    );
    assert.equal(updated.metadata.generation, 2);

    await api.deleteNamespacedCustomObject({ ...VS, name: "follow" });
    await eventually(async () => !(await stored("VirtualService", "follow")), { message: "deleted" });
  });

  it("stores an EnvoyFilter created at v1alpha3, the only version Istio serves it at", async () => {
    server.apply({
      apiVersion: "networking.istio.io/v1alpha3",
      kind: "EnvoyFilter",
      metadata: { name: "header", namespace: "default" },
      spec: {
        configPatches: [
          {
            applyTo: "ROUTE_CONFIGURATION",
            patch: {
              operation: "MERGE",
              value: { response_headers_to_add: [{ header: { key: "x", value: "y" } }] },
            },
          },
        ],
      },
    });
    const created = await eventually(() => stored("EnvoyFilter", "header"), { message: "stored" });
    assert.equal(created.apiVersion, "networking.istio.io/v1alpha3");
    assert.equal(created.spec.configPatches[0].applyTo, "ROUTE_CONFIGURATION");
  });

  it("does not store an invalid object and writes its errors to its status, as Istio does", async () => {
    server.apply(virtualService("broken", route("broken", { gateways: ["not a gateway!"] })));
    const status = await eventually(() => kubeVs("broken")?.status as WrittenStatus | undefined, {
      message: "status written",
    });
    assert.equal(await stored("VirtualService", "broken"), undefined);
    assert.equal(status.observedGeneration, kubeVs("broken")!.metadata!.generation);
    assert.equal(status.validationMessages?.length, 1);
    const message = status.validationMessages![0]!;
    assert.deepEqual(message.type, { code: "IST0106", name: "SchemaValidationError" });
    assert.equal(message.level, "ERROR");
    assert.equal(message.documentationUrl, "https://istio.io/latest/docs/reference/config/analysis/ist0106/");
    assert.match(message.message, /^spec\.gateways\[0\]: .*not a gateway!/);
    const { json: analysis } = await get(`${ingest.url}/v1/analyze`);
    assert.ok(
      analysis.sources.some(
        (s: { source: string }) => s.source === "kubernetes:VirtualService default/broken",
      ),
    );

    // Fixed: stored, and the status says so for the new generation.
    server.apply(virtualService("broken", route("broken")));
    await eventually(() => stored("VirtualService", "broken"), { message: "stored once valid" });
    await eventually(
      () => {
        const object = kubeVs("broken")!;
        const fixed = object.status as Record<string, unknown>;
        return (
          fixed.observedGeneration === object.metadata!.generation && fixed.validationMessages === undefined
        );
      },
      { message: "status cleared" },
    );
    const { json: after } = await get(`${ingest.url}/v1/analyze`);
    assert.deepEqual(after.sources, []);

    // A change that leaves the status as it is must not write it again (each write is a MODIFIED event).
    const writes = statusPatches("broken");
    // Through the main resource, as kubectl would: it leaves the status alone.
    await api.patchNamespacedCustomObject(
      { ...VS, name: "broken", body: { metadata: { labels: { team: "a" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await eventually(async () => (await stored("VirtualService", "broken"))?.metadata.labels?.team === "a");
    await roundTrip("after-broken");
    assert.equal(statusPatches("broken"), writes);
  });

  it("writes analysis messages of a stored object to its status", async () => {
    server.apply(virtualService("lost", route("lost", { gateways: ["missing-gw"] })));
    const message = await eventually(
      () =>
        (kubeVs("lost")?.status as WrittenStatus | undefined)?.validationMessages?.find(
          (m) => m.type.code === "IST0101",
        ),
      { message: "analysis message in status" },
    );
    assert.deepEqual(message, {
      type: { code: "IST0101", name: "ReferencedResourceNotFound" },
      level: "ERROR",
      documentationUrl: "https://istio.io/latest/docs/reference/config/analysis/ist0101/",
      message: 'spec.gateways[0]: Referenced gateway not found: "default/missing-gw"',
    });
    assert.ok(await stored("VirtualService", "lost"));

    server.apply({
      apiVersion: "networking.istio.io/v1beta1",
      kind: "Gateway",
      metadata: { name: "missing-gw", namespace: "default" },
      spec: {
        selector: { istio: "ingressgateway" },
        servers: [{ port: { number: 80, name: "http", protocol: "HTTP" }, hosts: ["*"] }],
      },
    });
    await eventually(
      () => (kubeVs("lost")!.status as Record<string, unknown>).validationMessages === undefined,
      {
        message: "message cleared once the gateway exists",
      },
    );
  });

  it("stores the same value as the HTTP API for the same resource", async () => {
    // Created as kubectl apply would: the API server adds uid, resourceVersion,
    // generation, creationTimestamp; kubectl adds last-applied-configuration.
    server.apply({
      ...virtualService(
        "same",
        {
          hosts: ["same"],
          http: [{ timeout: "10s", route: [{ destination: { host: "same", subset: "v1" } }] }],
        },
        {
          labels: { app: "same" },
          annotations: { note: "hi", "kubectl.kubernetes.io/last-applied-configuration": "{}" },
        },
      ),
      status: { conditions: [{ type: "Reconciled", status: "True" }] },
    });
    const key = configKey({ kind: "VirtualService", namespace: "default", name: "same" });
    const config = await env.bus.bucket(Buckets.config);
    const fromKubernetes = await eventually(() => config.get(key), { message: "stored from kubernetes" });

    const yaml = [
      "apiVersion: networking.istio.io/v1",
      "kind: VirtualService",
      "metadata:",
      "  name: same",
      "  labels: {app: same}",
      "  annotations: {note: hi}",
      "spec:",
      "  hosts: [same]",
      "  http:",
      "  - timeout: 10s",
      "    route:",
      "    - destination: {host: same, subset: v1}",
    ].join("\n");
    const { status, json } = await post(`${ingest.url}/v1/apply`, yaml);
    assert.equal(status, 200);
    assert.equal(json.resources[0].result, "unchanged", "the HTTP apply found the very same value");
    const fromHttp = await config.get(key);
    assert.equal(fromHttp?.revision, fromKubernetes.revision);
    assert.deepEqual(fromHttp?.value, fromKubernetes.value);
  });

  it("loses and duplicates nothing across dropped watches and a 410 Gone", async () => {
    const config = await env.bus.bucket(Buckets.config);
    const untouched = configKey({ kind: "VirtualService", namespace: "default", name: "productpage" });
    const revisionBefore = (await config.get(untouched))?.revision;
    const lists = () => server.requestCount({ verb: "list", resource: "virtualservices" });
    const listsBefore = lists();

    // A dropped watch: changes made meanwhile arrive once it re-watches.
    server.pauseWatches();
    assert.ok(server.dropWatches() >= 1);
    server.apply(virtualService("during-drop", route("during-drop")));
    server.delete({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      namespace: "default",
      name: "details",
    });
    server.apply(virtualService("ratings", route("ratings", { gateways: ["mesh"] })));
    server.resumeWatches();
    await eventually(async () => (await stored("VirtualService", "ratings"))?.spec.gateways?.[0] === "mesh", {
      message: "update made while disconnected",
    });
    await eventually(converged, { message: "converged after a dropped watch" });

    // Compaction while away: the re-watch gets 410 Gone and the informer relists.
    server.pauseWatches();
    server.dropWatches();
    server.apply(virtualService("after-compact", route("after-compact")));
    server.delete({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      namespace: "default",
      name: "during-drop",
    });
    server.compact();
    server.resumeWatches();
    await eventually(() => lists() > listsBefore, { message: "relisted after 410" });
    await eventually(converged, { message: "converged after a relist" });
    assert.ok(await stored("VirtualService", "after-compact"));
    assert.equal(await stored("VirtualService", "during-drop"), undefined);
    assert.equal(await stored("VirtualService", "details"), undefined);
    assert.equal(
      (await config.get(untouched))?.revision,
      revisionBefore,
      "an unchanged object is not rewritten",
    );
  });

  it("after a restart, deletes what the cluster lost meanwhile and keeps what another source owns", async () => {
    await ingest.stop();
    server.delete({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      namespace: "default",
      name: "reviews",
    });
    // "same" was last applied over HTTP: it is not the cluster's to delete.
    server.delete({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      namespace: "default",
      name: "same",
    });
    server.apply(virtualService("while-down", route("while-down")));
    ingest = await start();
    await eventually(isReady, { message: "ready after restart" });
    assert.equal(await stored("VirtualService", "reviews"), undefined);
    assert.ok(await stored("VirtualService", "same"));
    assert.ok(await stored("VirtualService", "while-down"));
    assert.ok(await stored("DestinationRule", "reviews"));
  });

  it("retries failed lists with a backoff and gets ready", async () => {
    await ingest.stop();
    const lists = () => server.requestCount({ verb: "list", resource: "gateways" });
    const listsBefore = lists();
    server.injectFailure({ verb: "list", resource: "gateways" }, { code: 500, reason: "InternalError" }, 3);
    ingest = await start();
    await eventually(isReady, { message: "ready despite failing lists" });
    assert.equal(lists() - listsBefore, 4, "three failures, then one list that worked");
    const metrics = await (await fetch(`${ingest.url}/metrics`)).text();
    assert.match(metrics, /sextant_ingest_kubernetes_watch_failures_total\{kind="Gateway"[^}]*\} 3\n/);
    assert.ok(await stored("Gateway", "bookinfo-gateway"));
  });

  it("keeps serving when the API server goes away", async () => {
    const failures = async () => {
      const metrics = await (await fetch(`${ingest.url}/metrics`)).text();
      return [
        ...metrics.matchAll(
          /sextant_ingest_kubernetes_watch_failures_total\{kind="VirtualService"[^}]*\} (\d+)/g,
        ),
      ]
        .map((match) => Number(match[1]))
        .reduce((sum, n) => sum + n, 0);
    };
    const before = await failures();
    await server.close();
    serverClosed = true;
    await eventually(async () => (await failures()) >= before + 2, {
      message: "the informer keeps retrying",
    });
    const { status } = await get(`${ingest.url}/v1/config/VirtualService/default/while-down`);
    assert.equal(status, 200, "what was stored stays, and the API still answers");
  });
});
