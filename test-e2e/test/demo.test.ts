// `npm run demo` leaves nothing behind: after --once, and after Ctrl-C in
// the middle of a run, no process it started is left and its ports are free.
// It runs the built demo (scripts/demo.mjs over dist/), as a user does after
// the bootstrap step, on the demo's fixed local ports.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_PORTS } from "@sextant/runtime";
import { eventually, repositoryRoot } from "@sextant/testing";

const root = repositoryRoot();

/** The processes whose command line names this checkout's demo parts: services, agents, workloads, its nats-server. */
function leftovers(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))) {
    let command: string;
    try {
      command = readFileSync(join("/proc", pid, "cmdline"), "utf8").replaceAll("\0", " ");
    } catch {
      continue; // exited while we looked
    }
    const ours =
      (command.includes(join(root, "services")) && command.includes("dist/main.js")) ||
      command.includes(join(root, "libs", "bookinfo", "dist")) ||
      (command.includes("nats-server") && command.includes(join(root, ".sextant")));
    if (ours) found.push(`${pid}: ${command.trim()}`);
  }
  return found;
}

/** The fixed ports every control-plane process of the demo listens on. */
const CONTROL_PLANE_PORTS = [
  DEFAULT_PORTS.nats,
  DEFAULT_PORTS.ingest.http,
  DEFAULT_PORTS.discovery.http,
  DEFAULT_PORTS.push.xds,
  DEFAULT_PORTS.push.xdsTls,
  DEFAULT_PORTS.push.http,
  DEFAULT_PORTS.ca.grpc,
  DEFAULT_PORTS.ca.http,
  DEFAULT_PORTS.webhook.http,
];

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "0.0.0.0", () => probe.close(() => resolve(true)));
  });
}

function startDemo(
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [join(root, "scripts", "demo.mjs"), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    output += chunk;
  });
  return { child, output: () => output };
}

const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });

async function assertNothingLeft(output: () => string): Promise<void> {
  // Children are reaped before the demo exits; give the kernel a moment to release sockets.
  await eventually(async () => leftovers().length === 0, {
    timeoutMs: 10_000,
    message: `processes left behind:\n${leftovers().join("\n")}\n${output()}`,
  });
  for (const port of CONTROL_PLANE_PORTS)
    assert.ok(await portIsFree(port), `port ${port} is still in use after the demo stopped`);
}

describe("npm run demo leaves nothing behind", { concurrency: false }, () => {
  it("--once: exits 0, then no process it started is left and its ports are free", async () => {
    assert.deepEqual(leftovers(), [], "a demo is already running here");
    const demo = startDemo(["--once"], { CI: "true" });
    const code = await exitOf(demo.child);
    assert.equal(code, 0, demo.output());
    await assertNothingLeft(demo.output);
  });

  it("Ctrl-C during a run stops every process it started", async () => {
    // Without --once and without a terminal the demo runs every step, then keeps the mesh up until Ctrl-C.
    const demo = startDemo([], { CI: "false" });
    await eventually(() => demo.output().includes("Press Ctrl-C") || demo.child.exitCode !== null, {
      timeoutMs: 120_000,
      message: "the demo never reached its running state",
    });
    assert.equal(demo.child.exitCode, null, demo.output());
    assert.ok(
      leftovers().length > 0,
      "the running demo shows no processes: the leftover check would see nothing",
    );
    demo.child.kill("SIGINT");
    assert.equal(await exitOf(demo.child), 0, demo.output());
    await assertNothingLeft(demo.output);
  });
});
