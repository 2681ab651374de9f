import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { connectBus } from "@sextant/bus";
import { caContract } from "@sextant/ca/contract";
import { discoveryContract } from "@sextant/discovery/contract";
import { ingestContract } from "@sextant/ingest/contract";
import { createLogger } from "@sextant/observability";
import { pushContract } from "@sextant/push/contract";
import {
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";

/** Each service and the buckets it creates because its contract says it writes them. */
const writes = (contract: { buckets?: { write?: ReadonlyArray<{ name: string }> } }) =>
  (contract.buckets?.write ?? []).map((bucket) => bucket.name);
const services: Array<[string, string[]]> = [
  ["ingest", writes(ingestContract)],
  ["discovery", writes(discoveryContract)],
  ["push", writes(pushContract)],
  ["ca", writes(caContract)],
  ["webhook", []],
  // The agent is not here: it uses no NATS and needs ca and push to be ready
  // (its own tests and security.test.ts run it as a process).
];

describe("every service as a process", () => {
  let nats: NatsServerFixture;
  const started: ServiceProcess[] = [];

  // The CA writes its root to disk; keep it out of the working tree.
  const store = mkdtempSync(join(tmpdir(), "sextant-e2e-"));

  before(async () => {
    nats = await startNatsServer();
  });
  after(async () => {
    for (const service of started) await service.stop();
    await nats?.dispose();
    rmSync(store, { recursive: true, force: true });
  });

  for (const [name, buckets] of services) {
    it(`${name} starts, reports ready, serves metrics, owns its buckets and stops cleanly on SIGTERM`, async () => {
      const service = await startServiceProcess(name, {
        NATS_URL: nats.url,
        CA_CERTS_DIR: join(store, "cacerts"),
        // push alone: its mTLS port needs a certificate from ca (test/security.test.ts covers it).
        XDS_TLS_ENABLED: "false",
        // Ingest starts only with its API's authentication configured, or explicitly off as here.
        API_AUTH: "none",
      });
      started.push(service);
      const metrics = await (await fetch(`http://127.0.0.1:${service.httpPort}/metrics`)).text();
      assert.match(metrics, new RegExp(`process_cpu_user_seconds_total\\{service="${name}"\\}`));

      const bus = await connectBus({
        url: nats.url,
        name: "e2e",
        logger: createLogger({ service: "e2e", level: "silent" }),
      });
      try {
        const jsm = await jetstreamManager(bus.nc);
        const streams: string[] = [];
        for await (const stream of jsm.streams.list()) streams.push(stream.config.name);
        for (const bucket of buckets)
          assert.ok(streams.includes(`KV_${bucket}`), `${name} did not create ${bucket}`);
      } finally {
        await bus.close();
      }
      assert.equal(await service.stop(), 0, service.output());
    });
  }

  it("a service with a bad setting exits with status 2 and names the variable", async () => {
    await assert.rejects(
      startServiceProcess("push", { NATS_URL: nats.url, LOG_LEVEL: "chatty" }),
      /exited with 2[\s\S]*LOG_LEVEL: .*\(got "chatty"\)/,
    );
  });
});
