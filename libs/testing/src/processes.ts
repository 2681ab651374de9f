import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { onCleanup, trackChildProcess } from "./cleanup.js";
import { freePort } from "./ports.js";
import { repositoryRoot } from "./samples.js";
import { eventually } from "./wait.js";

/** A Sextant service running as its own process, from its sources. */
export interface ServiceProcess {
  readonly name: string;
  readonly httpPort: number;
  readonly child: ChildProcess;
  /** Everything it printed, for failure messages. */
  output(): string;
  /** SIGTERM, and the exit code. */
  stop(): Promise<number | null>;
  /** Sends signal (SIGKILL for a crash) and waits for the exit. */
  kill(signal: NodeJS.Signals): Promise<void>;
}

/**
 * Collects everything a child prints on stdout and stderr; the function
 * returns it so far. The child is also tracked: it cannot outlive the test
 * process (see cleanup.ts).
 */
export function captureOutput(child: ChildProcess): () => string {
  trackChildProcess(child);
  let output = "";
  const append = (chunk: Buffer | string) => {
    output += chunk;
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);
  return () => output;
}

/**
 * Starts services/<name>/src/main.ts with tsx and waits until its /ready
 * answers 200. HTTP_PORT in env keeps a port across a restart; by default a free one.
 */
export async function startServiceProcess(
  name: string,
  env: Record<string, string>,
): Promise<ServiceProcess> {
  const httpPort = env.HTTP_PORT ? Number(env.HTTP_PORT) : await freePort();
  const main = join(repositoryRoot(), "services", name, "src", "main.ts");
  const child = spawn(process.execPath, ["--conditions=@sextant/source", "--import", "tsx", main], {
    env: {
      ...process.env,
      OTEL_SDK_DISABLED: "true",
      LOG_LEVEL: "info",
      ...env,
      HTTP_PORT: String(httpPort),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = captureOutput(child);
  const stopProcess = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    // Longer than the services' own 10 s stop deadline, so theirs reports first.
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
  const unregister = onCleanup(`${name} process`, () => stopProcess());
  const stop = async () => {
    unregister();
    return stopProcess();
  };
  // A process that dies before it is ready fails at once, with its output.
  const died = new Promise<never>((_, reject) =>
    child.once("exit", (code, signal) =>
      reject(new Error(`${name} exited with ${code ?? signal} before it was ready:\n${output()}`)),
    ),
  );
  died.catch(() => {});
  const gaveUp = new AbortController();
  try {
    await Promise.race([
      eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/ready`)).ok, {
        timeoutMs: 30_000,
        message: `${name} did not become ready`,
        signal: gaveUp.signal,
      }),
      died,
    ]);
  } catch (error) {
    gaveUp.abort();
    await stop();
    throw new Error(`${(error as Error).message}\n${output()}`);
  }
  const kill = async (signal: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill(signal);
    await exited;
  };
  return { name, httpPort, child, output, stop, kill };
}
