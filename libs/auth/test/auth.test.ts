import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createLogger } from "@sextant/observability";
import { stringify } from "yaml";
import type { Identity } from "../src/authenticator.js";
import { parseBearer } from "../src/bearer.js";
import { FailureLimiter } from "../src/failure-limiter.js";
import { resourceAttributes } from "../src/kubernetes.js";
import { readTokenFile, TokenFileAuthenticator, tokenSha256 } from "../src/token-file.js";

const logger = createLogger({ service: "test", level: "silent" });

describe("parseBearer", () => {
  it("reads the token and refuses anything else, with the reason", () => {
    assert.deepEqual(parseBearer("Bearer abc.DEF-_~+/="), { ok: true, token: "abc.DEF-_~+/=" });
    assert.deepEqual(parseBearer("bearer  abc "), { ok: true, token: "abc" });
    for (const [header, problem] of [
      [undefined, "missing"],
      ["", "missing"],
      ["Basic dXNlcjpwYXNz", "malformed"],
      ["Bearer", "malformed"],
      ["Bearer a b", "malformed"],
      ["Bearer tök", "malformed"],
      [`Bearer ${"a".repeat(9000)}`, "too_large"],
    ] as const) {
      const result = parseBearer(header);
      assert.equal(result.ok, false, String(header));
      assert.equal(!result.ok && result.problem, problem, String(header).slice(0, 20));
    }
  });
});

describe("FailureLimiter", () => {
  it("refuses an address after its burst of failures, other addresses not, and lets it back at the refill rate", () => {
    let now = 0;
    const limiter = new FailureLimiter({ burst: 3, refillMs: 1000, now: () => now });
    for (let i = 0; i < 3; i++) {
      assert.equal(limiter.refused("a"), undefined);
      limiter.failed("a");
    }
    assert.equal(limiter.refused("a"), 1);
    assert.equal(limiter.refused("b"), undefined);
    now = 1000;
    assert.equal(limiter.refused("a"), undefined);
    limiter.failed("a");
    assert.equal(limiter.refused("a"), 1);
    now = 10_000;
    assert.equal(limiter.refused("a"), undefined);
  });

  it("remembers a bounded number of addresses", () => {
    const limiter = new FailureLimiter({ burst: 1, refillMs: 1000, maxAddresses: 2, now: () => 0 });
    for (const address of ["a", "b", "c"]) limiter.failed(address);
    assert.equal(limiter.refused("a"), undefined, "the oldest is forgotten");
    assert.equal(limiter.refused("c"), 1);
  });
});

describe("token file", () => {
  let dir: string;
  const entry = (subject: string, token: string, extra: Record<string, unknown> = {}) => ({
    subject,
    token_sha256: tokenSha256(token),
    namespaces: ["team-a"],
    verbs: ["get", "list", "create"],
    kinds: ["VirtualService"],
    ...extra,
  });
  before(() => {
    dir = mkdtempSync(join(tmpdir(), "sextant-auth-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("names the entry and field of each problem", () => {
    const file = join(dir, "bad.yaml");
    writeFileSync(
      file,
      stringify([
        entry("a", "t1", { token_sha256: "t1" }),
        entry("b", "t2", { verbs: ["patch"] }),
        entry("c", "t3", { kinds: ["Pod"] }),
        entry("d", "t3"),
        entry("e", "t4", { namespaces: [] }),
        { ...entry("f", "t5"), token: "t5" },
      ]),
    );
    assert.throws(
      () => readTokenFile(file),
      (error: Error) => {
        assert.match(error.message, /\[0\]\.token_sha256: must be the SHA-256 of the token/);
        assert.match(
          error.message,
          /\[1\]\.verbs\[0\]: must be "\*" or one of get, list, create, update, delete/,
        );
        assert.match(error.message, /\[2\]\.kinds\[0\]: must be "\*" or one of VirtualService/);
        assert.match(error.message, /\[3\]\.token_sha256: the same token as entry 2/);
        assert.match(error.message, /\[4\]\.namespaces: must name at least one/);
        assert.match(error.message, /\[5\]: Unrecognized key\(s\) in object: 'token'/);
        return true;
      },
    );
    writeFileSync(file, "subject: not-a-list\n");
    assert.throws(() => readTokenFile(file), /the file: Expected array, received object/);
  });

  it("authenticates by hash and authorizes by the entry's verbs, kinds and namespaces, with wildcards", async () => {
    const file = join(dir, "tokens.yaml");
    writeFileSync(
      file,
      stringify([
        entry("team-a", "token-a"),
        entry("team-a", "token-a-debug", { verbs: ["debug"] }),
        entry("admin", "token-admin", { namespaces: ["*"], verbs: ["*"], kinds: ["*"] }),
      ]),
    );
    const tokens = new TokenFileAuthenticator(file, logger);
    assert.equal(await tokens.authenticate("token-b"), undefined);
    const a = await tokens.authenticate("token-a");
    assert.equal(a?.subject, "team-a");
    const may = async (
      identity: Identity | undefined,
      verb: "create" | "delete" | "debug",
      kind?: string,
      namespace?: string,
    ) => identity !== undefined && (await tokens.authorize(identity, { verb, kind, namespace })).allowed;
    assert.equal(await may(a, "create", "VirtualService", "team-a"), true);
    assert.equal(await may(a, "create", "VirtualService", "team-b"), false);
    assert.equal(await may(a, "create", "Gateway", "team-a"), false);
    assert.equal(await may(a, "delete", "VirtualService", "team-a"), false);
    assert.equal(await may(a, "debug"), false, "the grants are the token's, not the subject's");
    assert.equal(await may(await tokens.authenticate("token-a-debug"), "debug"), true);
    const admin = await tokens.authenticate("token-admin");
    assert.equal(await may(admin, "delete", "AuthorizationPolicy", "anywhere"), true);
    assert.equal(await may(admin, "debug"), true);
  });

  it("reloads on change and keeps the last good tokens when the file turns invalid", async () => {
    const file = join(dir, "reload.yaml");
    writeFileSync(file, stringify([entry("one", "token-1")]));
    const tokens = new TokenFileAuthenticator(file, logger);
    tokens.watch();
    try {
      writeFileSync(file, stringify([entry("two", "token-2")]));
      await until(async () => (await tokens.authenticate("token-2")) !== undefined);
      assert.equal(await tokens.authenticate("token-1"), undefined);
      writeFileSync(file, "- subject: [not, a, string]\n");
      tokens.reload();
      assert.equal((await tokens.authenticate("token-2"))?.subject, "two");
    } finally {
      tokens.close();
    }
  });
});

describe("Kubernetes resource attributes", () => {
  it("are those the API server checks for the same change through the CRD", () => {
    assert.deepEqual(
      resourceAttributes({ verb: "create", kind: "ServiceEntry", namespace: "a", name: "x" }),
      {
        group: "networking.istio.io",
        version: "v1",
        resource: "serviceentries",
        verb: "create",
        namespace: "a",
        name: "x",
      },
    );
    assert.deepEqual(resourceAttributes({ verb: "list", kind: "AuthorizationPolicy", namespace: "b" }), {
      group: "security.istio.io",
      version: "v1",
      resource: "authorizationpolicies",
      verb: "list",
      namespace: "b",
    });
    assert.deepEqual(resourceAttributes({ verb: "debug" }), {
      group: "sextant.io",
      resource: "proxies",
      subresource: "debug",
      verb: "get",
    });
    assert.equal(resourceAttributes({ verb: "get", kind: "Pod", namespace: "a" }), undefined);
  });
});

async function until(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail("the condition never held");
}
