import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { status } from "@grpc/grpc-js";
import { parseSettings, SettingsError, type StartedService, startService } from "@sextant/runtime";
import { freePort, metricValue, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { caService } from "../src/main.js";
import { identityRateLimit } from "../src/server/rate-limit.js";
import { type CaSettings, caSettings } from "../src/settings.js";
import { caClient, createCertificate, workloadKey } from "./helpers.js";

const TOKEN_A = "rate-limit-token-a-0123456789";
const TOKEN_B = "rate-limit-token-b-0123456789";

describe("CreateCertificate rate limit per identity", () => {
  let nats: NatsServerFixture;
  let ca: StartedService<CaSettings>;
  let client: ReturnType<typeof caClient>;
  before(async () => {
    nats = await startNatsServer();
    const work = mkdtempSync(join(tmpdir(), "sextant-ca-rate-"));
    writeFileSync(
      join(work, "tokens.json"),
      JSON.stringify({
        [TOKEN_A]: { namespace: "busy", serviceAccount: "a" },
        [TOKEN_B]: { namespace: "quiet", serviceAccount: "b" },
      }),
    );
    const port = await freePort();
    ca = await startService(caService, {
      NATS_URL: nats.url,
      HTTP_PORT: "0",
      GRPC_PORT: String(port),
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
      OTEL_SDK_DISABLED: "true",
      CA_CERTS_DIR: join(work, "cacerts"),
      BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
      CA_AUTHENTICATORS: "bootstrap-token",
      // One a minute after a burst of two: the third request of a test is refused.
      CA_RATE_LIMIT_PER_IDENTITY: "1",
      CA_RATE_LIMIT_BURST: "2",
    });
    client = caClient(`localhost:${port}`, readFileSync(join(work, "cacerts", "root-cert.pem"), "utf8"));
  });
  after(async () => {
    client?.close();
    await ca?.stop();
    await nats?.dispose();
  });

  test("refuses an identity past its burst with RESOURCE_EXHAUSTED; other identities are served", async () => {
    const csr = (await workloadKey("ec")).csrPem;
    for (let i = 0; i < 2; i++)
      assert.ok("chain" in (await createCertificate(client, csr, { token: TOKEN_A })));
    const refused = await createCertificate(client, csr, { token: TOKEN_A });
    assert.ok("error" in refused, "the third request of identity a is refused");
    assert.equal(refused.error.code, status.RESOURCE_EXHAUSTED);
    assert.match(
      refused.error.details,
      /^too many certificate requests for spiffe:\/\/cluster\.local\/ns\/busy\/sa\/a: at most 1 a minute after a burst of 2 \(CA_RATE_LIMIT_PER_IDENTITY, CA_RATE_LIMIT_BURST\); retry in \d+ s$/,
    );
    const pushback = Number(refused.error.metadata.get("grpc-retry-pushback-ms")[0]);
    assert.ok(pushback > 0 && pushback <= 60_000, `grpc-retry-pushback-ms ${pushback}`);

    assert.ok("chain" in (await createCertificate(client, csr, { token: TOKEN_B })), "identity b is served");
    // An unauthenticated caller is refused for that, not counted against anyone.
    const anonymous = await createCertificate(client, csr, { token: "unknown-token-0123456789" });
    assert.ok("error" in anonymous);
    assert.equal(anonymous.error.code, status.UNAUTHENTICATED);

    const metrics = await (await fetch(`http://127.0.0.1:${ca.httpPort}/metrics`)).text();
    assert.equal(metricValue(metrics, "citadel_server_csr_error_count", 'reason="rate_limited"'), 1);
    assert.equal(metricValue(metrics, "citadel_server_success_cert_issuance_count"), 3);
  });
});

describe("identityRateLimit", () => {
  test("lets an identity back at its rate, and is off at 0", () => {
    let now = 0;
    const limit = identityRateLimit(60, 1, () => now);
    assert.ok(limit);
    assert.equal(limit.buckets.tryTake("spiffe://cluster.local/ns/a/sa/a"), 0);
    assert.equal(limit.buckets.tryTake("spiffe://cluster.local/ns/a/sa/a"), 1_000);
    now = 1_000;
    assert.equal(limit.buckets.tryTake("spiffe://cluster.local/ns/a/sa/a"), 0);
    assert.equal(identityRateLimit(0, 100), undefined);
  });
});

describe("CA_RATE_LIMIT_PER_IDENTITY and CA_RATE_LIMIT_BURST", () => {
  test("default to 600 a minute and 100, and refuse values that are not whole numbers", () => {
    const settings = parseSettings(caSettings, { CA_AUTHENTICATORS: "mesh-certificate" });
    assert.equal(settings.CA_RATE_LIMIT_PER_IDENTITY, 600);
    assert.equal(settings.CA_RATE_LIMIT_BURST, 100);
    for (const env of [
      { CA_RATE_LIMIT_PER_IDENTITY: "-1" },
      { CA_RATE_LIMIT_PER_IDENTITY: "ten" },
      { CA_RATE_LIMIT_BURST: "0" },
      { CA_RATE_LIMIT_BURST: "2.5" },
    ])
      assert.throws(
        () => parseSettings(caSettings, { CA_AUTHENTICATORS: "mesh-certificate", ...env }),
        (error) => error instanceof SettingsError && error.message.includes(Object.keys(env)[0] ?? "?"),
      );
  });
});
