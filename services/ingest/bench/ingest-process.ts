// Ingest as its own process against a real nats-server, for the benchmarks.
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { eventually, type NatsServerFixture, startNatsServer } from "@sextant/testing";

/** A running ingest process and its nats-server. */
export interface IngestProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts a nats-server and ingest (API_AUTH=none) on a random port; resolves once /ready answers. */
export async function startIngestProcess(env: Record<string, string> = {}): Promise<IngestProcess> {
  const nats: NatsServerFixture = await startNatsServer();
  const port = 18_000 + Math.floor(Math.random() * 1_000);
  const url = `http://127.0.0.1:${port}`;
  const main = fileURLToPath(new URL("../src/main.ts", import.meta.url));
  const ingest: ChildProcess = spawn(
    process.execPath,
    ["--conditions=@sextant/source", "--import", "tsx", main],
    {
      env: {
        ...process.env,
        NATS_URL: nats.url,
        HTTP_PORT: String(port),
        LOG_LEVEL: "warn",
        OTEL_SDK_DISABLED: "true",
        // The benchmarks measure applies, not authentication.
        API_AUTH: "none",
        ...env,
      },
      stdio: "inherit",
    },
  );
  const stop = async () => {
    if (ingest.exitCode === null) {
      ingest.kill("SIGTERM");
      await new Promise((resolve) => ingest.once("exit", resolve));
    }
    await nats.dispose();
  };
  try {
    await eventually(async () => (await fetch(`${url}/ready`)).ok, { timeoutMs: 30_000 });
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, pid: ingest.pid ?? 0, stop };
}
