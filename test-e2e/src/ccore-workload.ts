// Mesh workloads on gRPC C-core: test-e2e/python/mesh_workload.py run by
// Debian's python3-grpcio (C-core 1.51), beside the grpc-js-xds ones of
// secure-mesh.ts, with the same control protocol (workload-control.ts).
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { captureOutput, freePort, onCleanup, repositoryRoot } from "@sextant/testing";
import type { Workload, WorkloadOptions } from "./secure-mesh.js";
import { awaitWorkload } from "./workload-control.js";

/** The system Python, where apt-get puts python3-grpcio (a pyenv or venv `python3` on PATH would not see it). */
export const SYSTEM_PYTHON = "/usr/bin/python3";

/**
 * The grpcio version the system Python imports. Throws, saying how to
 * install it, when it has none: a missing client must fail the suite, not
 * skip it (as a missing nats-server does; `npm test` installs both when root).
 */
export function assertGrpcioInstalled(): string {
  const probe = spawnSync(SYSTEM_PYTHON, ["-c", "import grpc; print(grpc.__version__)"], {
    encoding: "utf8",
  });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      `gRPC C-core for Python is not installed (${SYSTEM_PYTHON} cannot import grpc): ` +
        "`apt-get install -y python3-grpcio` (npm test installs it when root)",
    );
  }
  return probe.stdout.trim();
}

/**
 * A port for a C-core xDS server on ip, below Linux's ephemeral range
 * (32768-60999). Such a server binds only once push sent its listener, long
 * after the port was chosen, and C-core 1.51 aborts the process when that
 * bind fails; a port the OS hands out (freePort) could meanwhile go to any
 * process of a suite running beside this one, one outside the range only to
 * another test that picked it the same way.
 */
export async function serverPort(ip: string): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.once("error", () => resolve(false));
      probe.listen(port, ip, () => probe.close(() => resolve(true)));
    });
    if (free) return port;
  }
  throw new Error(`no free port below the ephemeral range on ${ip}`);
}

/** Extra settings of a C-core workload. */
export interface CcoreWorkloadOptions extends WorkloadOptions {
  /** server: fail the first N-1 of every N calls with UNAVAILABLE (retries make them succeed). */
  failFirstOf?: number;
}

/**
 * Starts mesh_workload.py for a workload whose agent is running. A server
 * prints `started` at once but serves only once push sent its inbound
 * listener: callers wait for answers, not for the start.
 */
export async function startCcoreWorkload(options: CcoreWorkloadOptions): Promise<Workload> {
  const controlPort = options.role === "client" ? await freePort() : 0;
  const script = join(repositoryRoot(), "test-e2e", "python", "mesh_workload.py");
  const child = spawn(SYSTEM_PYTHON, ["-u", script], {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      WORKLOAD_ROLE: options.role,
      WORKLOAD_NAME: options.name,
      WORKLOAD_ADDRESS: options.address ?? "",
      CONTROL_PORT: String(controlPort),
      FAIL_FIRST_OF: String(options.failFirstOf ?? 0),
      GRPC_XDS_BOOTSTRAP: options.agent.grpcBootstrap,
      // C-core 1.51 applies the RBAC filter of a server's listener only when asked to (as grpc-js-xds).
      GRPC_XDS_EXPERIMENTAL_RBAC: "true",
      GRPC_VERBOSITY: process.env.GRPC_VERBOSITY ?? "ERROR",
      ...(process.env.GRPC_TRACE ? { GRPC_TRACE: process.env.GRPC_TRACE } : {}),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const captured = captureOutput(child);
  let exit = "";
  child.once("exit", (code, signal) => {
    exit = `\n[${options.name} exited: ${signal ?? code}]`;
  });
  const output = () => captured() + exit;
  const stopChild = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };
  const unregister = onCleanup(`${options.name} (C-core)`, stopChild);
  const control = await awaitWorkload(child, {
    name: options.name,
    ready: options.role === "server" ? '"started": true' : '"control"',
    output,
    controlPort,
  });
  return {
    ...control,
    child,
    controlPort,
    output,
    stop: async () => {
      unregister();
      await stopChild();
    },
  };
}
