// Overload benchmark: ingest's apply capacity (closed loop, rising
// concurrency), then an open-loop offer of 10× that capacity, with
// MAX_REQUESTS_IN_FLIGHT at its default and with no limit. Prints Markdown
// tables; no assertion.
//
//   pnpm --filter @sextant/ingest bench:overload
//   (BENCH_OVERLOAD_SECONDS: length of each open-loop run, default 5)
import { readFileSync } from "node:fs";
import { cpus } from "node:os";
import { type IngestProcess, startIngestProcess } from "./ingest-process.js";

const OVERLOAD_SECONDS = Number(process.env.BENCH_OVERLOAD_SECONDS ?? 5);
const CAPACITY_SECONDS = 3;
const NAMESPACE = "overload";

let serial = 0;
const virtualService = (name: string) =>
  `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${NAMESPACE}}
spec:
  hosts: [${name}]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: ${name}, subset: v2}}]
  - route:
    - {destination: {host: ${name}, subset: v1}, weight: 90}
    - {destination: {host: ${name}, subset: v3}, weight: 10}
    timeout: 2s
`;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Applies one new VirtualService; its status and latency (a failed connection counts as status 0). */
async function apply(url: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  try {
    const response = await fetch(`${url}/v1/apply`, {
      method: "POST",
      body: virtualService(`vs-${serial++}`),
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

/** Open loop: `rate` applies/s started on a clock, whatever the answers; counts by status. */
async function openLoop(ingest: IngestProcess, rate: number) {
  const accepted: number[] = [];
  const refused: number[] = [];
  let other = 0;
  let maxRss = rssMb(ingest.pid);
  const pending: Array<Promise<void>> = [];
  const tickMs = 10;
  const started = performance.now();
  let sent = 0;
  while (performance.now() - started < OVERLOAD_SECONDS * 1000) {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    for (; sent < due; sent++)
      pending.push(
        apply(ingest.url).then(({ status, ms }) => {
          if (status === 200) accepted.push(ms);
          else if (status === 429) refused.push(ms);
          else other++;
        }),
      );
    maxRss = Math.max(maxRss, rssMb(ingest.pid));
    await new Promise((resolve) => setTimeout(resolve, tickMs));
  }
  const offerSeconds = (performance.now() - started) / 1000;
  const sampler = setInterval(() => {
    maxRss = Math.max(maxRss, rssMb(ingest.pid));
  }, 50);
  await Promise.all(pending);
  clearInterval(sampler);
  const drainedSeconds = (performance.now() - started) / 1000;
  accepted.sort((a, b) => a - b);
  refused.sort((a, b) => a - b);
  const stored = (
    (await (await fetch(`${ingest.url}/v1/config?namespace=${NAMESPACE}`)).json()) as { items: unknown[] }
  ).items.length;
  return {
    offered: sent / offerSeconds,
    accepted: accepted.length,
    acceptedRate: accepted.length / drainedSeconds,
    refused: refused.length,
    other,
    acceptedP50: percentile(accepted, 50),
    acceptedP99: percentile(accepted, 99),
    refusedP99: percentile(refused, 99),
    drainedSeconds,
    maxRss,
    stored,
  };
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
    for (const concurrency of [1, 4, 16, 64, 256]) {
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

// 10× capacity, open loop: with the default limit, and without one.
console.log(
  `\nCapacity ${Math.round(capacity)} applies/s; offering ${Math.round(10 * capacity)}/s for ${OVERLOAD_SECONDS} s:\n`,
);
console.log(
  "| MAX_REQUESTS_IN_FLIGHT | offered/s (reached) | 200 | accepted/s | 429 | other | accepted p50 / p99 ms | 429 p99 ms | all answered after s | ingest max RSS MB | stored = 200s |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|");
for (const limit of ["64 (default)", "unlimited"]) {
  const ingest = await startIngestProcess(limit === "unlimited" ? { MAX_REQUESTS_IN_FLIGHT: "1000000" } : {});
  try {
    await closedLoop(ingest.url, 8); // warm-up
    const before = (
      (await (await fetch(`${ingest.url}/v1/config?namespace=${NAMESPACE}`)).json()) as { items: unknown[] }
    ).items.length;
    const r = await openLoop(ingest, 10 * capacity);
    console.log(
      `| ${limit} | ${Math.round(r.offered)} | ${r.accepted} | ${Math.round(r.acceptedRate)} | ${r.refused} | ${r.other} | ${r.acceptedP50.toFixed(0)} / ${r.acceptedP99.toFixed(0)} | ${Number.isNaN(r.refusedP99) ? "-" : r.refusedP99.toFixed(0)} | ${r.drainedSeconds.toFixed(1)} | ${Math.round(r.maxRss)} | ${r.stored - before === r.accepted ? "yes" : `no: ${r.stored - before}`} |`,
    );
  } finally {
    await ingest.stop();
  }
}
