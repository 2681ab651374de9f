import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  AppsV1Api,
  AuthenticationV1Api,
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  KubeConfig,
  type KubernetesObject,
  makeInformer,
  PatchStrategy,
  setHeaderOptions,
  type V1Service,
  Watch,
} from "@kubernetes/client-node";
import { type FakeKubeApiServer, type KubeObject, startFakeKubeApiServer } from "../src/kube/index.js";
import { eventually } from "../src/wait.js";

const virtualServices = {
  group: "networking.istio.io",
  versions: ["v1", "v1beta1", "v1alpha3"],
  kind: "VirtualService",
  plural: "virtualservices",
  namespaced: true,
  subresources: { status: {} },
};

interface Recorded {
  type: string;
  object: KubeObject;
}

/** A raw watch through the client's Watch class, recording every event. */
async function recordWatch(kc: KubeConfig, path: string, query: Record<string, string | boolean | number>) {
  const events: Recorded[] = [];
  let finished: (err: unknown) => void = () => {};
  const done = new Promise<unknown>((resolve) => {
    finished = resolve;
  });
  const controller = await new Watch(kc).watch(
    path,
    query,
    (type: string, object: KubeObject) => events.push({ type, object }),
    (err: unknown) => finished(err),
  );
  return { events, done, stop: () => controller.abort() };
}

/** The Status body of a failed client call (ApiException.body is JSON text or already parsed). */
async function failure(
  call: Promise<unknown>,
): Promise<{ code: number; reason: string; kind: string; status: string }> {
  try {
    await call;
  } catch (err) {
    const e = err as { code?: number; body?: unknown };
    const body = typeof e.body === "string" ? JSON.parse(e.body) : e.body;
    assert.equal(body.code, e.code, "Status.code matches the HTTP status");
    return body;
  }
  assert.fail("the call was expected to fail");
}

/** Resolves like `promise`, or fails once the (generous) deadline passes, so a hang is a failure. */
function within<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Restarts an informer whenever it reports an error, the client's documented
 * pattern: an abrupt reset reaches ListWatch as an error, and a restart
 * resumes from its last resourceVersion. Returns the function that stops it.
 */
function restartOnError(informer: Informer<KubernetesObject>): () => Promise<void> {
  let running = true;
  informer.on("error", () =>
    setTimeout(() => {
      if (running) void informer.start();
    }, 20),
  );
  return async () => {
    running = false;
    await informer.stop();
  };
}

function service(name: string, labels: Record<string, string> = {}): V1Service {
  return {
    metadata: { name, labels },
    spec: { ports: [{ port: 80, protocol: "TCP" }], selector: { app: name } },
  };
}

describe("fake kube-apiserver", () => {
  let server: FakeKubeApiServer;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  before(async () => {
    server = await startFakeKubeApiServer({ bookmarkIntervalMs: 100, resources: [virtualServices] });
    kc = server.kubeConfig(KubeConfig);
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
  });
  after(async () => {
    await server.close();
  });

  it("serves list then watch from the list's resourceVersion: only later adds, updates and deletes", async () => {
    await core.createNamespace({ body: { metadata: { name: "lw" } } });
    await core.createNamespacedService({ namespace: "lw", body: service("before") });
    const list = await core.listNamespacedService({ namespace: "lw" });
    assert.deepEqual(
      list.items.map((s) => s.metadata?.name),
      ["before"],
    );
    const listRv = list.metadata?.resourceVersion;
    assert.match(listRv ?? "", /^\d+$/);

    const watch = await recordWatch(kc, "/api/v1/namespaces/lw/services", { resourceVersion: listRv! });
    const created = await core.createNamespacedService({ namespace: "lw", body: service("after") });
    created.spec!.ports = [{ port: 8080, protocol: "TCP" }];
    await core.replaceNamespacedService({ namespace: "lw", name: "after", body: created });
    await core.deleteNamespacedService({ namespace: "lw", name: "after" });
    await eventually(() => watch.events.length >= 3, { message: "three watch events" });
    watch.stop();

    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.metadata?.name]),
      [
        ["ADDED", "after"],
        ["MODIFIED", "after"],
        ["DELETED", "after"],
      ],
    );
    const rvs = watch.events.map((e) => Number(e.object.metadata?.resourceVersion));
    assert.ok(rvs[0]! > Number(listRv), "events are newer than the list");
    assert.ok(rvs[0]! < rvs[1]! && rvs[1]! < rvs[2]!, "resourceVersions increase, the DELETED one included");
    assert.equal(watch.events[0]!.object.kind, "Service");
    assert.equal(watch.events[0]!.object.apiVersion, "v1");
  });

  it("starts a watch without resourceVersion with synthetic ADDED events for what exists", async () => {
    await core.createNamespace({ body: { metadata: { name: "synthetic" } } });
    await core.createNamespacedConfigMap({ namespace: "synthetic", body: { metadata: { name: "one" } } });
    await core.createNamespacedConfigMap({ namespace: "synthetic", body: { metadata: { name: "two" } } });
    for (const query of [{}, { resourceVersion: "0" }] as Array<Record<string, string>>) {
      const watch = await recordWatch(kc, "/api/v1/namespaces/synthetic/configmaps", query);
      await eventually(() => watch.events.length >= 2);
      watch.stop();
      assert.deepEqual(
        watch.events.map((e) => [e.type, e.object.metadata?.name]),
        [
          ["ADDED", "one"],
          ["ADDED", "two"],
        ],
      );
    }
  });

  it("streams the initial state for sendInitialEvents, ending it with an annotated BOOKMARK", async () => {
    const watch = await recordWatch(kc, "/api/v1/namespaces/synthetic/configmaps", {
      sendInitialEvents: true,
      resourceVersionMatch: "NotOlderThan",
      allowWatchBookmarks: true,
    });
    await eventually(() => watch.events.length >= 3);
    watch.stop();
    assert.deepEqual(
      watch.events.slice(0, 3).map((e) => [e.type, e.object.metadata?.name]),
      [
        ["ADDED", "one"],
        ["ADDED", "two"],
        ["BOOKMARK", undefined],
      ],
    );
    assert.deepEqual(watch.events[2]!.object.metadata?.annotations, { "k8s.io/initial-events-end": "true" });
    const refused = await fetch(`${server.url}/api/v1/configmaps?watch=true&sendInitialEvents=true`);
    assert.equal(refused.status, 422, "sendInitialEvents needs bookmarks and resourceVersionMatch");
  });

  it("sends BOOKMARK events carrying only kind, apiVersion and resourceVersion, and only when asked", async () => {
    const rv = server.resourceVersion();
    const plain = await recordWatch(kc, "/api/v1/nodes", { resourceVersion: rv });
    const bookmarked = await recordWatch(kc, "/api/v1/nodes", {
      resourceVersion: rv,
      allowWatchBookmarks: true,
    });
    await eventually(() => bookmarked.events.filter((e) => e.type === "BOOKMARK").length >= 2, {
      message: "two bookmarks",
    });
    bookmarked.stop();
    plain.stop();
    const bookmark = bookmarked.events[0]!;
    assert.equal(bookmark.type, "BOOKMARK");
    assert.deepEqual(bookmark.object, { kind: "Node", apiVersion: "v1", metadata: { resourceVersion: rv } });
    assert.deepEqual(plain.events, [], "no bookmarks without allowWatchBookmarks");
  });

  it("honours timeoutSeconds by ending the stream cleanly", async () => {
    const watch = await recordWatch(kc, "/api/v1/nodes", {
      resourceVersion: server.resourceVersion(),
      timeoutSeconds: 1,
    });
    assert.equal(await within(watch.done, 10_000), null, "a clean end, not an error");
  });

  it("filters list and watch by label and field selectors; an object leaving the selection is DELETED", async () => {
    await core.createNamespace({ body: { metadata: { name: "sel" } } });
    await core.createNamespacedService({ namespace: "sel", body: service("web", { tier: "front" }) });
    await core.createNamespacedService({ namespace: "sel", body: service("db", { tier: "back" }) });
    const front = await core.listNamespacedService({
      namespace: "sel",
      labelSelector: "tier in (front,edge)",
    });
    assert.deepEqual(
      front.items.map((s) => s.metadata?.name),
      ["web"],
    );
    const notFront = await core.listServiceForAllNamespaces({ labelSelector: "tier,tier!=front" });
    assert.deepEqual(
      notFront.items.map((s) => s.metadata?.name),
      ["db"],
    );
    const byName = await core.listServiceForAllNamespaces({
      fieldSelector: "metadata.name=db,metadata.namespace=sel",
    });
    assert.deepEqual(
      byName.items.map((s) => s.metadata?.name),
      ["db"],
    );
    const bad = await failure(
      core.listNamespacedService({ namespace: "sel", fieldSelector: "spec.selector=x" }),
    );
    assert.equal(bad.code, 400);

    const watch = await recordWatch(kc, "/api/v1/namespaces/sel/services", {
      resourceVersion: front.metadata!.resourceVersion!,
      labelSelector: "tier=front",
    });
    await core.patchNamespacedService(
      { namespace: "sel", name: "web", body: { metadata: { labels: { tier: "back" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await core.patchNamespacedService(
      { namespace: "sel", name: "db", body: { metadata: { labels: { tier: "front" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await eventually(() => watch.events.length >= 2);
    watch.stop();
    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.metadata?.name]),
      [
        ["DELETED", "web"],
        ["ADDED", "db"],
      ],
    );
  });

  it("keeps an informer's cache exact across dropped watches: it re-watches without relisting", async () => {
    await core.createNamespace({ body: { metadata: { name: "drop" } } });
    await core.createNamespacedService({ namespace: "drop", body: service("a") });
    await core.createNamespacedService({ namespace: "drop", body: service("b") });
    const path = "/api/v1/namespaces/drop/services";
    const informer = makeInformer(kc, path, () => core.listNamespacedService({ namespace: "drop" }));
    const adds = new Map<string, number>();
    const deletes = new Map<string, number>();
    const bump = (m: Map<string, number>, o: KubernetesObject) =>
      m.set(o.metadata!.name!, (m.get(o.metadata!.name!) ?? 0) + 1);
    informer.on("add", (o) => bump(adds, o));
    informer.on("delete", (o) => bump(deletes, o));
    const stopInformer = restartOnError(informer);
    const lists = () => server.requestCount({ verb: "list", resource: "services", namespace: "drop" });
    try {
      await informer.start();
      await eventually(() => server.watchCount({ resource: "services" }) >= 1);
      assert.equal(lists(), 1);

      // Changes made while the informer is disconnected must not be lost.
      server.pauseWatches();
      assert.ok(server.dropWatches() >= 1);
      await core.createNamespacedService({ namespace: "drop", body: service("c") });
      await core.deleteNamespacedService({ namespace: "drop", name: "b" });
      server.resumeWatches();
      await eventually(() => server.watchCount({ resource: "services" }) >= 1, { message: "re-watched" });

      assert.equal(server.dropWatches({ mode: "end" }), 1);
      await core.patchNamespacedService(
        { namespace: "drop", name: "a", body: { metadata: { annotations: { touched: "yes" } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      );
      await eventually(() => informer.get("a", "drop")?.metadata?.annotations?.touched === "yes", {
        message: "update seen after a clean end",
      });
      await assertConverged(server, informer, "drop");
      assert.deepEqual(Object.fromEntries(adds), { a: 1, b: 1, c: 1 }, "each object added exactly once");
      assert.deepEqual(Object.fromEntries(deletes), { b: 1 });
      assert.equal(lists(), 1, "re-watching from a resourceVersion needs no relist");
    } finally {
      await stopInformer();
    }
  });

  it("answers a watch from a compacted resourceVersion with an ERROR event carrying 410 Expired", async () => {
    const stale = server.resourceVersion();
    await core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "newer" } } });
    server.compact();
    const watch = await recordWatch(kc, "/api/v1/namespaces/default/configmaps", { resourceVersion: stale });
    assert.equal(await within(watch.done, 10_000), null, "the stream closes after the ERROR event");
    assert.equal(watch.events.length, 1);
    const [event] = watch.events;
    assert.equal(event!.type, "ERROR");
    assert.deepEqual(event!.object, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `too old resource version: ${stale} (${server.resourceVersion()})`,
      reason: "Expired",
      code: 410,
    });
    const watchRequest = server.requestsMatching({ verb: "watch", resource: "configmaps" }).at(-1);
    assert.equal(watchRequest?.statusCode, 200, "the 410 travels inside a 200 stream");
  });

  it("makes an informer relist after 410 Gone and converge", async () => {
    await core.createNamespace({ body: { metadata: { name: "gone" } } });
    await core.createNamespacedService({ namespace: "gone", body: service("keep") });
    await core.createNamespacedService({ namespace: "gone", body: service("drop-me") });
    const informer = makeInformer(kc, "/api/v1/namespaces/gone/services", () =>
      core.listNamespacedService({ namespace: "gone" }),
    );
    const deleted: string[] = [];
    informer.on("delete", (o) => deleted.push(o.metadata!.name!));
    const stopInformer = restartOnError(informer);
    const lists = () => server.requestCount({ verb: "list", resource: "services", namespace: "gone" });
    try {
      await informer.start();
      await eventually(() => server.watchCount({ resource: "services" }) >= 1);
      assert.equal(lists(), 1);

      server.pauseWatches();
      server.dropWatches();
      await core.createNamespacedService({ namespace: "gone", body: service("new") });
      await core.deleteNamespacedService({ namespace: "gone", name: "drop-me" });
      server.compact();
      server.resumeWatches();

      await eventually(() => lists() >= 2, { message: "the informer relisted" });
      await assertConverged(server, informer, "gone");
      assert.deepEqual(deleted, ["drop-me"], "the relist reports what vanished meanwhile");
    } finally {
      await stopInformer();
    }
  });

  it("keeps status behind the status subresource for Pods", async () => {
    const pod = await core.createNamespacedPod({
      namespace: "default",
      body: {
        metadata: { name: "p" },
        spec: { containers: [{ name: "c", image: "busybox" }] },
        status: { podIP: "10.0.0.1" },
      },
    });
    assert.equal(pod.status?.podIP, undefined, "status from a create is dropped");
    assert.equal(pod.status?.phase, "Pending");
    assert.equal(pod.metadata?.generation, 1);

    pod.status = { phase: "Running", podIP: "10.0.0.2" };
    pod.spec!.containers[0]!.image = "ignored-by-status";
    const afterStatus = await core.replaceNamespacedPodStatus({ namespace: "default", name: "p", body: pod });
    assert.equal(afterStatus.status?.podIP, "10.0.0.2");
    assert.equal(afterStatus.spec?.containers[0]?.image, "busybox", "a status update changes only status");
    assert.equal(afterStatus.metadata?.generation, 1, "status changes do not bump generation");

    afterStatus.status = { phase: "Failed" };
    afterStatus.spec!.containers[0]!.image = "busybox:2";
    const afterMain = await core.replaceNamespacedPod({ namespace: "default", name: "p", body: afterStatus });
    assert.equal(afterMain.status?.phase, "Running", "the main resource ignores status");
    assert.equal(afterMain.spec?.containers[0]?.image, "busybox:2");
    assert.equal(afterMain.metadata?.generation, 2, "spec changes bump generation");
  });

  it("keeps status behind the status subresource for custom resources", async () => {
    const body = {
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "vs-status" },
      spec: { hosts: ["a"] },
      status: { observedGeneration: 7 },
    };
    const args = {
      group: "networking.istio.io",
      version: "v1",
      namespace: "default",
      plural: "virtualservices",
    };
    const created = (await custom.createNamespacedCustomObject({ ...args, body })) as KubeObject;
    assert.equal(created.status, undefined);
    const patched = (await custom.patchNamespacedCustomObjectStatus(
      { ...args, name: "vs-status", body: { spec: { hosts: ["ignored"] }, status: { conditions: [] } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    )) as KubeObject;
    assert.deepEqual(patched.status, { conditions: [] });
    assert.deepEqual(patched.spec, { hosts: ["a"] });
    assert.equal(patched.metadata?.generation, 1);
    const smp = await failure(
      custom.patchNamespacedCustomObject(
        { ...args, name: "vs-status", body: { spec: { hosts: ["b"] } } },
        setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
      ),
    );
    assert.equal(smp.code, 415, "custom resources have no strategic merge patch");
  });

  it("rejects a stale resourceVersion with 409 Conflict and skips no-op writes", async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "cas" }, data: { k: "1" } },
    });
    const fresh = await core.replaceNamespacedConfigMap({
      namespace: "default",
      name: "cas",
      body: { ...cm, data: { k: "2" } },
    });
    assert.notEqual(fresh.metadata?.resourceVersion, cm.metadata?.resourceVersion);
    const conflict = await failure(
      core.replaceNamespacedConfigMap({
        namespace: "default",
        name: "cas",
        body: { ...cm, data: { k: "3" } },
      }),
    );
    assert.equal(conflict.kind, "Status");
    assert.equal(conflict.status, "Failure");
    assert.equal(conflict.reason, "Conflict");
    assert.equal(conflict.code, 409);
    const noop = await core.replaceNamespacedConfigMap({ namespace: "default", name: "cas", body: fresh });
    assert.equal(
      noop.metadata?.resourceVersion,
      fresh.metadata?.resourceVersion,
      "an unchanged object is not rewritten",
    );

    const duplicate = await failure(
      core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name: "cas" } } }),
    );
    assert.equal(duplicate.reason, "AlreadyExists");
    const missing = await failure(core.readNamespacedConfigMap({ namespace: "default", name: "nope" }));
    assert.equal(missing.reason, "NotFound");
    assert.equal(missing.code, 404);
    const noNamespace = await failure(
      core.createNamespacedConfigMap({ namespace: "absent", body: { metadata: { name: "x" } } }),
    );
    assert.equal(noNamespace.code, 404, "no content in a namespace that does not exist");
  });

  it("answers injected failures with a Status and then serves normally", async () => {
    server.injectFailure({ verb: "list", resource: "secrets" }, { code: 500, reason: "InternalError" });
    const injected = await failure(core.listNamespacedSecret({ namespace: "default" }));
    assert.equal(injected.code, 500);
    assert.equal(injected.reason, "InternalError");
    const served = await core.listNamespacedSecret({ namespace: "default" });
    assert.deepEqual(served.items, []);
  });

  it("deletes a namespace's content with it", async () => {
    await core.createNamespace({ body: { metadata: { name: "doomed" } } });
    await core.createNamespacedSecret({ namespace: "doomed", body: { metadata: { name: "s" } } });
    const watch = await recordWatch(kc, "/api/v1/secrets", { resourceVersion: server.resourceVersion() });
    await core.deleteNamespace({ name: "doomed" });
    await eventually(() => watch.events.length >= 1);
    watch.stop();
    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.metadata?.name]),
      [["DELETED", "s"]],
    );
    assert.equal(server.objects({ resource: "secrets" }, "doomed").length, 0);
  });

  it("applies merge patches and JSON patches, refusing a JSON patch that does not apply", async () => {
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "patchy" }, data: { a: "1", b: "2" } },
    });
    const merged = await core.patchNamespacedConfigMap(
      { namespace: "default", name: "patchy", body: { data: { a: null, c: "3" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.deepEqual(merged.data, { b: "2", c: "3" });
    const jsonPatched = await core.patchNamespacedConfigMap(
      {
        namespace: "default",
        name: "patchy",
        body: [
          { op: "test", path: "/data/b", value: "2" },
          { op: "replace", path: "/data/b", value: "20" },
          { op: "add", path: "/metadata/labels", value: { x: "y" } },
          { op: "remove", path: "/data/c" },
        ],
      },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    assert.deepEqual(jsonPatched.data, { b: "20" });
    assert.deepEqual(jsonPatched.metadata?.labels, { x: "y" });
    const failed = await failure(
      core.patchNamespacedConfigMap(
        { namespace: "default", name: "patchy", body: [{ op: "test", path: "/data/b", value: "nope" }] },
        setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
      ),
    );
    assert.equal(failed.code, 422);
    const stale = await failure(
      core.patchNamespacedConfigMap(
        {
          namespace: "default",
          name: "patchy",
          body: { metadata: { resourceVersion: "1" }, data: { z: "z" } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    assert.equal(stale.reason, "Conflict", "a resourceVersion in the patch is a precondition");
  });

  it("server-side applies: creates a missing object, merges over an existing one, needs a fieldManager", async () => {
    const apps = kc.makeApiClient(AppsV1Api);
    const apply = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
    const deployment = (image: string, labels: Record<string, string>) => ({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "applied", namespace: "default", labels },
      spec: {
        selector: { matchLabels: { app: "a" } },
        template: { spec: { containers: [{ name: "c", image }] } },
      },
    });
    const created = await apps.patchNamespacedDeployment(
      {
        namespace: "default",
        name: "applied",
        body: deployment("one", { a: "1" }),
        fieldManager: "test",
        force: true,
      },
      apply,
    );
    assert.equal(created.spec?.template.spec?.containers[0]?.image, "one");
    const updated = await apps.patchNamespacedDeployment(
      {
        namespace: "default",
        name: "applied",
        body: deployment("two", { b: "2" }),
        fieldManager: "test",
        force: true,
      },
      apply,
    );
    assert.equal(updated.spec?.template.spec?.containers[0]?.image, "two");
    assert.deepEqual(updated.metadata?.labels, { a: "1", b: "2" }, "a double: dropped fields stay");
    assert.equal(updated.metadata?.uid, created.metadata?.uid);
    const noManager = await failure(
      apps.patchNamespacedDeployment(
        { namespace: "default", name: "applied", body: deployment("x", {}) },
        apply,
      ),
    );
    assert.equal(noManager.code, 400);
  });

  it("answers TokenReview for good, wrong-audience, expired and unknown tokens", async () => {
    const auth = kc.makeApiClient(AuthenticationV1Api);
    server.addServiceAccountToken("good", {
      namespace: "mesh",
      serviceAccount: "web",
      audiences: ["istio-ca", "other"],
      podName: "web-0",
    });
    server.addToken("old", {
      username: "system:serviceaccount:mesh:old",
      audiences: ["istio-ca"],
      expired: true,
    });
    server.addToken("api", { username: "alice" });
    const review = (token: string, audiences?: string[]) =>
      auth.createTokenReview({
        body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token, audiences } },
      });

    const good = await review("good", ["istio-ca"]);
    assert.equal(good.status?.authenticated, true);
    assert.equal(good.status?.user?.username, "system:serviceaccount:mesh:web");
    assert.deepEqual(good.status?.user?.groups, [
      "system:serviceaccounts",
      "system:serviceaccounts:mesh",
      "system:authenticated",
    ]);
    assert.deepEqual(good.status?.user?.extra, { "authentication.kubernetes.io/pod-name": ["web-0"] });
    assert.deepEqual(good.status?.audiences, ["istio-ca"], "the intersection with the requested audiences");
    assert.equal(good.status?.error, undefined);

    const wrong = await review("good", ["somebody-else"]);
    assert.notEqual(wrong.status?.authenticated, true);
    assert.equal(
      wrong.status?.error,
      '[invalid bearer token, token audiences ["istio-ca" "other"] is invalid for the target audiences ["somebody-else"]]',
    );
    const expiredToken = await review("old", ["istio-ca"]);
    assert.notEqual(expiredToken.status?.authenticated, true);
    assert.match(expiredToken.status?.error ?? "", /expired/);
    const unknown = await review("who?");
    assert.notEqual(unknown.status?.authenticated, true);
    assert.equal(unknown.status?.error, "invalid bearer token");

    const defaulted = await review("api");
    assert.equal(defaulted.status?.authenticated, true, "no audiences: the API server's own");
    assert.deepEqual(defaulted.status?.audiences, ["https://kubernetes.default.svc.cluster.local"]);
  });

  it("answers SubjectAccessReview as RBAC would for the rules it was given", async () => {
    const authz = kc.makeApiClient(AuthorizationV1Api);
    server.allow({
      group: "editors",
      verbs: ["create", "update"],
      apiGroups: ["networking.istio.io"],
      resources: ["virtualservices"],
      namespaces: ["team-a"],
    });
    server.allow({ user: "ops", verbs: ["get"], apiGroups: ["sextant.io"], resources: ["proxies/debug"] });
    const review = (user: string, groups: string[], attributes: Record<string, string>) =>
      authz.createSubjectAccessReview({
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: { user, groups, resourceAttributes: attributes },
        },
      });
    const vs = { group: "networking.istio.io", resource: "virtualservices", namespace: "team-a" };
    assert.equal((await review("alice", ["editors"], { ...vs, verb: "create" })).status?.allowed, true);
    assert.equal((await review("alice", ["editors"], { ...vs, verb: "delete" })).status?.allowed, false);
    assert.equal(
      (await review("alice", ["editors"], { ...vs, namespace: "b", verb: "create" })).status?.allowed,
      false,
    );
    assert.equal((await review("bob", [], { ...vs, verb: "create" })).status?.allowed, false);
    const debug = { group: "sextant.io", resource: "proxies", subresource: "debug", verb: "get" };
    assert.equal((await review("ops", [], debug)).status?.allowed, true, "cluster-wide, with a subresource");
    assert.equal((await review("ops", [], { ...debug, subresource: "" })).status?.allowed, false);
    assert.deepEqual(server.subjectAccessReviews().at(-1), {
      user: "ops",
      groups: [],
      verb: "get",
      group: "sextant.io",
      resource: "proxies",
      allowed: false,
    });
  });

  it("serves one stored custom object under every version of its CRD", async () => {
    const created = (await custom.createNamespacedCustomObject({
      group: "networking.istio.io",
      version: "v1beta1",
      namespace: "default",
      plural: "virtualservices",
      body: {
        apiVersion: "networking.istio.io/v1beta1",
        kind: "VirtualService",
        metadata: { name: "reviews" },
        spec: { hosts: ["reviews"] },
      },
    })) as KubeObject;
    const asV1 = (await custom.getNamespacedCustomObject({
      group: "networking.istio.io",
      version: "v1",
      namespace: "default",
      plural: "virtualservices",
      name: "reviews",
    })) as KubeObject;
    assert.equal(created.apiVersion, "networking.istio.io/v1beta1");
    assert.equal(asV1.apiVersion, "networking.istio.io/v1");
    assert.equal(asV1.metadata?.uid, created.metadata?.uid);
    assert.equal(asV1.metadata?.resourceVersion, created.metadata?.resourceVersion);
    assert.deepEqual(asV1.spec, { hosts: ["reviews"] });
    const list = (await custom.listClusterCustomObject({
      group: "networking.istio.io",
      version: "v1alpha3",
      plural: "virtualservices",
    })) as { items: KubeObject[] };
    assert.equal(
      list.items[0]?.apiVersion,
      "networking.istio.io/v1alpha3",
      "custom list items carry apiVersion",
    );
    const missing = await failure(
      custom.getNamespacedCustomObject({
        group: "networking.istio.io",
        version: "v2",
        namespace: "default",
        plural: "virtualservices",
        name: "reviews",
      }),
    );
    assert.equal(missing.code, 404, "an unserved version is not found");
  });

  it("pages lists with limit and continue over one snapshot; a compacted continue token is 410", async () => {
    await core.createNamespace({ body: { metadata: { name: "pages" } } });
    for (const name of ["a", "b", "c", "d"]) {
      await core.createNamespacedConfigMap({ namespace: "pages", body: { metadata: { name } } });
    }
    const first = await core.listNamespacedConfigMap({ namespace: "pages", limit: 2 });
    assert.deepEqual(
      first.items.map((c) => c.metadata?.name),
      ["a", "b"],
    );
    assert.equal(first.metadata?.remainingItemCount, 2);
    await core.deleteNamespacedConfigMap({ namespace: "pages", name: "c" });
    const second = await core.listNamespacedConfigMap({
      namespace: "pages",
      limit: 2,
      _continue: first.metadata!._continue!,
    });
    assert.deepEqual(
      second.items.map((c) => c.metadata?.name),
      ["c", "d"],
      "the continuation reads the first page's snapshot",
    );
    assert.equal(second.metadata?.resourceVersion, first.metadata?.resourceVersion);
    assert.equal(second.metadata?._continue, undefined);
    server.compact();
    const gone = await failure(
      core.listNamespacedConfigMap({ namespace: "pages", limit: 2, _continue: first.metadata!._continue! }),
    );
    assert.equal(gone.code, 410);
    assert.equal(gone.reason, "Expired");
  });

  it("holds a deleted object with finalizers until they are removed", async () => {
    await core.createNamespacedConfigMap({
      namespace: "default",
      body: { metadata: { name: "held", finalizers: ["sextant.io/cleanup"] } },
    });
    const watch = await recordWatch(kc, "/api/v1/namespaces/default/configmaps", {
      resourceVersion: server.resourceVersion(),
      fieldSelector: "metadata.name=held",
    });
    await core.deleteNamespacedConfigMap({ namespace: "default", name: "held" });
    const marked = await core.readNamespacedConfigMap({ namespace: "default", name: "held" });
    assert.ok(marked.metadata?.deletionTimestamp, "marked for deletion");
    await core.patchNamespacedConfigMap(
      { namespace: "default", name: "held", body: { metadata: { finalizers: null } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await eventually(() => watch.events.length >= 2);
    watch.stop();
    assert.deepEqual(
      watch.events.map((e) => e.type),
      ["MODIFIED", "DELETED"],
    );
    assert.equal(
      (await failure(core.readNamespacedConfigMap({ namespace: "default", name: "held" }))).code,
      404,
    );
  });

  it("lets tests seed and delete objects directly, through the same watch stream", async () => {
    const watch = await recordWatch(kc, "/api/v1/nodes", { resourceVersion: server.resourceVersion() });
    const seeded = server.apply({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "node-1" },
      status: { addresses: [{ type: "InternalIP", address: "10.1.0.1" }] },
    });
    assert.deepEqual(seeded.status, { addresses: [{ type: "InternalIP", address: "10.1.0.1" }] });
    assert.equal(server.objects({ resource: "nodes" }).length, 1);
    server.delete({ apiVersion: "v1", kind: "Node", name: "node-1" });
    await eventually(() => watch.events.length >= 2);
    watch.stop();
    assert.deepEqual(
      watch.events.map((e) => [e.type, e.object.metadata?.name]),
      [
        ["ADDED", "node-1"],
        ["DELETED", "node-1"],
      ],
    );
  });
});

/** The informer's cache holds exactly the server's Services, at the server's resourceVersions. */
async function assertConverged(
  server: FakeKubeApiServer,
  informer: { list(namespace?: string): readonly KubernetesObject[] },
  namespace: string,
): Promise<void> {
  const names = (objects: ReadonlyArray<{ metadata?: { name?: string; resourceVersion?: string } }>) =>
    JSON.stringify(objects.map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`).sort());
  await eventually(
    () => names(informer.list(namespace)) === names(server.objects({ resource: "services" }, namespace)),
    { message: `informer cache converges for ${namespace}` },
  );
}
