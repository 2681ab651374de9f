// The Envoy runner in-process, with the test double for Envoy: what it is
// started with, its restart after a crash, and its stop, whose order of
// events the double records.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, symlinkSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, describe, test } from "node:test";
import { createLogger } from "@sextant/observability";
import { eventually, freePort } from "@sextant/testing";
import { EnvoyAdmin } from "../src/envoy/admin.js";
import { envoyRunner } from "../src/envoy/envoy-runner.js";
import { testLogger } from "./helpers/logger.js";

const FAKE_ENVOY = join(import.meta.dirname, "helpers", "fake-envoy.mjs");

interface Event {
  event: string;
  pid: number;
  argv?: string[];
  method?: string;
  url?: string;
  code?: number;
}

function events(file: string): Event[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Event);
}

/** A minimal bootstrap with what the double reads: the admin address and the xDS socket. */
function bootstrap(adminPort: number, work: string): string {
  return JSON.stringify({
    node: { id: "router~127.0.0.1~gw-0.shop~shop.svc.cluster.local" },
    admin: { address: { socket_address: { address: "127.0.0.1", port_value: adminPort } } },
    static_resources: {
      clusters: [
        {
          name: "xds-grpc",
          load_assignment: {
            endpoints: [{ lb_endpoints: [{ endpoint: { address: { pipe: { path: join(work, "XDS") } } } }] }],
          },
        },
      ],
    },
  });
}

describe("the Envoy runner", () => {
  const work = mkdtempSync(join(tmpdir(), "sextant-envoy-runner-"));
  const log = join(work, "envoy.log");
  process.env.FAKE_ENVOY_LOG = log;
  process.env.FAKE_ENVOY_EXIT_CODE = "3";
  after(() => {
    delete process.env.FAKE_ENVOY_LOG;
    delete process.env.FAKE_ENVOY_EXIT_CODE;
  });

  test("writes the bootstrap, restarts Envoy after a crash, and on stop drains all listeners of a router before SIGTERM", async () => {
    const adminPort = await freePort();
    const bootstrapPath = join(work, "proxy", "envoy-rev.json");
    const runner = envoyRunner({
      binary: FAKE_ENVOY,
      args: ["-c", bootstrapPath, "--disable-hot-restart"],
      bootstrapPath,
      bootstrapText: bootstrap(adminPort, work),
      admin: new EnvoyAdmin("127.0.0.1", adminPort),
      inboundOnlyDrain: false,
      terminationDrainMs: 0,
      logger: testLogger,
    });
    await runner.start();
    assert.equal(
      JSON.parse(readFileSync(bootstrapPath, "utf8")).admin.address.socket_address.port_value,
      adminPort,
    );
    const first = await eventually(() => events(log).find((event) => event.event === "start"), {
      message: "Envoy did not start",
    });
    assert.deepEqual(first.argv, ["-c", bootstrapPath, "--disable-hot-restart"]);

    process.kill(first.pid, "SIGKILL");
    const second = await eventually(
      () => events(log).find((event) => event.event === "start" && event.pid !== first.pid),
      { message: "Envoy was not restarted", timeoutMs: 20_000 },
    );
    // The admin API of the new Envoy answers before the stop, so the drain reaches it.
    await eventually(
      async () => (await fetch(`http://127.0.0.1:${adminPort}/ready`).catch(() => undefined)) !== undefined,
    );

    await runner.close();
    const afterRestart = events(log)
      .filter((event) => event.pid === second.pid && event.url !== "/ready")
      .map((event) => (event.event === "request" ? `${event.method} ${event.url}` : event.event));
    assert.deepEqual(afterRestart, ["start", "POST /drain_listeners?graceful", "signal", "exit"]);
    assert.equal(runner.exitCode(), 3, "Envoy's exit status is the runner's");
  });

  test("keeps trying to restart Envoy while its binary cannot be run", async () => {
    const adminPort = await freePort();
    // A link to the double, removed while Envoy is down and put back later.
    const binary = join(work, "envoy");
    symlinkSync(FAKE_ENVOY, binary);
    const bootstrapPath = join(work, "retry", "envoy-rev.json");
    let failedRestarts = 0;
    const lines = new Writable({
      write(chunk, _encoding, done) {
        if (String(chunk).includes("Envoy restart failed")) failedRestarts++;
        done();
      },
    });
    const runner = envoyRunner({
      binary,
      args: ["-c", bootstrapPath],
      bootstrapPath,
      bootstrapText: bootstrap(adminPort, work),
      admin: new EnvoyAdmin("127.0.0.1", adminPort),
      inboundOnlyDrain: true,
      terminationDrainMs: 0,
      logger: createLogger({ service: "agent-test", level: "error", destination: lines }),
    });
    const starts = () =>
      events(log).filter((event) => event.event === "start" && event.argv?.[1] === bootstrapPath);
    await runner.start();
    const first = await eventually(() => starts()[0], { message: "Envoy did not start" });
    unlinkSync(binary);
    process.kill(first.pid, "SIGKILL");
    await eventually(() => failedRestarts >= 1, { message: "no restart was tried", timeoutMs: 20_000 });
    symlinkSync(FAKE_ENVOY, binary);
    await eventually(() => starts().length === 2, {
      message: "Envoy was not started again",
      timeoutMs: 20_000,
    });
    await runner.close();
  });

  test("fails to start, naming the binary, when Envoy cannot be run", async () => {
    const runner = envoyRunner({
      binary: join(work, "no-such-envoy"),
      args: [],
      bootstrapPath: join(work, "unused.json"),
      bootstrapText: "{}",
      admin: new EnvoyAdmin("127.0.0.1", await freePort()),
      inboundOnlyDrain: true,
      terminationDrainMs: 0,
      logger: testLogger,
    });
    await assert.rejects(runner.start(), /cannot start Envoy \(.*no-such-envoy\): spawn .* ENOENT/);
  });
});
