import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { eventually, metricValue } from "@sextant/testing";
import { busTrustBundleSource, type IdentitySnapshot, type WorkloadIdentity } from "../src/index.js";
import {
  auditLines,
  type CaFixture,
  chainsToRoots,
  leafSans,
  startCa,
  testLogger,
  workloadIdentity,
} from "./helpers.js";

const APP_TOKEN = "app-bootstrap-token-0123456789";
const ROTATING_TOKEN = "rotating-bootstrap-token-0123456789";
const ROOT_ROTATION_TOKEN = "root-rotation-token-0123456789";
const APP = "spiffe://cluster.local/ns/local/sa/app";
const ROTATING = "spiffe://cluster.local/ns/local/sa/rotating";
const ROOT_ROTATION = "spiffe://cluster.local/ns/local/sa/root-rotation";

let fixture: CaFixture;
const identities: WorkloadIdentity[] = [];

/** A WorkloadIdentity against the fixture's CA, closed after the suite. */
function tracked(identity: WorkloadIdentity): WorkloadIdentity {
  identities.push(identity);
  return identity;
}

before(async () => {
  fixture = await startCa({
    [APP_TOKEN]: { namespace: "local", serviceAccount: "app" },
    [ROTATING_TOKEN]: { namespace: "local", serviceAccount: "rotating" },
    [ROOT_ROTATION_TOKEN]: { namespace: "local", serviceAccount: "root-rotation" },
  });
});

after(async () => {
  for (const identity of identities) await identity.close();
  await fixture?.dispose();
});

describe("WorkloadIdentity", () => {
  test("obtains its first certificate with a bootstrap token: the right SPIFFE id, chaining to the roots", async () => {
    const identity = tracked(
      workloadIdentity(fixture, { serviceAccount: "app", token: async () => APP_TOKEN }),
    );
    assert.throws(
      () => identity.current(),
      /no identity yet for spiffe:\/\/cluster.local\/ns\/local\/sa\/app/,
    );
    await identity.start();
    const { certificate, rootsPem } = identity.current();
    assert.equal(certificate.spiffeId, APP);
    assert.equal(leafSans(certificate.certChainPem), `URI:${APP}`);
    assert.ok(rootsPem.length >= 1);
    assert.ok(chainsToRoots(certificate.certChainPem, rootsPem), "the chain verifies against the roots");
    assert.ok(
      !certificate.certChainPem.includes(fixture.rootPem.trim()),
      "the root is in the trust bundle, not in the presented chain",
    );
    // The key is ours (EC P-256, generated here) and matches the leaf.
    const leaf = new X509Certificate(certificate.certChainPem);
    assert.equal(leaf.publicKey.asymmetricKeyDetails?.namedCurve, "prime256v1");
    assert.ok(certificate.notAfter.getTime() - certificate.notBefore.getTime() > 3600_000 - 1);
    const [audit] = auditLines(fixture.ca).filter((line) => line.identity === APP);
    assert.equal(audit?.authenticator, "bootstrap-token");
  });

  test("rotates before expiry, renewing over mTLS with its certificate; each rotation is a new snapshot", async () => {
    let tokenReads = 0;
    // The token works once: every later certificate must come from mTLS renewal.
    const identity = tracked(
      workloadIdentity(fixture, {
        serviceAccount: "rotating",
        token: async () => (tokenReads++ === 0 ? ROTATING_TOKEN : undefined),
        // 64 s with 95 % of the lifetime as grace: rotation about 3 s after it arrived.
        ttlSeconds: 64,
        gracePeriodRatio: 0.95,
      }),
    );
    const seen: IdentitySnapshot[] = [];
    identity.onChange((snapshot) => seen.push(snapshot));
    await identity.start();
    const first = identity.current();
    const issuedBefore = metricValue(await fixture.metrics(), "citadel_server_success_cert_issuance_count");

    const rotated = await eventually(
      () => seen.find((snapshot) => snapshot.certificate.certChainPem !== first.certificate.certChainPem),
      { timeoutMs: 30_000, message: "no rotation" },
    );
    assert.notEqual(rotated.certificate.privateKeyPem, first.certificate.privateKeyPem, "a new key");
    assert.equal(rotated.certificate.spiffeId, ROTATING);
    assert.ok(chainsToRoots(rotated.certificate.certChainPem, rotated.rootsPem));
    assert.equal(identity.current(), seen[seen.length - 1], "current() is the latest snapshot");
    const renewals = auditLines(fixture.ca).filter((line) => line.identity === ROTATING);
    assert.equal(renewals[0]?.authenticator, "bootstrap-token");
    assert.ok(renewals.length >= 2);
    assert.ok(
      renewals.slice(1).every((line) => line.authenticator === "mesh-certificate"),
      "renewals authenticated with the mesh certificate",
    );
    assert.equal(tokenReads, 1, "the token was not needed for renewal");
    assert.ok(
      metricValue(await fixture.metrics(), "citadel_server_success_cert_issuance_count") > issuedBefore,
    );
    await identity.close();
  });

  test("start() rejects, naming the CA's reason, when the token is unknown", async () => {
    const identity = tracked(
      workloadIdentity(fixture, { serviceAccount: "app", token: async () => "not-a-known-token-0123456789" }),
    );
    await assert.rejects(identity.start(), (error: Error) => {
      assert.match(error.message, /refused a certificate for spiffe:\/\/cluster.local\/ns\/local\/sa\/app/);
      assert.match(error.message, /UNAUTHENTICATED/);
      assert.match(error.message, /bootstrap-token: token is not in the bootstrap token file/);
      return true;
    });
  });

  test("start() rejects when there is no token at all", async () => {
    const identity = tracked(
      workloadIdentity(fixture, { serviceAccount: "app", token: async () => undefined }),
    );
    await assert.rejects(identity.start(), /UNAUTHENTICATED: no credentials/);
  });

  test("after a root rotation, trusts the new root from the bundle and renews with the token", async () => {
    const bus = await fixture.bus();
    const identity = tracked(
      workloadIdentity(fixture, {
        serviceAccount: "root-rotation",
        token: async () => ROOT_ROTATION_TOKEN,
        ttlSeconds: 64,
        gracePeriodRatio: 0.95,
        // The CA's serving certificate changes root too: the bus, not the CA, brings the new bundle.
        trust: busTrustBundleSource({ bus: () => bus, trustDomain: "cluster.local", logger: testLogger }),
      }),
    );
    await identity.start();
    const oldRoot = fixture.rootPem;
    assert.ok(chainsToRoots(identity.current().certificate.certChainPem, [oldRoot]));

    await fixture.restartWithNewRoot();
    const newRoot = fixture.rootPem;
    assert.notEqual(newRoot, oldRoot);
    const renewed = await eventually(
      () => {
        const snapshot = identity.current();
        return chainsToRoots(snapshot.certificate.certChainPem, [newRoot]) ? snapshot : undefined;
      },
      { timeoutMs: 60_000, message: "no certificate from the new root" },
    );
    assert.equal(renewed.rootsPem[0]?.trim(), newRoot.trim(), "the new, active root comes first");
    assert.ok(
      renewed.rootsPem.some((pem) => pem.trim() === oldRoot.trim()),
      "the old root is trusted during the overlap",
    );
    // The CA no longer accepts a certificate of the old root: the token stood in.
    const issued = auditLines(fixture.ca).filter((line) => line.identity === ROOT_ROTATION);
    assert.equal(issued[0]?.authenticator, "bootstrap-token");
  });
});
