// /debug/syncz, /debug/config_dump, /debug/proxy_status and /debug/proxy_diff show every proxy's config: only a
// caller with a token granting `debug` reads them. push runs as its own process.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";

const sha256 = (token: string) => createHash("sha256").update(token).digest("hex");

describe("push's debug endpoints", () => {
  let nats: NatsServerFixture;
  let push: ServiceProcess;
  let dir: string;
  let base: string;

  before(async () => {
    nats = await startNatsServer();
    dir = mkdtempSync(join(tmpdir(), "sextant-push-debug-"));
    const grant = (subject: string, token: string, verbs: string[]) => ({
      subject,
      token_sha256: sha256(token),
      namespaces: ["*"],
      verbs,
      kinds: ["*"],
    });
    writeFileSync(
      join(dir, "tokens.yaml"),
      JSON.stringify([
        grant("operator", "debug-token", ["debug"]),
        grant("editor", "editor-token", ["get", "list", "create"]),
      ]),
    );
    push = await startServiceProcess("push", {
      NATS_URL: nats.url,
      XDS_PLAINTEXT_ENABLED: "true",
      XDS_PORT: String(await freePort()),
      XDS_TLS_ENABLED: "false",
      API_AUTH: "tokens",
      API_TOKENS_FILE: join(dir, "tokens.yaml"),
    });
    base = `http://127.0.0.1:${push.httpPort}`;
  });
  after(async () => {
    await push?.stop();
    await nats?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const path of [
    "/debug/syncz",
    "/debug/config_dump?proxyID=nobody",
    "/debug/proxy_status",
    "/debug/proxy_diff?proxyID=nobody",
  ]) {
    it(`${path}: 401 without a token`, async () => {
      const response = await fetch(`${base}${path}`);
      assert.equal(response.status, 401);
      assert.equal(response.headers.get("www-authenticate"), "Bearer");
      assert.match(((await response.json()) as { error: string }).error, /^no Authorization header/);
    });

    it(`${path}: 401 with an unknown token, 403 with one that may not debug`, async () => {
      const unknown = await fetch(`${base}${path}`, { headers: { authorization: "Bearer guessed" } });
      assert.equal(unknown.status, 401);
      const editor = await fetch(`${base}${path}`, { headers: { authorization: "Bearer editor-token" } });
      assert.equal(editor.status, 403);
      assert.match(((await editor.json()) as { error: string }).error, /^forbidden: editor may not debug/);
    });
  }

  it("answers with a token granting debug", async () => {
    const headers = { authorization: "Bearer debug-token" };
    const syncz = await fetch(`${base}/debug/syncz`, { headers });
    assert.equal(syncz.status, 200);
    assert.deepEqual(await syncz.json(), []);
    // No such proxy: the route itself answers, past authentication.
    assert.equal((await fetch(`${base}/debug/config_dump?proxyID=nobody`, { headers })).status, 404);
    assert.equal((await fetch(`${base}/debug/proxy_diff?proxyID=nobody`, { headers })).status, 404);
    const statuses = await fetch(`${base}/debug/proxy_status`, { headers });
    assert.equal(statuses.status, 200);
    assert.deepEqual(await statuses.json(), []);
  });

  it("leaves /metrics and /ready open", async () => {
    assert.equal((await fetch(`${base}/metrics`)).status, 200);
    assert.equal((await fetch(`${base}/ready`)).status, 200);
  });
});
