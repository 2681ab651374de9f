import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { status } from "@grpc/grpc-js";
import { Buckets, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { type StartedService, startService } from "@sextant/runtime";
import {
  type FakeKubeApiServer,
  freePort,
  type NatsServerFixture,
  startFakeKubeApiServer,
  startNatsServer,
} from "@sextant/testing";
import { caService } from "../src/main.js";
import { loadOrCreateCaMaterial } from "../src/pki/ca-material.js";
import { buildCertificate, toPem } from "../src/pki/certificate.js";
import type { CaSettings } from "../src/settings.js";
import { trustBundleKey } from "../src/trust/trust-bundle.js";
import { caClient, createCertificate, opensslVerify, tamperedCsr, workloadKey } from "./helpers.js";

const WEB = "spiffe://cluster.local/ns/default/sa/web";
const BOOTSTRAP_TOKEN = "bootstrap-token-0123456789abcdef";

let nats: NatsServerFixture;
let kube: FakeKubeApiServer;
let ca: StartedService<CaSettings>;
let caDir: string;
let address: string;
let rootPem: string;
let env: Record<string, string>;

async function metric(name: string, reason?: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${ca.httpPort}/metrics`)).text();
  const label = reason ? `{reason="${reason}"` : "";
  const line = text.split("\n").find((l) => l.startsWith(`${name}${label}`));
  return line ? Number(line.split(" ").pop()) : 0;
}

function expectError(
  result: Awaited<ReturnType<typeof createCertificate>>,
  code: status,
  message: RegExp,
): void {
  assert.ok("error" in result, "expected an error");
  assert.equal(result.error.code, code, result.error.details);
  assert.match(result.error.details, message);
}

before(async () => {
  nats = await startNatsServer();
  kube = await startFakeKubeApiServer();
  kube.addServiceAccountToken("good-token", {
    namespace: "default",
    serviceAccount: "web",
    audiences: ["istio-ca"],
  });
  kube.addServiceAccountToken("other-audience", {
    namespace: "default",
    serviceAccount: "web",
    audiences: ["vault"],
  });
  kube.addServiceAccountToken("expired-token", {
    namespace: "default",
    serviceAccount: "web",
    audiences: ["istio-ca"],
    expired: true,
  });
  const work = mkdtempSync(join(tmpdir(), "sextant-ca-test-"));
  caDir = join(work, "cacerts");
  writeFileSync(join(work, "kubeconfig"), kube.kubeconfigYaml());
  writeFileSync(
    join(work, "tokens.json"),
    JSON.stringify({ [BOOTSTRAP_TOKEN]: { namespace: "local", serviceAccount: "app" } }),
  );
  const port = await freePort();
  address = `localhost:${port}`;
  env = {
    NATS_URL: nats.url,
    HTTP_PORT: "0",
    GRPC_PORT: String(port),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    CA_CERTS_DIR: caDir,
    KUBECONFIG: join(work, "kubeconfig"),
    BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
    CA_AUTHENTICATORS: "kubernetes,mesh-certificate,bootstrap-token",
    MAX_WORKLOAD_CERT_TTL: "30d",
  };
  ca = await startService(caService, env);
  rootPem = readFileSync(join(caDir, "root-cert.pem"), "utf8");
});

after(async () => {
  await ca?.stop();
  await kube?.close();
  await nats?.dispose();
});

describe("CreateCertificate", () => {
  test("issues a chain openssl accepts, for exactly the caller's SPIFFE ID, with the default TTL", async () => {
    const client = caClient(address, rootPem);
    const key = await workloadKey(2048);
    const before = await metric("citadel_server_success_cert_issuance_count");
    const result = await createCertificate(client, key.csrPem, { token: "good-token" });
    assert.ok("chain" in result, "error" in result ? result.error.details : "");
    assert.equal(result.chain.length, 2, "leaf then root");
    assert.equal(
      new X509Certificate(result.chain[1] ?? "").raw.equals(new X509Certificate(rootPem).raw),
      true,
    );
    assert.match(opensslVerify(result.chain, rootPem), /leaf\.pem: OK/);
    const leaf = new X509Certificate(result.chain[0] ?? "");
    assert.equal(leaf.subjectAltName, `URI:${WEB}`);
    const lifetime = new Date(leaf.validTo).getTime() - Date.now();
    assert.ok(Math.abs(lifetime - 24 * 3600_000) < 120_000, `lifetime ${lifetime} ms`);
    assert.equal(await metric("citadel_server_success_cert_issuance_count"), before + 1);
    client.close();
  });

  test("honours a requested TTL and caps it at the maximum", async () => {
    const client = caClient(address, rootPem);
    const key = await workloadKey(3072);
    const hour = await createCertificate(client, key.csrPem, { token: "good-token", validity: 3600 });
    assert.ok("chain" in hour);
    const hourLeft = new Date(new X509Certificate(hour.chain[0] ?? "").validTo).getTime() - Date.now();
    assert.ok(Math.abs(hourLeft - 3600_000) < 120_000, `lifetime ${hourLeft} ms`);
    const long = await createCertificate(client, key.csrPem, { token: "good-token", validity: 365 * 86_400 });
    assert.ok("chain" in long);
    const longLeft = new Date(new X509Certificate(long.chain[0] ?? "").validTo).getTime() - Date.now();
    assert.ok(Math.abs(longLeft - 30 * 86_400_000) < 120_000, `capped lifetime ${longLeft} ms`);
    client.close();
  });

  test("signs ECDSA P-256 CSRs", async () => {
    const client = caClient(address, rootPem);
    const key = await workloadKey("ec", [WEB]);
    const result = await createCertificate(client, key.csrPem, { token: "good-token" });
    assert.ok("chain" in result, "error" in result ? result.error.details : "");
    assert.match(opensslVerify(result.chain, rootPem), /OK/);
    const leaf = new X509Certificate(result.chain[0] ?? "");
    assert.equal(leaf.publicKey.asymmetricKeyType, "ec");
    assert.equal(leaf.subjectAltName, `URI:${WEB}`);
    client.close();
  });

  test("authenticates with a bootstrap token from the file", async () => {
    const client = caClient(address, rootPem);
    const result = await createCertificate(client, (await workloadKey(2048)).csrPem, {
      token: BOOTSTRAP_TOKEN,
    });
    assert.ok("chain" in result, "error" in result ? result.error.details : "");
    assert.equal(
      new X509Certificate(result.chain[0] ?? "").subjectAltName,
      "URI:spiffe://cluster.local/ns/local/sa/app",
    );
    client.close();
  });

  test("renews for the identity of a valid mesh certificate presented over mTLS", async () => {
    const key = await workloadKey("ec");
    const first = await createCertificate(caClient(address, rootPem), key.csrPem, { token: BOOTSTRAP_TOKEN });
    assert.ok("chain" in first);
    const client = caClient(address, rootPem, { keyPem: key.keyPem, chainPem: first.chain.join("") });
    const renewed = await createCertificate(client, (await workloadKey(2048)).csrPem);
    assert.ok("chain" in renewed, "error" in renewed ? renewed.error.details : "");
    assert.equal(
      new X509Certificate(renewed.chain[0] ?? "").subjectAltName,
      "URI:spiffe://cluster.local/ns/local/sa/app",
    );
    client.close();
  });

  test("refuses each bad request with a specific status and message, and counts it", async () => {
    const client = caClient(address, rootPem);
    const good = await workloadKey(2048);
    const cases: Array<{
      name: string;
      reason: string;
      call: () => ReturnType<typeof createCertificate>;
      code: status;
      message: RegExp;
    }> = [
      {
        name: "malformed CSR",
        reason: "malformed_csr",
        code: status.INVALID_ARGUMENT,
        message: /malformed CSR/,
        call: () =>
          createCertificate(
            client,
            "-----BEGIN CERTIFICATE REQUEST-----\nbm9wZQ==\n-----END CERTIFICATE REQUEST-----\n",
            { token: "good-token" },
          ),
      },
      {
        name: "bad CSR signature",
        reason: "bad_csr_signature",
        code: status.INVALID_ARGUMENT,
        message: /signature does not verify/,
        call: async () => createCertificate(client, tamperedCsr(good.csrPem), { token: "good-token" }),
      },
      {
        name: "RSA 1024",
        reason: "weak_key",
        code: status.INVALID_ARGUMENT,
        message: /RSA 1024 bits; at least 2048/,
        call: async () =>
          createCertificate(client, (await workloadKey(1024)).csrPem, { token: "good-token" }),
      },
      {
        name: "no credentials",
        reason: "no_credentials",
        code: status.UNAUTHENTICATED,
        message: /no credentials/,
        call: () => createCertificate(client, good.csrPem),
      },
      {
        name: "wrong audience",
        reason: "token_review_failed",
        code: status.UNAUTHENTICATED,
        message: /kubernetes: token review failed: .*audience/i,
        call: () => createCertificate(client, good.csrPem, { token: "other-audience" }),
      },
      {
        name: "expired token",
        reason: "token_review_failed",
        code: status.UNAUTHENTICATED,
        message: /kubernetes: token review failed: .*expired/i,
        call: () => createCertificate(client, good.csrPem, { token: "expired-token" }),
      },
      {
        name: "CSR for another identity",
        reason: "san_mismatch",
        code: status.PERMISSION_DENIED,
        message:
          /asks for spiffe:\/\/cluster.local\/ns\/kube-system\/sa\/admin, but the caller is spiffe:\/\/cluster.local\/ns\/default\/sa\/web/,
        call: async () =>
          createCertificate(
            client,
            (await workloadKey("ec", ["spiffe://cluster.local/ns/kube-system/sa/admin"])).csrPem,
            { token: "good-token" },
          ),
      },
    ];
    for (const c of cases) {
      const before = await metric("citadel_server_csr_error_count", c.reason);
      expectError(await c.call(), c.code, c.message);
      assert.equal(await metric("citadel_server_csr_error_count", c.reason), before + 1, `${c.name} counted`);
    }
    client.close();
  });

  test("refuses renewal with an expired mesh certificate or one from a foreign CA", async () => {
    const material = loadOrCreateCaMaterial({ dir: caDir, trustDomain: "cluster.local", rootTtlSeconds: 1 });
    const foreign = loadOrCreateCaMaterial({
      dir: mkdtempSync(join(tmpdir(), "sextant-foreign-")),
      trustDomain: "cluster.local",
      rootTtlSeconds: 86_400,
    });
    const key = await workloadKey("ec");
    const { createPrivateKey, createPublicKey } = await import("node:crypto");
    const spki = createPublicKey(createPrivateKey(key.keyPem)).export({ format: "der", type: "spki" });
    const leaf = (signer: typeof material, notAfter: number) =>
      toPem(
        buildCertificate(
          {
            kind: "workload",
            publicKeySpki: spki,
            subject: [],
            notBefore: new Date(Date.now() - 7200_000),
            notAfter: new Date(notAfter),
            uris: [WEB],
          },
          { certificate: signer.signingCert, key: signer.signingKey },
        ),
      );
    const expired = caClient(address, rootPem, {
      keyPem: key.keyPem,
      chainPem: leaf(material, Date.now() - 3600_000),
    });
    const before = await metric("citadel_server_csr_error_count", "expired_certificate");
    expectError(
      await createCertificate(expired, key.csrPem),
      status.UNAUTHENTICATED,
      /mesh-certificate: client certificate is not valid now/,
    );
    assert.equal(await metric("citadel_server_csr_error_count", "expired_certificate"), before + 1);
    const alien = caClient(address, rootPem, {
      keyPem: key.keyPem,
      chainPem: leaf(foreign, Date.now() + 3600_000),
    });
    const beforeForeign = await metric("citadel_server_csr_error_count", "foreign_certificate");
    expectError(
      await createCertificate(alien, key.csrPem),
      status.UNAUTHENTICATED,
      /mesh-certificate: client certificate is not signed by this CA/,
    );
    assert.equal(await metric("citadel_server_csr_error_count", "foreign_certificate"), beforeForeign + 1);
    expired.close();
    alien.close();
  });

  test("publishes the root to sextant-trust and keeps it across a restart", async () => {
    const bus = await connectBus({
      url: nats.url,
      name: "ca-test",
      logger: createLogger({ service: "test", level: "silent" }),
    });
    const bucket = await bus.bucket(Buckets.trust);
    const bundle = (await bucket.get(trustBundleKey("cluster.local")))?.value;
    assert.equal(bundle?.anchors.length, 1);
    assert.equal(bundle?.anchors[0]?.certificatePem, rootPem);
    assert.equal(bundle?.anchors[0]?.active, true);
    await ca.stop();
    ca = await startService(caService, env);
    assert.equal(readFileSync(join(caDir, "root-cert.pem"), "utf8"), rootPem);
    const client = caClient(address, rootPem);
    const result = await createCertificate(client, (await workloadKey("ec")).csrPem, { token: "good-token" });
    assert.ok("chain" in result);
    assert.match(opensslVerify(result.chain, rootPem), /OK/);
    assert.equal((await bucket.get(trustBundleKey("cluster.local")))?.value.anchors.length, 1);
    client.close();
    await bus.close();
  });
});
