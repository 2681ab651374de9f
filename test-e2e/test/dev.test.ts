// `pnpm dev` (scripts/dev.mjs, not on a terminal): it starts nats-server and
// the five services on the fixed local ports, each once the previous one is
// ready, writes their logs to .sextant/logs/, and Ctrl-C leaves nothing
// behind; a port already in use stops it at start with a message naming the
// port and the service.
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DEFAULT_PORTS } from "@sextant/runtime";
import { eventually, repositoryRoot } from "@sextant/testing";
import { assertNothingLeft, exitOf, holdFixedPorts, leftovers, startScript } from "../src/leftovers.js";

const root = repositoryRoot();
const SERVICES = {
  ingest: DEFAULT_PORTS.ingest.http,
  discovery: DEFAULT_PORTS.discovery.http,
  ca: DEFAULT_PORTS.ca.http,
  push: DEFAULT_PORTS.push.http,
  webhook: DEFAULT_PORTS.webhook.http,
};

const startDev = () => startScript("dev.mjs", [], { CI: "true" });

async function ready(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/ready`, { signal: AbortSignal.timeout(2_000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

describe("pnpm dev", { concurrency: false }, () => {
  let release = () => {};
  before(async () => {
    release = await holdFixedPorts();
  });
  after(() => release());

  it("starts every service, logs to .sextant/logs, and Ctrl-C stops everything", async () => {
    assert.deepEqual(leftovers(), [], "a demo or dev runner is already running here");
    const startedAt = Date.now();
    const dev = startDev();
    await eventually(() => dev.output().includes("every process is ready") || dev.child.exitCode !== null, {
      timeoutMs: 90_000,
      message: "dev never reported every process ready",
    });
    assert.equal(dev.child.exitCode, null, dev.output());
    // One line per change: each process started, then ready, in dependency order.
    const lines = dev.output().split("\n");
    const readyAt = (name: string) =>
      lines.findIndex((line) => line.startsWith(`${name} `) && / ready/.test(line));
    const order = ["nats", ...Object.keys(SERVICES)].map(readyAt);
    assert.ok(
      order.every((index, i) => index >= 0 && (i === 0 || index > order[i - 1]!)),
      dev.output(),
    );
    for (const [name, port] of Object.entries(SERVICES))
      assert.ok(await ready(port), `${name} does not answer /ready on ${port}\n${dev.output()}`);
    for (const name of ["nats", ...Object.keys(SERVICES)]) {
      const log = join(root, ".sextant", "logs", `${name}.log`);
      assert.ok(existsSync(log), `${log} is missing`);
      assert.ok(statSync(log).mtimeMs >= startedAt - 1_000, `${log} was not written by this run`);
    }
    assert.ok(leftovers().length >= 6, `dev's processes are not visible:\n${leftovers().join("\n")}`);

    dev.child.kill("SIGINT");
    assert.equal(await exitOf(dev.child), 0, dev.output());
    await assertNothingLeft(dev.output);
    assert.match(dev.output(), /stopped: every process exited/);
  });

  it("fails at start, naming the port and the service, when a port is taken", async () => {
    const port = DEFAULT_PORTS.ingest.http;
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(port, "0.0.0.0", resolve));
    try {
      const dev = startDev();
      const code = await exitOf(dev.child);
      assert.notEqual(code, 0, dev.output());
      assert.match(dev.output(), new RegExp(`port ${port} \\(ingest\\) is already in use`));
      await eventually(() => leftovers().length === 0, {
        timeoutMs: 10_000,
        message: `processes left behind:\n${leftovers().join("\n")}`,
      });
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });
});
