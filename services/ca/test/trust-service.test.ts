import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type ClientReadableStream, credentials, type StatusObject } from "@grpc/grpc-js";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { type TrustBundle, TrustBundleServiceClient } from "@sextant/proto";
import { type StartedService, startService } from "@sextant/runtime";
import { eventually, freePort, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { caService } from "../src/main.js";
import { loadOrCreateCaMaterial } from "../src/pki/ca-material.js";
import type { CaSettings } from "../src/settings.js";
import { trustBundleKey } from "../src/trust/trust-bundle.js";

let nats: NatsServerFixture;
let ca: StartedService<CaSettings> | undefined;
let bus: Bus;
let address: string;
let rootPem: string;

/** A WatchTrustBundle call that records what it receives and how it ended. */
function watchBundle(): {
  received: TrustBundle[];
  ended: () => StatusObject | undefined;
  stream: ClientReadableStream<TrustBundle>;
  client: TrustBundleServiceClient;
} {
  // No client certificate, no token: the bundle is public.
  const client = new TrustBundleServiceClient(address, credentials.createSsl(Buffer.from(rootPem)));
  const stream = client.watchTrustBundle({});
  const received: TrustBundle[] = [];
  let end: StatusObject | undefined;
  stream.on("data", (bundle: TrustBundle) => received.push(bundle));
  stream.on("error", () => {});
  stream.on("status", (status: StatusObject) => {
    end = status;
  });
  return { received, ended: () => end, stream, client };
}

before(async () => {
  nats = await startNatsServer();
  const work = mkdtempSync(join(tmpdir(), "sextant-ca-trust-service-"));
  const port = await freePort();
  address = `localhost:${port}`;
  ca = await startService(caService, {
    NATS_URL: nats.url,
    HTTP_PORT: "0",
    GRPC_PORT: String(port),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    CA_CERTS_DIR: join(work, "cacerts"),
    CA_AUTHENTICATORS: "mesh-certificate",
  });
  rootPem = readFileSync(join(work, "cacerts", "root-cert.pem"), "utf8");
  bus = await connectBus({
    url: nats.url,
    name: "ca-trust-service-test",
    logger: createLogger({ service: "test", level: "silent" }),
  });
});

after(async () => {
  await bus?.close();
  await ca?.stop();
  await nats?.dispose();
});

describe("WatchTrustBundle", () => {
  test("sends the current bundle at once to an anonymous caller, then every change", async () => {
    const watch = watchBundle();
    const first = await eventually(() => watch.received[0], { message: "no first bundle" });
    assert.equal(first.trustDomain, "cluster.local");
    assert.deepEqual(
      first.anchors.map((a) => [a.certificatePem, a.active]),
      [[rootPem, true]],
    );

    // Another root enters the bundle (as in a root rotation): the watch sees it.
    const other = loadOrCreateCaMaterial({
      dir: mkdtempSync(join(tmpdir(), "sextant-ca-other-root-")),
      trustDomain: "cluster.local",
      rootTtlSeconds: 86_400,
    }).root.toString();
    const bucket = await bus.bucket(Buckets.trust);
    await bucket.update(trustBundleKey("cluster.local"), (current) => ({
      trustDomain: "cluster.local",
      anchors: [...(current?.anchors ?? []), { certificatePem: other, notAfter: undefined, active: false }],
    }));
    const second = await eventually(() => watch.received[1], { message: "the change did not arrive" });
    assert.deepEqual(
      second.anchors.map((a) => a.certificatePem),
      [rootPem, other],
    );

    // A caller that comes later gets the bundle as it is now, at once.
    const late = watchBundle();
    const current = await eventually(() => late.received[0], { message: "no bundle for the late caller" });
    assert.equal(current.anchors.length, 2);
    assert.equal(watch.received.length, 2, "an unchanged bucket sends nothing more");

    for (const w of [watch, late]) {
      w.stream.cancel();
      w.client.close();
    }
  });

  test("a stopping CA ends the watches", async () => {
    const watch = watchBundle();
    await eventually(() => watch.received[0], { message: "no first bundle" });
    await ca?.stop();
    ca = undefined;
    await eventually(() => watch.ended(), { message: "the watch did not end when the CA stopped" });
    watch.client.close();
  });
});
