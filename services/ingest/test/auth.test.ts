// The config API's authentication and authorization, attacked as an
// in-cluster client would: ingest runs as its own process against a real
// nats-server, and after each refused request the store is compared with
// what it held before.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { tokenSha256 } from "@sextant/auth";
import { Buckets } from "@sextant/bus";
import { configKey } from "@sextant/model";
import {
  eventually,
  type FakeKubeApiServer,
  metricValue,
  type ServiceProcess,
  startFakeKubeApiServer,
  startServiceProcess,
} from "@sextant/testing";
import { stringify } from "yaml";
import { startNatsWithClient, virtualService } from "./harness.js";

// biome-ignore lint/suspicious/noExplicitAny: tests read into JSON answers freely.
type Json = any;

const ADMIN = "admin-token";
const TEAM_A = "team-a-token";

const tokenFileText = (extra: object[] = []) =>
  stringify([
    { subject: "admin", token_sha256: tokenSha256(ADMIN), namespaces: ["*"], verbs: ["*"], kinds: ["*"] },
    {
      subject: "team-a",
      token_sha256: tokenSha256(TEAM_A),
      namespaces: ["team-a"],
      verbs: ["get", "list", "create", "update"],
      kinds: ["*"],
    },
    ...extra,
  ]);

async function call(
  url: string,
  options: { method?: string; token?: string; authorization?: string; body?: string } = {},
): Promise<{ status: number; json: Json; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  if (options.authorization !== undefined) headers.authorization = options.authorization;
  const response = await fetch(url, {
    method: options.method ?? (options.body === undefined ? "GET" : "POST"),
    headers,
    body: options.body,
  });
  const text = await response.text();
  let json: Json;
  try {
    json = JSON.parse(text);
  } catch {
    json = { text };
  }
  return { status: response.status, json, headers: response.headers };
}

describe("ingest's config API with a token file", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: ServiceProcess;
  let dir: string;
  let tokenFile: string;
  let base: string;

  /** What the store holds: every config key at its revision, and each status's source and last changer. */
  const snapshot = async () => {
    const config = await (await env.bus.bucket(Buckets.config)).list();
    const status = await (await env.bus.bucket(Buckets.configStatus)).list();
    return {
      config: Object.fromEntries(config.map((e) => [e.key, e.revision])),
      status: Object.fromEntries(status.map((e) => [e.key, `${e.value.source}/${e.value.lastChangedBy}`])),
    };
  };

  before(async () => {
    env = await startNatsWithClient();
    dir = mkdtempSync(join(tmpdir(), "sextant-ingest-auth-"));
    tokenFile = join(dir, "api-tokens.yaml");
    writeFileSync(tokenFile, tokenFileText());
    ingest = await startServiceProcess("ingest", {
      NATS_URL: env.nats.url,
      API_AUTH: "tokens",
      API_TOKENS_FILE: tokenFile,
      ANALYSIS_DEBOUNCE_MS: "20",
    });
    base = `http://127.0.0.1:${ingest.httpPort}`;
    // Something in each namespace, by the admin.
    for (const namespace of ["team-a", "team-b"]) {
      const applied = await call(`${base}/v1/apply`, {
        token: ADMIN,
        body: virtualService(`seed-${namespace}`, { namespace, gateways: ["missing-gateway"] }),
      });
      assert.equal(applied.status, 200, JSON.stringify(applied.json));
    }
    // Analysis rewrites each seed's status once it has run (both name a
    // missing gateway): wait for it, so that no status write is still in
    // flight when a test compares the store before and after an attack.
    await eventually(
      async () => {
        const statuses = await (await env.bus.bucket(Buckets.configStatus)).list();
        return statuses.filter((entry) => entry.value.messages.length > 0).length === 2;
      },
      { message: "analysis never reported the two seeds" },
    );
  });
  after(async () => {
    await ingest?.stop();
    await env?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("leaves /ready and /metrics open", async () => {
    assert.equal((await fetch(`${base}/ready`)).status, 200);
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
  });

  it("lists the running services to any valid token, one limited to a namespace too, and to no one else", async () => {
    for (const token of [ADMIN, TEAM_A]) {
      const { status, json } = await call(`${base}/v1/members`, { token });
      assert.equal(status, 200);
      assert.deepEqual(
        json.members.map((member: { service: string }) => member.service),
        ["ingest"],
      );
    }
    assert.equal((await call(`${base}/v1/members`)).status, 401);
    assert.equal((await call(`${base}/v1/members`, { token: "nobody" })).status, 401);
  });

  const attacks: Array<{
    name: string;
    request: () => Promise<{ status: number; json: Json; headers: Headers }>;
    status: number;
    error: RegExp;
    challenge?: RegExp;
  }> = [
    {
      name: "no token",
      request: () => call(`${base}/v1/apply`, { body: virtualService("x", { namespace: "team-a" }) }),
      status: 401,
      error: /^no Authorization header: send Authorization: Bearer <token>$/,
      challenge: /^Bearer$/,
    },
    {
      name: "a malformed header",
      request: () =>
        call(`${base}/v1/apply`, {
          authorization: `Basic ${Buffer.from("admin:admin").toString("base64")}`,
          body: virtualService("x", { namespace: "team-a" }),
        }),
      status: 401,
      error: /^the Authorization header is not of the form Bearer <token>$/,
      challenge: /^Bearer error="invalid_request"$/,
    },
    {
      name: "an unknown token",
      request: () =>
        call(`${base}/v1/apply`, { token: "guessed", body: virtualService("x", { namespace: "team-a" }) }),
      status: 401,
      error: /^the bearer token is not valid$/,
      challenge: /^Bearer error="invalid_token"$/,
    },
    {
      name: "a huge Authorization header",
      request: () =>
        call(`${base}/v1/apply`, {
          authorization: `Bearer ${"a".repeat(12_000)}`,
          body: virtualService("x", { namespace: "team-a" }),
        }),
      status: 401,
      error: /^the Authorization header is larger than the limit of 8192 bytes$/,
      challenge: /^Bearer error="invalid_request"$/,
    },
    {
      name: "a token for namespace team-a applying to team-b",
      request: () =>
        call(`${base}/v1/apply`, {
          token: TEAM_A,
          body: virtualService("intruder", { namespace: "team-b" }),
        }),
      status: 403,
      error:
        /^forbidden: team-a may not create VirtualService "intruder" in namespace "team-b" \(the token file does not grant it\); nothing was stored$/,
    },
    {
      name: "a multi-document apply with one forbidden document",
      request: () =>
        call(`${base}/v1/apply`, {
          token: TEAM_A,
          body: [
            virtualService("allowed-one", { namespace: "team-a" }),
            virtualService("forbidden-one", { namespace: "team-b" }),
          ].join("---\n"),
        }),
      status: 403,
      error:
        /^forbidden: team-a may not create VirtualService "forbidden-one" in namespace "team-b".*; nothing was stored$/,
    },
    {
      name: "an update of another namespace's resource",
      request: () =>
        call(`${base}/v1/apply`, {
          token: TEAM_A,
          body: virtualService("seed-team-b", { namespace: "team-b", subset: "v9" }),
        }),
      status: 403,
      error: /^forbidden: team-a may not update VirtualService "seed-team-b" in namespace "team-b"/,
    },
    {
      name: "a DELETE without the verb",
      request: () =>
        call(`${base}/v1/config/VirtualService/team-a/seed-team-a`, { method: "DELETE", token: TEAM_A }),
      status: 403,
      error: /^forbidden: team-a may not delete VirtualService "seed-team-a" in namespace "team-a"/,
    },
    {
      name: "a GET of another namespace's resource",
      request: () => call(`${base}/v1/config/VirtualService/team-b/seed-team-b`, { token: TEAM_A }),
      status: 403,
      error: /^forbidden: team-a may not get VirtualService "seed-team-b" in namespace "team-b"/,
    },
    {
      name: "the trace of another namespace's resource",
      request: () => call(`${base}/v1/trace/VirtualService/team-b/seed-team-b`, { token: TEAM_A }),
      status: 403,
      error: /^forbidden: team-a may not get VirtualService "seed-team-b" in namespace "team-b"/,
    },
  ];
  for (const attack of attacks)
    it(`refuses ${attack.name} with ${attack.status}, and stores nothing`, async () => {
      const before = await snapshot();
      const { status, json, headers } = await attack.request();
      assert.equal(status, attack.status, JSON.stringify(json));
      assert.match(json.error, attack.error);
      if (attack.challenge) assert.match(headers.get("www-authenticate") ?? "", attack.challenge);
      assert.deepEqual(await snapshot(), before);
    });

  it("names the subject, verb, kind and namespace of each forbidden document", async () => {
    const { json } = await call(`${base}/v1/apply`, {
      token: TEAM_A,
      body: [
        virtualService("a1", { namespace: "team-a" }),
        virtualService("b1", { namespace: "team-b" }),
      ].join("---\n"),
    });
    assert.deepEqual(json.denied, [
      {
        document: 1,
        subject: "team-a",
        verb: "create",
        kind: "VirtualService",
        namespace: "team-b",
        name: "b1",
        reason: "the token file does not grant it",
      },
    ]);
  });

  it("applies what the token allows, audits it, counts it and records who changed it", async () => {
    const applied = await call(`${base}/v1/apply`, {
      token: TEAM_A,
      body: virtualService("team-a-route", { namespace: "team-a" }),
    });
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    assert.equal(applied.json.resources[0].result, "created");
    const ref = { kind: "VirtualService", namespace: "team-a", name: "team-a-route" };
    const status = await (await env.bus.bucket(Buckets.configStatus)).get(configKey(ref));
    assert.equal(status?.value.lastChangedBy, "team-a");
    assert.equal(status?.value.source, "http");
    await eventually(() => ingest.output().includes('"resource":"VirtualService/team-a/team-a-route"'), {
      message: "no audit line",
    });
    const line = ingest
      .output()
      .split("\n")
      .find((l) => l.includes('"resource":"VirtualService/team-a/team-a-route"'));
    const audit = JSON.parse(line as string).audit;
    assert.deepEqual(
      { ...audit, sourceAddress: typeof audit.sourceAddress },
      {
        subject: "team-a",
        authenticator: "tokens",
        verb: "create",
        resource: "VirtualService/team-a/team-a-route",
        generation: 1,
        sourceAddress: "string",
      },
    );
    // Re-applying the same needs no update; changing it does, and team-a has it.
    const changed = await call(`${base}/v1/apply`, {
      token: TEAM_A,
      body: virtualService("team-a-route", { namespace: "team-a", subset: "v2" }),
    });
    assert.equal(changed.json.resources[0].result, "configured");
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.ok(
      metricValue(metrics, "sextant_ingest_api_changes_total", 'verb="create"', 'kind="VirtualService"') >= 1,
    );
    assert.equal(
      metricValue(metrics, "sextant_ingest_api_changes_total", 'verb="update"', 'kind="VirtualService"'),
      1,
    );
    for (const reason of ["missing", "malformed", "unknown_token", "too_large", "forbidden"])
      assert.ok(
        metricValue(metrics, "sextant_ingest_api_auth_failures_total", `reason="${reason}"`) >= 1,
        reason,
      );
  });

  it("lists, and analyses, only what the caller may list", async () => {
    const names = async (token: string) =>
      ((await call(`${base}/v1/config`, { token })).json.items as Json[]).map(
        (item) => `${item.metadata.namespace}/${item.metadata.name}`,
      );
    assert.ok((await names(TEAM_A)).every((name) => name.startsWith("team-a/")));
    assert.ok((await names(TEAM_A)).includes("team-a/seed-team-a"));
    assert.ok((await names(ADMIN)).includes("team-b/seed-team-b"));
    // Both seeds name a gateway that does not exist: analysis reports each.
    const analysed = async (token: string) =>
      ((await call(`${base}/v1/analyze`, { token })).json.messages as Json[]).map(
        (m) => `${m.namespace}/${m.name}`,
      );
    await eventually(async () => (await analysed(ADMIN)).includes("team-b/seed-team-b"), {
      message: "analysis never reported the missing gateway",
    });
    assert.ok((await analysed(ADMIN)).includes("team-a/seed-team-a"));
    assert.ok((await analysed(TEAM_A)).includes("team-a/seed-team-a"));
    assert.ok(!(await analysed(TEAM_A)).includes("team-b/seed-team-b"));
  });

  it("follows changes to the token file, and keeps the last good one when a change is invalid", async () => {
    const NEW = "rotated-token";
    writeFileSync(
      tokenFile,
      tokenFileText([
        {
          subject: "rotated",
          token_sha256: tokenSha256(NEW),
          namespaces: ["*"],
          verbs: ["list"],
          kinds: ["*"],
        },
      ]),
    );
    await eventually(async () => (await call(`${base}/v1/config`, { token: NEW })).status === 200, {
      message: "the new token was never accepted",
    });
    writeFileSync(tokenFile, "- subject: broken\n");
    await eventually(
      () => ingest.output().includes("token file is invalid; keeping the tokens it had before"),
      {
        message: "the invalid file was not reported",
      },
    );
    assert.equal((await call(`${base}/v1/config`, { token: NEW })).status, 200);
  });

  it("answers 1,000 bad tokens in a burst with 429 past the limit, and stays up", async () => {
    const before = await snapshot();
    const statuses: number[] = [];
    let limited: { json: Json; headers: Headers } | undefined;
    for (let batch = 0; batch < 10; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          call(`${base}/v1/apply`, {
            token: `guess-${batch}-${i}`,
            body: virtualService("x", { namespace: "team-a" }),
          }),
        ),
      );
      for (const answer of answers) {
        statuses.push(answer.status);
        if (answer.status === 429) limited ??= answer;
      }
    }
    assert.deepEqual(
      statuses.filter((status) => status !== 401 && status !== 429),
      [],
    );
    assert.ok(limited, "no request was rate-limited");
    assert.match(limited.json.error, /^too many failed authentications from \S+; try again in \d+ s$/);
    assert.match(limited.headers.get("retry-after") ?? "", /^\d+$/);
    assert.deepEqual(await snapshot(), before);
    assert.equal((await fetch(`${base}/ready`)).status, 200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    assert.ok(metricValue(metrics, "sextant_ingest_api_auth_failures_total", 'reason="rate_limited"') >= 1);
    // Once the address's allowance grows back, a good token is served again.
    await eventually(async () => (await call(`${base}/v1/config`, { token: ADMIN })).status === 200, {
      timeoutMs: 60_000,
      message: "the admin was never let back in",
    });
  });
});

describe("ingest's start-up without authentication", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  before(async () => {
    env = await startNatsWithClient();
  });
  after(async () => env?.close());

  it("refuses to start with no authenticator, naming API_AUTH, and exits 2", async () => {
    await assert.rejects(
      startServiceProcess("ingest", { NATS_URL: env.nats.url }),
      /ingest exited with 2 before it was ready[\s\S]*API_AUTH: no authenticator is configured/,
    );
  });

  it("refuses an invalid token file, naming API_TOKENS_FILE and the field", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sextant-ingest-auth-"));
    try {
      writeFileSync(join(dir, "tokens.yaml"), stringify([{ subject: "x", token_sha256: "plaintext" }]));
      await assert.rejects(
        startServiceProcess("ingest", {
          NATS_URL: env.nats.url,
          API_AUTH: "tokens",
          API_TOKENS_FILE: join(dir, "tokens.yaml"),
        }),
        /ingest exited with 2 before it was ready[\s\S]*API_TOKENS_FILE: token file \S+: \[0\]\.token_sha256: must be the SHA-256/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("starts with API_AUTH=none, warning that the API is open", async () => {
    const ingest = await startServiceProcess("ingest", { NATS_URL: env.nats.url, API_AUTH: "none" });
    try {
      assert.match(ingest.output(), /API_AUTH=none: the API is open to anyone/);
      const applied = await call(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
        body: virtualService("open"),
      });
      assert.equal(applied.status, 200);
    } finally {
      await ingest.stop();
    }
  });
});

describe("ingest's config API with Kubernetes authentication (then the token file)", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let kube: FakeKubeApiServer;
  let ingest: ServiceProcess;
  let dir: string;
  let base: string;

  before(async () => {
    env = await startNatsWithClient();
    kube = await startFakeKubeApiServer();
    kube.addToken("alice-token", { username: "alice", groups: ["team-a-editors"] });
    kube.addToken("bob-token", { username: "bob" });
    // alice's RBAC: edit VirtualServices in team-a, through her group.
    kube.allow({
      group: "team-a-editors",
      verbs: ["create", "update", "get", "list"],
      apiGroups: ["networking.istio.io"],
      resources: ["virtualservices"],
      namespaces: ["team-a"],
    });
    dir = mkdtempSync(join(tmpdir(), "sextant-ingest-kube-auth-"));
    writeFileSync(join(dir, "kubeconfig"), kube.kubeconfigYaml());
    writeFileSync(join(dir, "tokens.yaml"), tokenFileText());
    ingest = await startServiceProcess("ingest", {
      NATS_URL: env.nats.url,
      API_AUTH: "kubernetes,tokens",
      API_TOKENS_FILE: join(dir, "tokens.yaml"),
      KUBECONFIG: join(dir, "kubeconfig"),
    });
    base = `http://127.0.0.1:${ingest.httpPort}`;
  });
  after(async () => {
    await ingest?.stop();
    await kube?.close();
    await env?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("allows what the user's RBAC allows, asking as the API server would for the CRD", async () => {
    const applied = await call(`${base}/v1/apply`, {
      token: "alice-token",
      body: virtualService("alice-route", { namespace: "team-a" }),
    });
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    const status = await (await env.bus.bucket(Buckets.configStatus)).get(
      configKey({ kind: "VirtualService", namespace: "team-a", name: "alice-route" }),
    );
    assert.equal(status?.value.lastChangedBy, "alice");
    const review = kube.subjectAccessReviews().find((r) => r.name === "alice-route");
    assert.deepEqual(review, {
      user: "alice",
      groups: ["team-a-editors", "system:authenticated"],
      verb: "create",
      group: "networking.istio.io",
      resource: "virtualservices",
      namespace: "team-a",
      name: "alice-route",
      allowed: true,
    });
  });

  it("denies what it does not, with 403 naming the user, and stores nothing", async () => {
    const config = await env.bus.bucket(Buckets.config);
    const before = (await config.list()).map((e) => [e.key, e.revision]);
    const elsewhere = await call(`${base}/v1/apply`, {
      token: "alice-token",
      body: virtualService("alice-elsewhere", { namespace: "team-b" }),
    });
    assert.equal(elsewhere.status, 403);
    assert.match(
      elsewhere.json.error,
      /^forbidden: alice may not create VirtualService "alice-elsewhere" in namespace "team-b"; nothing was stored$/,
    );
    const bob = await call(`${base}/v1/config/VirtualService/team-a/alice-route`, {
      method: "DELETE",
      token: "bob-token",
    });
    assert.equal(bob.status, 403);
    assert.match(
      bob.json.error,
      /^forbidden: bob may not delete VirtualService "alice-route" in namespace "team-a"/,
    );
    assert.deepEqual(
      (await config.list()).map((e) => [e.key, e.revision]),
      before,
    );
    const asked = kube.subjectAccessReviews().find((r) => r.user === "bob");
    assert.equal(asked?.verb, "delete");
    assert.equal(asked?.allowed, false);
  });

  it("answers 503 when the API server cannot review a token, unless the token file knows it", async () => {
    kube.injectFailure({ resource: "tokenreviews" }, { code: 500, reason: "InternalError" }, 2);
    const unreviewed = await call(`${base}/v1/config`, { token: "alice-token" });
    assert.equal(unreviewed.status, 503);
    assert.match(unreviewed.json.error, /^the Kubernetes TokenReview failed: /);
    const byFile = await call(`${base}/v1/config`, { token: ADMIN });
    assert.equal(byFile.status, 200, "the token file's admin is served while the API server is down");
  });

  it("refuses a token neither Kubernetes nor the token file knows, and accepts one the file knows", async () => {
    const unknown = await call(`${base}/v1/config`, { token: "nobody-token" });
    assert.equal(unknown.status, 401);
    assert.match(unknown.json.error, /^the bearer token is not valid$/);
    const admin = await call(`${base}/v1/apply`, {
      token: ADMIN,
      body: virtualService("by-file", { namespace: "team-b" }),
    });
    assert.equal(admin.status, 200, JSON.stringify(admin.json));
  });
});
