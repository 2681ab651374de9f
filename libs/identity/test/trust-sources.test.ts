import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Buckets, type Bus, encodeKey } from "@sextant/bus";
import type { TrustBundle } from "@sextant/proto";
import { eventually } from "@sextant/testing";
import {
  busTrustBundleSource,
  caTrustBundleSource,
  type IdentitySnapshot,
  type TrustBundleSource,
} from "../src/index.js";
import { type CaFixture, selfSignedRoot, startCa, testLogger, workloadIdentity } from "./helpers.js";

const TOKEN = "trust-bootstrap-token-0123456789";

let fixture: CaFixture;
let bus: Bus;
const closers: Array<{ close(): unknown }> = [];

const same = (a: string | undefined, b: string | undefined) => a?.trim() === b?.trim();

/** Puts a bundle for cluster.local in sextant-trust: `active` first, then the CA's root, inactive. */
async function publishBundle(active: string): Promise<void> {
  const bucket = await bus.bucket(Buckets.trust);
  const bundle: TrustBundle = {
    trustDomain: "cluster.local",
    anchors: [
      { certificatePem: active, notAfter: new Date(Date.now() + 86_400_000), active: true },
      { certificatePem: fixture.rootPem, notAfter: new Date(Date.now() + 86_400_000), active: false },
    ],
  };
  await bucket.put(encodeKey("cluster.local"), bundle);
}

/** Starts a source, recording every bundle it hands on. */
async function follow(source: TrustBundleSource): Promise<string[][]> {
  closers.push(source);
  const bundles: string[][] = [];
  await source.start((rootsPem) => bundles.push(rootsPem));
  return bundles;
}

before(async () => {
  fixture = await startCa({ [TOKEN]: { namespace: "local", serviceAccount: "trusting" } });
  bus = await fixture.bus();
});

after(async () => {
  for (const closer of closers) await closer.close();
  await fixture?.dispose();
});

describe("trust bundle sources", () => {
  for (const [name, make] of [
    [
      "caTrustBundleSource (WatchTrustBundle)",
      () =>
        caTrustBundleSource({ caAddress: fixture.address, caRootPem: fixture.rootPem, logger: testLogger }),
    ],
    [
      "busTrustBundleSource (sextant-trust)",
      () => busTrustBundleSource({ bus: () => bus, trustDomain: "cluster.local", logger: testLogger }),
    ],
  ] as const) {
    test(`${name}: starts with the CA's root, then follows a change of the bucket`, async () => {
      const bundles = await follow(make());
      assert.equal(bundles.length, 1, "start() resolved after the first bundle");
      const first = await eventually(() => bundles[0]);
      assert.ok(first.some((pem) => same(pem, fixture.rootPem)));

      const newRoot = await selfSignedRoot(name);
      await publishBundle(newRoot);
      const changed = await eventually(
        () => bundles.find((roots) => roots.some((pem) => same(pem, newRoot))),
        {
          message: "the new root did not arrive",
        },
      );
      assert.equal(changed.length, 2);
      assert.ok(same(changed[0], newRoot), "the active root first");
      assert.ok(same(changed[1], fixture.rootPem));
    });
  }

  test("busTrustBundleSource: close() before any bundle makes start() reject, saying so", async () => {
    const source = busTrustBundleSource({
      bus: () => bus,
      trustDomain: "nowhere.example",
      logger: testLogger,
    });
    const started = source.start(() => {});
    source.close();
    await assert.rejects(started, /closed before a bundle for nowhere.example arrived/);
  });

  test("a trust bundle change gives a WorkloadIdentity a new snapshot with the new roots", async () => {
    const identity = workloadIdentity(fixture, { serviceAccount: "trusting", token: async () => TOKEN });
    closers.push(identity);
    const snapshots: IdentitySnapshot[] = [];
    identity.onChange((snapshot) => snapshots.push(snapshot));
    await identity.start();
    const before = identity.current();

    const newRoot = await selfSignedRoot("for-the-identity");
    await publishBundle(newRoot);
    const changed = await eventually(
      () => snapshots.find((snapshot) => snapshot.rootsPem.some((pem) => same(pem, newRoot))),
      { message: "no snapshot with the new root" },
    );
    assert.equal(changed.certificate, before.certificate, "same certificate, new roots");
    assert.ok(same(changed.rootsPem[0], newRoot));
    assert.ok(changed.rootsPem.some((pem) => same(pem, fixture.rootPem)));
    assert.equal(identity.current(), changed);
  });
});
