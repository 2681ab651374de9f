import { type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { type StartedService, startService } from "@sextant/runtime";
import { type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { ingestService } from "../src/main.js";
import type { IngestSettings } from "../src/settings.js";

/** An ingest service started in-process against a real nats-server. */
export interface IngestFixture {
  readonly url: string;
  readonly service: StartedService<IngestSettings>;
  stop(): Promise<void>;
}

/** Starts ingest on a random HTTP port. */
export async function startIngest(natsUrl: string, env: Record<string, string> = {}): Promise<IngestFixture> {
  const service = await startService(ingestService, {
    NATS_URL: natsUrl,
    HTTP_PORT: "0",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    ANALYSIS_DEBOUNCE_MS: "20",
    // These tests are about config, not who sends it (test/auth.test.ts is).
    API_AUTH: "none",
    ...env,
  });
  return { url: `http://127.0.0.1:${service.httpPort}`, service, stop: () => service.stop() };
}

/** A nats-server and a bus client of the test's own, to look at what ingest stored. */
export async function startNatsWithClient(): Promise<{
  nats: NatsServerFixture;
  bus: Bus;
  close(): Promise<void>;
}> {
  const nats = await startNatsServer();
  const bus = await connectBus({
    url: nats.url,
    name: "ingest-test",
    logger: createLogger({ service: "test", level: "silent" }),
  });
  return {
    nats,
    bus,
    close: async () => {
      await bus.close();
      await nats.dispose();
    },
  };
}

/** A parsed JSON answer; tests read into it freely and assert on what they find. */
// biome-ignore lint/suspicious/noExplicitAny: test assertions check the shape themselves.
type Json = any;

/** POSTs a body and returns status and parsed JSON. */
export async function post(url: string, body: string | Uint8Array): Promise<{ status: number; json: Json }> {
  const response = await fetch(url, { method: "POST", body });
  return { status: response.status, json: await response.json() };
}

/** GETs JSON. */
export async function get(url: string): Promise<{ status: number; json: Json }> {
  const response = await fetch(url);
  return { status: response.status, json: await response.json() };
}

/** A VirtualService document routing host to subset v1 (weights optional). */
export function virtualService(
  name: string,
  extra: { hosts?: string[]; gateways?: string[]; subset?: string; namespace?: string } = {},
) {
  const hosts = extra.hosts ?? [name];
  return [
    "apiVersion: networking.istio.io/v1",
    "kind: VirtualService",
    "metadata:",
    `  name: ${name}`,
    ...(extra.namespace ? [`  namespace: ${extra.namespace}`] : []),
    "spec:",
    `  hosts: [${hosts.join(", ")}]`,
    ...(extra.gateways ? [`  gateways: [${extra.gateways.join(", ")}]`] : []),
    "  http:",
    "  - route:",
    `    - destination: {host: ${hosts[0]}${extra.subset ? `, subset: ${extra.subset}` : ""}}`,
    "",
  ].join("\n");
}
