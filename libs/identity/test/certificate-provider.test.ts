import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { experimental } from "@grpc/grpc-js";
import { eventually } from "@sextant/testing";
import { type IdentitySnapshot, type IdentitySource, identityCertificateProvider } from "../src/index.js";

/** An identity whose snapshots the test sets. */
class FakeIdentity implements IdentitySource {
  snapshot: IdentitySnapshot | undefined;
  readonly listeners = new Set<(snapshot: IdentitySnapshot) => void>();

  current(): IdentitySnapshot {
    if (!this.snapshot) throw new Error("no identity yet");
    return this.snapshot;
  }

  onChange(listener: (snapshot: IdentitySnapshot) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(name: string): void {
    this.snapshot = {
      certificate: {
        certChainPem: `chain ${name}`,
        privateKeyPem: `key ${name}`,
        spiffeId: "spiffe://cluster.local/ns/default/sa/web",
        notBefore: new Date(),
        notAfter: new Date(),
      },
      rootsPem: [`root-a ${name}\n`, `root-b ${name}\n`],
    };
    for (const listener of this.listeners) listener(this.snapshot);
  }
}

describe("identityCertificateProvider", () => {
  test("gives new listeners the current material on the next tick, then every change; stops following when unused", async () => {
    const identity = new FakeIdentity();
    identity.set("1");
    const provider = identityCertificateProvider(identity);
    const cas: string[] = [];
    const identities: string[] = [];
    const onCa: experimental.CaCertificateUpdateListener = (update) =>
      cas.push(update?.caCertificate.toString() ?? "null");
    const onIdentity: experimental.IdentityCertificateUpdateListener = (update) =>
      identities.push(`${update?.certificate.toString()} / ${update?.privateKey.toString()}`);
    provider.addCaCertificateListener(onCa);
    provider.addIdentityCertificateListener(onIdentity);
    assert.deepEqual(cas, [], "not synchronously: grpc-js would miss it");
    await eventually(() => cas.length === 1 && identities.length === 1);
    assert.deepEqual(cas, ["root-a 1\nroot-b 1\n"]);
    assert.deepEqual(identities, ["chain 1 / key 1"]);

    identity.set("2");
    assert.deepEqual(cas, ["root-a 1\nroot-b 1\n", "root-a 2\nroot-b 2\n"]);
    assert.deepEqual(identities, ["chain 1 / key 1", "chain 2 / key 2"]);

    provider.removeCaCertificateListener(onCa);
    provider.removeIdentityCertificateListener(onIdentity);
    assert.equal(identity.listeners.size, 0);
  });

  test("a listener added before the first snapshot gets it when it comes", async () => {
    const identity = new FakeIdentity();
    const provider = identityCertificateProvider(identity);
    const identities: string[] = [];
    provider.addIdentityCertificateListener((update) =>
      identities.push(update?.certificate.toString() ?? "null"),
    );
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(identities, []);
    identity.set("first");
    assert.deepEqual(identities, ["chain first"]);
  });
});
