// /debug/registryz shows every service and endpoint: only a caller allowed
// `debug` reads it, by the token file or, under Kubernetes, by RBAC on the
// proxies/debug subresource of sextant.io. discovery runs as its own process.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  DEBUG_HEADERS,
  debugTokenEnv,
  type FakeKubeApiServer,
  type NatsServerFixture,
  type ServiceProcess,
  startFakeKubeApiServer,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";

describe("discovery's /debug/registryz", () => {
  let nats: NatsServerFixture;
  let kube: FakeKubeApiServer;
  let dir: string;
  const started: ServiceProcess[] = [];

  before(async () => {
    nats = await startNatsServer();
    kube = await startFakeKubeApiServer();
    dir = mkdtempSync(join(tmpdir(), "sextant-discovery-debug-"));
    writeFileSync(join(dir, "kubeconfig"), kube.kubeconfigYaml());
  });
  after(async () => {
    for (const process of started) await process.stop();
    await kube?.close();
    await nats?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string>) => {
    const discovery = await startServiceProcess("discovery", {
      NATS_URL: nats.url,
      KUBERNETES: "off",
      ...env,
    });
    started.push(discovery);
    return `http://127.0.0.1:${discovery.httpPort}/debug/registryz`;
  };

  it("with the token file: 401 without a token, 200 with one granting debug", async () => {
    const url = await start(debugTokenEnv());
    const anonymous = await fetch(url);
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers.get("www-authenticate"), "Bearer");
    const guessed = await fetch(url, { headers: { authorization: "Bearer guessed" } });
    assert.equal(guessed.status, 401);
    assert.match(((await guessed.json()) as { error: string }).error, /^the bearer token is not valid$/);
    const allowed = await fetch(url, { headers: DEBUG_HEADERS });
    assert.equal(allowed.status, 200);
    assert.ok(((await allowed.json()) as { services: unknown }).services);
  });

  it("with Kubernetes: get on proxies/debug in sextant.io allows, its absence forbids", async () => {
    kube.addToken("ops-token", { username: "ops" });
    kube.addToken("dev-token", { username: "dev" });
    kube.allow({ user: "ops", verbs: ["get"], apiGroups: ["sextant.io"], resources: ["proxies/debug"] });
    const url = await start({ API_AUTH: "kubernetes", KUBECONFIG: join(dir, "kubeconfig") });
    assert.equal((await fetch(url)).status, 401);
    const ops = await fetch(url, { headers: { authorization: "Bearer ops-token" } });
    assert.equal(ops.status, 200);
    const dev = await fetch(url, { headers: { authorization: "Bearer dev-token" } });
    assert.equal(dev.status, 403);
    assert.match(((await dev.json()) as { error: string }).error, /^forbidden: dev may not debug/);
    const review = kube.subjectAccessReviews().find((r) => r.user === "ops");
    assert.deepEqual(review, {
      user: "ops",
      groups: ["system:authenticated"],
      verb: "get",
      group: "sextant.io",
      resource: "proxies",
      subresource: "debug",
      allowed: true,
    });
  });

  it("with no authenticator configured, starts and refuses everyone", async () => {
    const url = await start({});
    const answer = await fetch(url, { headers: DEBUG_HEADERS });
    assert.equal(answer.status, 401);
    assert.match(
      ((await answer.json()) as { error: string }).error,
      /no authenticator is configured \(API_AUTH\)/,
    );
  });
});
