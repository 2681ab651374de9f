// Ingest as its own process against a real nats-server, for the benchmarks.
import { type NatsServerFixture, startNatsServer, startServiceProcess } from "@sextant/testing";

/** A running ingest process and its nats-server. */
export interface IngestProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts a nats-server and ingest (API_AUTH=none) on a free port; resolves once /ready answers. */
export async function startIngestProcess(env: Record<string, string> = {}): Promise<IngestProcess> {
  const nats: NatsServerFixture = await startNatsServer();
  try {
    const ingest = await startServiceProcess("ingest", {
      NATS_URL: nats.url,
      LOG_LEVEL: "warn",
      // The benchmarks measure applies, not authentication.
      API_AUTH: "none",
      ...env,
    });
    return {
      url: `http://127.0.0.1:${ingest.httpPort}`,
      pid: ingest.child.pid ?? 0,
      stop: async () => {
        await ingest.stop();
        await nats.dispose();
      },
    };
  } catch (error) {
    await nats.dispose();
    throw error;
  }
}
