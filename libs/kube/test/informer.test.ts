import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CoreV1Api, KubeConfig, type V1ConfigMap } from "@kubernetes/client-node";
import { createLogger } from "@sextant/observability";
import { eventually, type FakeKubeApiServer, startFakeKubeApiServer } from "@sextant/testing";
import { Informer } from "../src/index.js";

const logger = createLogger({ service: "test", level: "silent" });

const configMap = (name: string, value = name) => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name, namespace: "default" },
  data: { value },
});

describe("Informer, against the fake kube-apiserver", () => {
  let server: FakeKubeApiServer;
  let kubeConfig: KubeConfig;
  const informers: Array<Informer<V1ConfigMap>> = [];

  /** An informer of ConfigMaps that records what it is told. */
  const start = () => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const events: string[] = [];
    const failures: boolean[] = [];
    const informer = new Informer<V1ConfigMap>({
      kubeConfig,
      path: "/api/v1/configmaps",
      list: () => core.listConfigMapForAllNamespaces(),
      logger,
      logFields: { resource: "configmaps" },
      backoff: { initialMs: 10, maxMs: 50 },
      onFailure: (_error, synced) => failures.push(synced),
    });
    for (const type of ["add", "update", "delete"] as const)
      informer.on(type, (object) => events.push(`${type} ${object.metadata?.name}`));
    informers.push(informer);
    informer.start();
    return { informer, events, failures };
  };
  const lists = () => server.requestCount({ verb: "list", resource: "configmaps" });

  before(async () => {
    server = await startFakeKubeApiServer();
    kubeConfig = server.kubeConfig(KubeConfig) as KubeConfig;
    server.apply(configMap("one"));
    server.apply(configMap("two"));
  });
  after(async () => {
    for (const informer of informers) await informer.stop();
    await server.close();
  });

  it("lists, reports synced once the cache holds the collection, then follows the watch", async () => {
    const { informer, events } = start();
    assert.equal(await informer.synced(), true);
    assert.equal(informer.hasSynced, true);
    assert.deepEqual(
      informer
        .list("default")
        .map((object) => object.metadata?.name)
        .sort(),
      ["one", "two"],
    );
    assert.deepEqual(events.sort(), ["add one", "add two"]);
    server.apply(configMap("one", "changed"));
    await eventually(() => informer.get("one", "default")?.data?.value === "changed", {
      message: "update arrives",
    });
    assert.ok(events.includes("update one"));
    await informer.stop();
  });

  it("lists and watches only the objects its label selector matches", async () => {
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const selector = "selected-by-test";
    const informer = new Informer<V1ConfigMap>({
      kubeConfig,
      path: "/api/v1/configmaps",
      labelSelector: selector,
      list: () => core.listConfigMapForAllNamespaces({ labelSelector: selector }),
      logger,
      backoff: { initialMs: 10, maxMs: 50 },
    });
    informers.push(informer);
    const labelled = (name: string) => ({
      ...configMap(name),
      metadata: { name, namespace: "default", labels: { [selector]: "" } },
    });
    server.apply(labelled("listed"));
    informer.start();
    assert.equal(await informer.synced(), true);
    server.apply(configMap("unlabelled"));
    server.apply(labelled("watched"));
    await eventually(() => informer.get("watched", "default"), { message: "the labelled object arrives" });
    assert.deepEqual(
      informer
        .list()
        .map((object) => object.metadata?.name)
        .sort(),
      ["listed", "watched"],
    );
    await informer.stop();
  });

  it("restarts after a dropped watch, and relists after a 410 Gone, losing nothing", async () => {
    const { informer, events, failures } = start();
    await informer.synced();
    // synced comes as the watch is asked for; the server holds it a moment later.
    await eventually(() => server.watchCount() >= 1, { message: "watching" });

    // A reset connection stops client-node's ListWatch; the informer starts it again.
    server.pauseWatches();
    assert.ok(server.dropWatches() >= 1);
    server.apply(configMap("during-drop"));
    server.resumeWatches();
    await eventually(() => informer.get("during-drop", "default") !== undefined, {
      message: "the change made while the watch was down arrives",
    });
    assert.ok(failures.length >= 1 && failures.every((synced) => synced));

    // History compacted while away: the re-watch gets 410 and the informer relists.
    const listsBefore = lists();
    await eventually(() => server.watchCount() >= 1, { message: "watching again" });
    server.pauseWatches();
    server.dropWatches();
    server.delete({ apiVersion: "v1", kind: "ConfigMap", namespace: "default", name: "two" });
    server.apply(configMap("after-compact"));
    server.compact();
    server.resumeWatches();
    await eventually(() => lists() > listsBefore, { message: "relisted" });
    await eventually(
      () => informer.get("after-compact", "default") !== undefined && !informer.get("two", "default"),
      { message: "converged after the relist" },
    );
    assert.ok(events.includes("delete two"), "what vanished meanwhile is reported as deleted");
    await informer.stop();
  });

  it("retries a failing first list with its backoff until it succeeds", async () => {
    const listsBefore = lists();
    server.injectFailure({ verb: "list", resource: "configmaps" }, { code: 500, reason: "InternalError" }, 3);
    const { informer, failures } = start();
    assert.equal(await informer.synced(), true);
    assert.equal(lists() - listsBefore, 4, "three failures, then one list that worked");
    assert.deepEqual(failures, [false, false, false], "failures before the first sync say so");
    await informer.stop();
  });

  it("resolves synced false when stopped before its first list", async () => {
    server.injectFailure(
      { verb: "list", resource: "configmaps" },
      { code: 503, reason: "ServiceUnavailable" },
      1_000,
    );
    const { informer, failures } = start();
    await eventually(() => failures.length >= 2, { message: "keeps retrying" });
    await informer.stop();
    assert.equal(await informer.synced(), false);
    const count = failures.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(failures.length, count, "no restart after stop");
  });
});
