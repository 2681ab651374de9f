// Apply benchmark: throughput (resources/s) and p50/p99 latency of POST
// /v1/apply for 1,000 VirtualServices, against a real nats-server and ingest
// running as its own process. Prints a Markdown table; no assertion.
//
//   pnpm --filter @sextant/ingest bench
import { cpus } from "node:os";
import { startIngestProcess } from "./ingest-process.js";

const COUNT = 1_000;

const virtualService = (name: string, subset: string) =>
  `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: bench}
spec:
  hosts: [${name}]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: ${name}, subset: v2}}]
  - route:
    - {destination: {host: ${name}, subset: ${subset}}, weight: 90}
    - {destination: {host: ${name}, subset: v3}, weight: 10}
    timeout: 2s
    retries: {attempts: 3, perTryTimeout: 500ms, retryOn: "5xx,reset"}
`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function post(body: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/v1/apply`, { method: "POST", body });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`apply answered ${response.status}`);
  return performance.now() - started;
}

/** Applies `bodies` with `concurrency` requests in flight; returns per-request latencies and wall time. */
async function run(bodies: string[], concurrency: number) {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++]!;
        latencies.push(await post(body));
      }
    }),
  );
  return { latencies: latencies.sort((a, b) => a - b), seconds: (performance.now() - started) / 1000 };
}

const ingest = await startIngestProcess();
const { url } = ingest;
try {
  const rows: string[] = [];
  const scenarios: Array<[string, string[], number, number]> = [
    [
      "create, 1 per request",
      Array.from({ length: COUNT }, (_, i) => virtualService(`vs-${i}`, "v1")),
      1,
      COUNT,
    ],
    [
      "update, 1 per request",
      Array.from({ length: COUNT }, (_, i) => virtualService(`vs-${i}`, "v2")),
      1,
      COUNT,
    ],
    [
      "update, 1 per request",
      Array.from({ length: COUNT }, (_, i) => virtualService(`vs-${i}`, "v4")),
      16,
      COUNT,
    ],
    [
      "unchanged, 1 per request",
      Array.from({ length: COUNT }, (_, i) => virtualService(`vs-${i}`, "v4")),
      16,
      COUNT,
    ],
    [
      "update, 100 per request",
      Array.from({ length: COUNT / 100 }, (_, batch) =>
        Array.from({ length: 100 }, (_, i) => virtualService(`vs-${batch * 100 + i}`, "v5")).join("---\n"),
      ),
      1,
      COUNT,
    ],
  ];
  for (const [name, bodies, concurrency, resources] of scenarios) {
    const { latencies, seconds } = await run(bodies, concurrency);
    rows.push(
      `| ${name} | ${resources} | ${concurrency} | ${Math.round(resources / seconds)} | ${percentile(latencies, 50).toFixed(1)} | ${percentile(latencies, 99).toFixed(1)} |`,
    );
  }
  console.log(
    `\nIngest apply benchmark, ${new Date().toISOString().slice(0, 10)}, ${cpus().length}× ${cpus()[0]?.model.trim()}, node ${process.version}\n`,
  );
  console.log(
    "| scenario | resources | concurrency | resources/s | p50 ms (per request) | p99 ms (per request) |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const row of rows) console.log(row);
} finally {
  await ingest.stop();
}
