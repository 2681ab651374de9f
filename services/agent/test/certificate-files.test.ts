import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { eventually } from "@sextant/testing";
import { certificateFilesRunner } from "../src/certs/certificate-files.js";
import { makeRoot, publicKeys } from "./helpers/certs.js";
import { FakeIdentity } from "./helpers/fake-identity.js";
import { testLogger } from "./helpers/logger.js";

const read = (dir: string, name: string) => readFileSync(join(dir, name), "utf8");

describe("certificate files for proxyless apps", () => {
  test("are written at start and on every change, atomically, with the key private", async () => {
    const identity = new FakeIdentity();
    const dir = join(mkdtempSync(join(tmpdir(), "sextant-agent-certs-")), "var", "lib", "istio", "data");
    const runner = certificateFilesRunner({ dir, identity: () => identity, logger: testLogger });
    await runner.start();

    const first = identity.current();
    assert.equal(read(dir, "cert-chain.pem"), first.certificate.certChainPem);
    assert.equal(read(dir, "key.pem"), first.certificate.privateKeyPem);
    assert.equal(read(dir, "root-cert.pem"), identity.root.certPem);
    assert.equal(statSync(join(dir, "key.pem")).mode & 0o777, 0o600);
    const keys = publicKeys(read(dir, "cert-chain.pem"), read(dir, "key.pem"));
    assert.equal(keys.ofCert, keys.ofKey, "the key belongs to the certificate");

    const rotated = identity.rotate();
    await eventually(() => read(dir, "cert-chain.pem") === rotated.certificate.certChainPem, {
      message: "the rotated certificate was not written",
    });
    assert.equal(read(dir, "key.pem"), rotated.certificate.privateKeyPem);
    assert.equal(statSync(join(dir, "key.pem")).mode & 0o777, 0o600);
    const rotatedKeys = publicKeys(read(dir, "cert-chain.pem"), read(dir, "key.pem"));
    assert.equal(rotatedKeys.ofCert, rotatedKeys.ofKey);

    const otherRoot = makeRoot("next-root").certPem;
    identity.changeRoots([identity.root.certPem, otherRoot]);
    assert.equal(read(dir, "root-cert.pem"), identity.root.certPem + otherRoot);

    assert.deepEqual(
      readdirSync(dir).sort(),
      ["cert-chain.pem", "key.pem", "root-cert.pem"],
      "no temporary files",
    );
    await runner.close();
    assert.equal(identity.listeners, 0, "the runner stopped following the identity");
  });

  test("a trust bundle change rewrites only root-cert.pem", async () => {
    const identity = new FakeIdentity();
    const dir = mkdtempSync(join(tmpdir(), "sextant-agent-certs-"));
    const runner = certificateFilesRunner({ dir, identity: () => identity, logger: testLogger });
    await runner.start();
    const inode = (name: string) => statSync(join(dir, name)).ino;
    const before = { cert: inode("cert-chain.pem"), key: inode("key.pem"), root: inode("root-cert.pem") };
    identity.changeRoots([identity.root.certPem, makeRoot("next-root").certPem]);
    assert.equal(inode("cert-chain.pem"), before.cert);
    assert.equal(inode("key.pem"), before.key);
    assert.notEqual(inode("root-cert.pem"), before.root);
    await runner.close();
  });
});
