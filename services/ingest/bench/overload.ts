// Overload benchmark: ingest's apply capacity (closed loop, rising
// concurrency), then ten times the default MAX_REQUESTS_IN_FLIGHT of clients
// applying back to back, with the default limit and with none. Prints
// Markdown tables; no assertion.
//
//   pnpm --filter @sextant/ingest bench:overload
//   (BENCH_OVERLOAD_SECONDS: length of each overload run, default 5)
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { type IngestProcess, startIngestProcess } from "./ingest-process.js";

const OVERLOAD_SECONDS = Number(process.env.BENCH_OVERLOAD_SECONDS ?? 5);
const CAPACITY_SECONDS = 3;
const NAMESPACE = "overload";

/**
 * Every apply changes one of NAMES VirtualServices (a new header value), so
 * that the store, and the analysis pass after each burst, stay the same size.
 */
const NAMES = 100;
let serial = 0;
const virtualService = (name: string, change: number) =>
  `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${NAMESPACE}}
spec:
  hosts: [${name}]
  http:
  - match: [{headers: {end-user: {exact: jason-${change}}}}]
    route: [{destination: {host: ${name}, subset: v2}}]
  - route:
    - {destination: {host: ${name}, subset: v1}, weight: 90}
    - {destination: {host: ${name}, subset: v3}, weight: 10}
    timeout: 2s
`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Changes one VirtualService; its status and latency (a failed connection counts as status 0). */
async function apply(url: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const change = serial++;
  try {
    const response = await fetch(`${url}/v1/apply`, {
      method: "POST",
      body: virtualService(`vs-${change % NAMES}`, change),
    });
    await response.arrayBuffer();
    return { status: response.status, ms: performance.now() - started };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

/** Resident set of a process, in MB. */
function rssMb(pid: number): number {
  const pages = Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]);
  return (pages * 4096) / 1024 / 1024;
}

/** Closed loop: `concurrency` clients applying back to back; applies/s and latency. */
async function closedLoop(url: string, concurrency: number) {
  const latencies: number[] = [];
  let refused = 0;
  const end = performance.now() + CAPACITY_SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const { status, ms } = await apply(url);
        if (status === 200) latencies.push(ms);
        else refused++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    rate: latencies.length / seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    refused,
  };
}

/**
 * Overload: `clients` connections applying back to back, each sending its
 * next apply as soon as it has an answer (ignoring Retry-After, the worst
 * case); counts by status, latencies, ingest's largest resident set, and
 * whether every accepted apply was stored.
 */
async function overload(ingest: IngestProcess, clients: number) {
  const accepted: number[] = [];
  const refused: number[] = [];
  let other = 0;
  let maxRss = rssMb(ingest.pid);
  const sampler = setInterval(() => {
    maxRss = Math.max(maxRss, rssMb(ingest.pid));
  }, 50);
  const end = performance.now() + OVERLOAD_SECONDS * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        const { status, ms } = await apply(ingest.url);
        if (status === 200) accepted.push(ms);
        else if (status === 429) refused.push(ms);
        else other++;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  accepted.sort((a, b) => a - b);
  refused.sort((a, b) => a - b);
  return {
    requestRate: (accepted.length + refused.length + other) / seconds,
    accepted: accepted.length,
    acceptedRate: accepted.length / seconds,
    refused: refused.length,
    other,
    acceptedP50: percentile(accepted, 50),
    acceptedP99: percentile(accepted, 99),
    refusedP99: percentile(refused, 99),
    maxRss,
  };
}

/** The sum of the stored generations: each accepted change adds one. */
async function storedChanges(url: string): Promise<number> {
  const answer = await fetch(`${url}/v1/config?namespace=${NAMESPACE}`);
  const { items } = (await answer.json()) as { items: Array<{ metadata: { generation: number } }> };
  return items.reduce((sum, item) => sum + item.metadata.generation, 0);
}

const machine = `${cpus().length}× ${cpus()[0]?.model.trim()}, node ${process.version}`;
console.log(`\nIngest overload benchmark, ${new Date().toISOString().slice(0, 16)}Z, ${machine}\n`);

// Capacity, with the limit out of the way.
let capacity = 0;
{
  const ingest = await startIngestProcess({ MAX_REQUESTS_IN_FLIGHT: "1000000" });
  try {
    await closedLoop(ingest.url, 8); // warm-up
    console.log("| concurrency | applies/s | p50 ms | p99 ms |");
    console.log("|---|---|---|---|");
    for (const concurrency of [1, 4, 16, 64]) {
      const row = await closedLoop(ingest.url, concurrency);
      capacity = Math.max(capacity, row.rate);
      console.log(
        `| ${concurrency} | ${Math.round(row.rate)} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} |`,
      );
    }
  } finally {
    await ingest.stop();
  }
}

// 10× the default limit's concurrency, with the default limit and without one.
const CLIENTS = 640;
console.log(
  `\nCapacity ${Math.round(capacity)} applies/s. Overload: ${CLIENTS} clients (10× the default MAX_REQUESTS_IN_FLIGHT) applying back to back for ${OVERLOAD_SECONDS} s:\n`,
);
console.log(
  "| MAX_REQUESTS_IN_FLIGHT | requests/s answered | 200 | accepted/s | 429 | failed | accepted p50 / p99 ms | 429 p99 ms | ingest max RSS MB | changes stored = 200s |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|");
for (const limit of ["64 (default)", "unlimited"]) {
  const ingest = await startIngestProcess(limit === "unlimited" ? { MAX_REQUESTS_IN_FLIGHT: "1000000" } : {});
  try {
    await closedLoop(ingest.url, 8); // warm-up
    const before = await storedChanges(ingest.url);
    const r = await overload(ingest, CLIENTS);
    const stored = (await storedChanges(ingest.url)) - before;
    console.log(
      `| ${limit} | ${Math.round(r.requestRate)} | ${r.accepted} | ${Math.round(r.acceptedRate)} | ${r.refused} | ${r.other} | ${r.acceptedP50.toFixed(0)} / ${r.acceptedP99.toFixed(0)} | ${Number.isNaN(r.refusedP99) ? "-" : r.refusedP99.toFixed(0)} | ${Math.round(r.maxRss)} | ${stored === r.accepted ? "yes" : `no: ${stored}`} |`,
    );
  } finally {
    await ingest.stop();
  }
}
