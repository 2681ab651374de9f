import { after, before } from "node:test";
import { type Bus, connectBus } from "@sextant/bus";
import { configKey } from "@sextant/model";
import { createLogger } from "@sextant/observability";
import type { ConfigMessage, ConfigResource } from "@sextant/proto";
import { type StartedService, startService } from "@sextant/runtime";
import { type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { type AnalysisInput, type AnalysisResult, analyze } from "../src/analysis/analyzers.js";
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

/** What a describe block's tests share from ingestForSuite: its ingest and a bus client on its nats-server. */
export interface SuiteIngest {
  readonly url: string;
  readonly service: StartedService<IngestSettings>;
  readonly bus: Bus;
}

/**
 * Starts a nats-server and ingest before the enclosing describe block's tests and stops them after;
 * call it in the describe body. The fields are there once the tests run.
 */
export function ingestForSuite(): SuiteIngest {
  let env: Awaited<ReturnType<typeof startNatsWithClient>> | undefined;
  let ingest: IngestFixture | undefined;
  before(async () => {
    env = await startNatsWithClient();
    ingest = await startIngest(env.nats.url);
  });
  after(async () => {
    await ingest?.stop();
    await env?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("ingestForSuite: read before the suite's before() ran");
    return value;
  };
  return {
    get url() {
      return started(ingest).url;
    },
    get service() {
      return started(ingest).service;
    },
    get bus() {
      return started(env).bus;
    },
  };
}

/** A parsed JSON answer; tests read into it freely and assert on what they find. */
// biome-ignore lint/suspicious/noExplicitAny: test assertions check the shape themselves.
export type Json = any;

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

/** The messages of ingest's analysis endpoint (GET /v1/analyze). */
export async function analysisMessages(ingestUrl: string): Promise<Array<Record<string, string>>> {
  return (await get(`${ingestUrl}/v1/analyze`)).json.messages;
}

/** A stored resource as analysis reads it: generation 1, revision 0, no labels or annotations. */
export function storedResource(
  meta: { kind: string; apiVersion: string; name: string; namespace: string },
  spec: Record<string, unknown>,
): ConfigResource {
  return { ...meta, labels: {}, annotations: {}, generation: 1, revision: 0, spec };
}

/** Runs analysis over resources in cluster.local: no registry hosts, workloads or Secrets unless given. */
export function analyzeResources(
  resources: readonly ConfigResource[],
  context: Partial<Omit<AnalysisInput, "resources">> = {},
): AnalysisResult {
  return analyze({
    registryHosts: new Set(),
    workloads: [],
    credentials: new Map(),
    domainSuffix: "cluster.local",
    ...context,
    resources,
  });
}

/** What analysis said of one resource (nothing: an empty list). */
export function messagesOf(result: AnalysisResult, resource: ConfigResource): ConfigMessage[] {
  return result.get(configKey(resource)) ?? [];
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
