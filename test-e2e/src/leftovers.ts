// What the local runners (scripts/demo.mjs, scripts/dev.mjs) must leave
// behind when they stop: no process, and free ports. Shared by demo.test.ts
// and dev.test.ts, which run those scripts on the fixed local ports.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_PORTS } from "@sextant/runtime";
import { captureOutput, eventually, repositoryRoot } from "@sextant/testing";

const root = repositoryRoot();

/** The processes whose command line names this checkout's runner parts: services, agents, workloads, its nats-server. */
export function leftovers(): string[] {
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

/** The fixed ports every control-plane process of the runners listens on. */
export const CONTROL_PLANE_PORTS = [
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

/** Whether nothing listens on port (on every interface). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "0.0.0.0", () => probe.close(() => resolve(true)));
  });
}

/** Runs one of scripts/*.mjs from the repository's root, its stdout and stderr collected in `output()`. */
export function startScript(
  script: string,
  args: string[],
  env: Record<string, string>,
): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [join(root, "scripts", script), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  return { child, output: captureOutput(child) };
}

/** The exit code of child, once it has exited. */
export const exitOf = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });

/** Fails unless every process a runner started is gone and the control-plane ports are free. */
export async function assertNothingLeft(output: () => string): Promise<void> {
  // Children are reaped before the runner exits; give the kernel a moment to release sockets.
  await eventually(async () => leftovers().length === 0, {
    timeoutMs: 10_000,
    message: `processes left behind:\n${leftovers().join("\n")}\n${output()}`,
  });
  for (const port of CONTROL_PLANE_PORTS)
    assert.ok(await portIsFree(port), `port ${port} is still in use after the runner stopped`);
}

/**
 * Holds this checkout's fixed local ports for the test files that use them
 * (node's runner may run test files in parallel): resolves once no other
 * holder is alive, to a function that releases them.
 */
export async function holdFixedPorts(): Promise<() => void> {
  const lock = join(tmpdir(), `sextant-fixed-ports-${Buffer.from(root).toString("base64url")}`);
  await eventually(
    () => {
      try {
        mkdirSync(lock);
      } catch {
        let holder = 0;
        try {
          holder = Number(readFileSync(join(lock, "pid"), "utf8"));
        } catch {}
        if (holder && !isAlive(holder)) rmSync(lock, { recursive: true, force: true });
        return false;
      }
      writeFileSync(join(lock, "pid"), String(process.pid));
      return true;
    },
    { timeoutMs: 600_000, intervalMs: 250, message: `another test holds the local ports (${lock})` },
  );
  return () => rmSync(lock, { recursive: true, force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
