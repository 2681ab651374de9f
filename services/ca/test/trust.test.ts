import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadOrCreateCaMaterial } from "../src/pki/ca-material.js";
import { randomSerialHex } from "../src/pki/certificate.js";
import { checkCsr } from "../src/pki/csr.js";
import { CertificateIssuer } from "../src/pki/issuer.js";
import { nextTrustBundle } from "../src/trust/trust-bundle.js";
import { opensslVerify, workloadKey } from "./helpers.js";

const DAY = 86_400;
const material = () =>
  loadOrCreateCaMaterial({
    dir: mkdtempSync(join(tmpdir(), "sextant-rotation-")),
    trustDomain: "cluster.local",
    rootTtlSeconds: 3650 * DAY,
  });

test("root rotation: the new root is added, the old one kept until its certificates expire; both verify", async () => {
  const oldCa = material();
  const newCa = material();
  const now = new Date();
  const first = nextTrustBundle(undefined, "cluster.local", oldCa.root.toString(), 90 * DAY, now);
  assert.deepEqual(
    first.anchors.map((a) => a.active),
    [true],
  );
  assert.equal(
    nextTrustBundle(first, "cluster.local", oldCa.root.toString(), 90 * DAY, now),
    first,
    "unchanged: no write",
  );

  const rotated = nextTrustBundle(first, "cluster.local", newCa.root.toString(), 90 * DAY, now);
  assert.equal(rotated.anchors.length, 2);
  assert.equal(rotated.anchors[0]?.certificatePem, newCa.root.toString());
  assert.equal(rotated.anchors[0]?.active, true);
  assert.equal(rotated.anchors[1]?.certificatePem, oldCa.root.toString());
  assert.equal(rotated.anchors[1]?.active, false);
  assert.equal(rotated.anchors[1]?.notAfter?.getTime(), now.getTime() + 90 * DAY * 1000);

  // During the overlap, workloads holding old and new certificates both verify against the bundle.
  const bundlePem = rotated.anchors.map((a) => a.certificatePem).join("");
  const key = await workloadKey("ec");
  const csr = await checkCsr(key.csrPem);
  for (const ca of [oldCa, newCa]) {
    const issued = new CertificateIssuer(ca, { defaultSeconds: DAY, maxSeconds: 90 * DAY }).issue(
      csr,
      "spiffe://cluster.local/ns/default/sa/web",
      0,
      randomSerialHex(),
    );
    assert.match(opensslVerify(issued.chain, bundlePem), /OK/);
  }

  // After the old root's certificates have expired, it leaves the bundle.
  const later = new Date(now.getTime() + 91 * DAY * 1000);
  const pruned = nextTrustBundle(rotated, "cluster.local", newCa.root.toString(), 90 * DAY, later);
  assert.deepEqual(
    pruned.anchors.map((a) => a.certificatePem),
    [newCa.root.toString()],
  );
});
