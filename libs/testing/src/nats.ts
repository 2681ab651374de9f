import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onCleanup, trackChildProcess } from "./cleanup.js";

/** A nats-server started for a test, with its own JetStream store. */
export interface NatsServerFixture {
  /** nats://127.0.0.1:<port> */
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period). */
  stop(): Promise<void>;
  /** Stops it and starts it again on the same port and store. */
  restart(): Promise<void>;
  /** Starts it again after stop(), on the same port and store. */
  start(): Promise<void>;
  /** Stops it for good and removes the store. */
  dispose(): Promise<void>;
}

const READY_TIMEOUT_MS = 15_000;

/** Fails with a message that says how to install nats-server, rather than a bare ENOENT. */
export function assertNatsServerInstalled(): void {
  const probe = spawnSync("nats-server", ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      "nats-server is not installed: `apt-get install -y nats-server` (npm test installs it when root)",
    );
  }
}

/** Options of {@link startNatsServer}. */
export interface NatsServerOptions {
  /**
   * Extra configuration (nats-server's config syntax), such as an
   * `authorization` block with users and permissions. It is written to a
   * file in the store directory and loaded with `-c`; the command line still
   * sets the address, the port and JetStream's store, so it cannot move them.
   */
  config?: string;
  /** Extra environment for the server process: the `$VARIABLES` the config refers to. */
  env?: Record<string, string>;
}

/**
 * Starts a real nats-server with JetStream on a random port (the server picks
 * it: no race with other tests), storing in a fresh temporary directory.
 */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerFixture> {
  assertNatsServerInstalled();
  const storeDir = mkdtempSync(join(tmpdir(), "sextant-nats-"));
  let configFile: string | undefined;
  if (options.config !== undefined) {
    configFile = join(storeDir, "nats-server.conf");
    writeFileSync(configFile, options.config);
  }
  let port = -1;
  let child: ChildProcess | undefined;

  const start = async () => {
    const launched = await launch(port, storeDir, configFile, options.env);
    child = launched.child;
    port = launched.port;
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGTERM");
    const timer = setTimeout(() => running.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  // Stopped and removed even when the suite that started it never reaches its own cleanup.
  const unregister = onCleanup(`nats-server ${storeDir}`, () => dispose());
  const dispose = async () => {
    unregister();
    await stop();
    rmSync(storeDir, { recursive: true, force: true });
  };
  return {
    get url() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    storeDir,
    stop,
    start,
    restart: async () => {
      await stop();
      await start();
    },
    dispose,
  };
}

async function launch(
  port: number,
  storeDir: string,
  configFile: string | undefined,
  env: Record<string, string> | undefined,
): Promise<{ child: ChildProcess; port: number }> {
  const args = [
    ...(configFile ? ["-c", configFile] : []),
    "-js",
    "-a",
    "127.0.0.1",
    "-p",
    String(port),
    "-sd",
    storeDir,
  ];
  const child = spawn("nats-server", args, {
    stdio: ["ignore", "ignore", "pipe"],
    ...(env ? { env: { ...process.env, ...env } } : {}),
  });
  trackChildProcess(child);
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`nats-server did not become ready within ${READY_TIMEOUT_MS} ms:\n${log}`));
    }, READY_TIMEOUT_MS);
    let listening = port;
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      log += chunk;
      const match = /Listening for client connections on [^\s]+:(\d+)/.exec(log);
      if (match) listening = Number(match[1]);
      if (/Server is ready/.test(log) && listening > 0) {
        clearTimeout(timer);
        child.stderr?.removeAllListeners("data");
        child.stderr?.resume();
        resolve({ child, port: listening });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited with ${code} before it was ready:\n${log}`));
    });
  });
}
