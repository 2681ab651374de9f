import assert from "node:assert/strict";
import { type IncomingMessage, request } from "node:http";
import { after, before, describe, it } from "node:test";
import { parseSettings, SettingsError } from "@sextant/runtime";
import { eventually, metricValue } from "@sextant/testing";
import { ingestSettings } from "../src/settings.js";
import {
  get,
  type IngestFixture,
  post,
  startIngest,
  startNatsWithClient,
  virtualService,
} from "./harness.js";

const LIMIT = 3;

/** An apply whose body is being sent: it holds its place in flight until `finish` sends the rest. */
interface HeldApply {
  finish(): Promise<{ status: number; json: unknown }>;
  abort(): void;
}

/** Starts POST /v1/apply of a document, sending only its first half for now. */
function holdApply(url: string, body: string): HeldApply {
  const held = request(`${url}/v1/apply`, {
    method: "POST",
    headers: { "content-length": Buffer.byteLength(body) },
  });
  const answered = new Promise<IncomingMessage>((resolve, reject) => {
    held.on("response", resolve);
    held.on("error", reject);
  });
  const half = Math.floor(body.length / 2);
  held.write(body.slice(0, half));
  return {
    async finish() {
      held.end(body.slice(half));
      const response = await answered;
      const chunks: Buffer[] = [];
      for await (const chunk of response) chunks.push(chunk as Buffer);
      return { status: response.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString()) };
    },
    abort() {
      answered.catch(() => {});
      held.destroy();
    },
  };
}

/** The value of a metric in ingest's /metrics. */
async function metric(url: string, name: string): Promise<number> {
  return metricValue(await (await fetch(`${url}/metrics`)).text(), name);
}

describe("config API overload (MAX_REQUESTS_IN_FLIGHT)", () => {
  let env: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: IngestFixture;
  before(async () => {
    env = await startNatsWithClient();
    ingest = await startIngest(env.nats.url, { MAX_REQUESTS_IN_FLIGHT: String(LIMIT) });
  });
  after(async () => {
    await ingest?.stop();
    await env?.close();
  });

  it("answers 429 with Retry-After beyond the limit, stores every accepted apply and none refused", async () => {
    const held = Array.from({ length: LIMIT }, (_, i) => holdApply(ingest.url, virtualService(`held-${i}`)));
    await eventually(
      async () => (await metric(ingest.url, "sextant_ingest_api_requests_in_flight")) === LIMIT,
    );

    const refusedApply = await fetch(`${ingest.url}/v1/apply`, {
      method: "POST",
      body: virtualService("refused"),
    });
    assert.equal(refusedApply.status, 429);
    assert.equal(refusedApply.headers.get("retry-after"), "1");
    const refusal = (await refusedApply.json()) as { error: string; reason: string };
    assert.equal(refusal.reason, "overloaded");
    assert.match(refusal.error, /3 requests are in flight \(MAX_REQUESTS_IN_FLIGHT\)/);
    // Reads are API requests too; health and metrics are not limited.
    assert.equal((await get(`${ingest.url}/v1/config`)).status, 429);
    assert.equal((await fetch(`${ingest.url}/ready`)).status, 200);
    assert.equal(await metric(ingest.url, "sextant_ingest_api_overload_refusals_total"), 2);

    const answers = await Promise.all(held.map((h) => h.finish()));
    for (const [i, answer] of answers.entries()) {
      assert.equal(answer.status, 200, JSON.stringify(answer.json));
      assert.deepEqual(
        (answer.json as { resources: Array<{ name: string; result: string }> }).resources.map((r) => [
          r.name,
          r.result,
        ]),
        [[`held-${i}`, "created"]],
      );
    }
    const stored = (await get(`${ingest.url}/v1/config?kind=VirtualService&namespace=default`)).json.items;
    assert.deepEqual(stored.map((item: { metadata: { name: string } }) => item.metadata.name).sort(), [
      "held-0",
      "held-1",
      "held-2",
    ]);
    assert.equal((await get(`${ingest.url}/v1/config/VirtualService/default/refused`)).status, 404);

    // Every place is free again: the refused apply goes through when repeated.
    assert.equal(await metric(ingest.url, "sextant_ingest_api_requests_in_flight"), 0);
    assert.equal((await post(`${ingest.url}/v1/apply`, virtualService("refused"))).status, 200);
  });

  it("frees the place of a request whose client went away", async () => {
    const held = Array.from({ length: LIMIT }, (_, i) => holdApply(ingest.url, virtualService(`gone-${i}`)));
    await eventually(
      async () => (await metric(ingest.url, "sextant_ingest_api_requests_in_flight")) === LIMIT,
    );
    held[0]?.abort();
    await eventually(
      async () => (await metric(ingest.url, "sextant_ingest_api_requests_in_flight")) === LIMIT - 1,
    );
    assert.equal((await post(`${ingest.url}/v1/apply`, virtualService("after-abort"))).status, 200);
    for (const h of held.slice(1)) assert.equal((await h.finish()).status, 200);
    assert.equal((await get(`${ingest.url}/v1/config/VirtualService/default/gone-0`)).status, 404);
  });
});

describe("MAX_REQUESTS_IN_FLIGHT", () => {
  it("must be a positive integer", () => {
    for (const value of ["0", "-1", "1.5", "many"]) {
      assert.throws(
        () => parseSettings(ingestSettings, { API_AUTH: "none", MAX_REQUESTS_IN_FLIGHT: value }),
        (error) => error instanceof SettingsError && /MAX_REQUESTS_IN_FLIGHT/.test(error.message),
      );
    }
    assert.equal(parseSettings(ingestSettings, { API_AUTH: "none" }).MAX_REQUESTS_IN_FLIGHT, 64);
  });
});
