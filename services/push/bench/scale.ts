// Sidecar-scale benchmark (issue 23 §1): N simulated Envoy sidecars (worker
// processes of this benchmark, see scale/sidecars.ts) against R push replicas
// fed by real ingest and discovery over a real nats-server, S Kubernetes
// services with three endpoints each (discovery reads them from the fake
// kube-apiserver), every tenth with a VirtualService and a DestinationRule,
// with and without a Sidecar per namespace scoping it to itself. Per row:
// initial convergence, a VirtualService change until every affected sidecar
// ACKed the new routes, an endpoint change until every affected sidecar
// ACKed the new endpoints, push CPU per change and per connected proxy, push
// RSS, bytes received per change, and the same measures against the floor
// (scale/replay-floor.ts: push's recorded bytes served with no translation).
//
//   pnpm --filter @sextant/push bench:scale             (every row; under 15 minutes)
//   pnpm --filter @sextant/push bench:scale --quick     (one small row, a smoke run)
//   pnpm --filter @sextant/push bench:scale --delta     (incremental xDS; no floor)
//   BENCH_ROWS=500x100 BENCH_REPLICAS=1 BENCH_SCOPES=none BENCH_CHANGES=2 BENCH_WORKERS=2
//   BENCH_TIMEOUT_S=60 (per convergence and per change) BENCH_BUDGET_S=780 (rows started after it are skipped)
import { cpus, loadavg, totalmem } from "node:os";
import { TypeUrl } from "@sextant/proto/envoy";
import { type Mesh, startMesh } from "./scale/mesh.js";
import {
  type ChangeResult,
  measureRun,
  percentile,
  type RunResult,
  RunTimeout,
  SidecarLoad,
  startReplayFloor,
} from "./scale/run.js";
import type { SidecarSpec } from "./scale/sidecars.js";

const args = new Set(process.argv.slice(2));
const quick = args.has("--quick");
const delta = args.has("--delta");
const list = (name: string, fallback: string) => (process.env[name] ?? fallback).split(",").filter(Boolean);
const rows = list("BENCH_ROWS", quick ? "100x50" : "500x100,1000x1000,2000x1000").map((row) => {
  const [sidecars, services] = row.split("x").map(Number);
  return { sidecars: sidecars as number, services: services as number };
});
const replicaCounts = list("BENCH_REPLICAS", quick ? "1,2" : "1,2,4").map(Number);
const scopes = list("BENCH_SCOPES", quick ? "none" : "none,namespace");
const changes = Number(process.env.BENCH_CHANGES ?? 2);
const workers = Number(process.env.BENCH_WORKERS ?? cpus().length);
// The whole run stays under 15 minutes: each convergence and each change is bounded, and a row
// that would start past the budget is listed as not run.
const timeoutMs = Number(process.env.BENCH_TIMEOUT_S ?? (quick ? 120 : 60)) * 1000;
const budgetMs = Number(process.env.BENCH_BUDGET_S ?? 780) * 1000;

const load = new SidecarLoad(workers);
const table: string[] = [];
const started = Date.now();
let nextChange = 1;

const ms = (seconds: number) => Math.round(seconds * 1000);
const pct = (values: number[]) => `${percentile(values, 50)} / ${percentile(values, 99)}`;
const latencies = (results: ChangeResult[]) => results.flatMap((result) => result.latencies);
const mean = (values: number[]) => values.reduce((sum, v) => sum + v, 0) / Math.max(1, values.length);
const cpuPerChange = (results: ChangeResult[]) => ms(mean(results.map((r) => r.cpuSeconds)));
const bytesPerChange = (results: ChangeResult[]) => mean(results.map((r) => r.bytes));

function row(push: RunResult, floor: RunResult | undefined) {
  const n = push.convergence.length;
  const f = <T>(value: (run: RunResult) => T) => (floor ? String(value(floor)) : "n/a");
  const pushVs99 = percentile(latencies(push.virtualService), 99);
  const floorVs99 = floor ? percentile(latencies(floor.virtualService), 99) : Number.NaN;
  const convergence = (run: RunResult) =>
    `${(percentile(run.convergence, 50) / 1000).toFixed(1)} / ${(percentile(run.convergence, 99) / 1000).toFixed(1)}`;
  return [
    `${convergence(push)} (${f(convergence)})`,
    `${pct(latencies(push.virtualService))} (${f((run) => pct(latencies(run.virtualService)))})`,
    floor ? `${(pushVs99 / Math.max(1, floorVs99)).toFixed(1)}×` : "n/a",
    `${pct(latencies(push.endpoints))} (${f((run) => pct(latencies(run.endpoints)))})`,
    `${cpuPerChange(push.virtualService)} (${f((run) => cpuPerChange(run.virtualService))})`,
    `${cpuPerChange(push.endpoints)} (${f((run) => cpuPerChange(run.endpoints))})`,
    `${((push.connectCpuSeconds * 1000) / n).toFixed(1)} (${f((run) => ((run.connectCpuSeconds * 1000) / n).toFixed(1))})`,
    `${Math.round(push.rssAfter / 2 ** 20)} / ${((push.rssAfter - push.rssBefore) / n / 1024).toFixed(0)}`,
    `${(bytesPerChange(push.virtualService) / 2 ** 20).toFixed(2)} (${f((run) => (bytesPerChange(run.virtualService) / 2 ** 20).toFixed(2))})`,
    `${(bytesPerChange(push.endpoints) / 1024).toFixed(1)} (${f((run) => (bytesPerChange(run.endpoints) / 1024).toFixed(1))})`,
  ].join(" | ");
}

async function runRows(mesh: Mesh, scope: string) {
  for (const { sidecars: n, services } of rows.filter((row) => row.services === mesh.options.services)) {
    const specs = mesh.sidecars(n);
    const affected = specs.filter(mesh.affected).length;
    let recorded: { initial?: Record<string, string[]>; vs: string[][]; eds: string[][] } | undefined;
    const firstChange = nextChange;
    nextChange += changes;
    let floor: RunResult | undefined;
    for (const replicas of replicaCounts) {
      const prefix = `| ${n} | ${services} | ${scope} | ${replicas} | ${affected} |`;
      if (Date.now() - started > budgetMs) {
        table.push(`${prefix} not run: past the ${budgetMs / 1000} s budget |`);
        continue;
      }
      const pushes = await Promise.all(Array.from({ length: replicas }, () => mesh.startPush()));
      const record = recorded === undefined && !delta;
      if (record) recorded = { vs: [], eds: [] };
      const sidecars: SidecarSpec[] = specs.map((spec, i) => ({
        ...spec,
        address: pushes[i % replicas]?.address as string,
      }));
      let push: RunResult;
      try {
        push = await measureRun({
          load,
          sidecars,
          delta,
          timeoutMs,
          pids: pushes.map((p) => p.process.child.pid as number),
          affected: mesh.affected,
          changes,
          firstChange: record ? firstChange : nextChange,
          changeVirtualService: mesh.changeVirtualService,
          changeEndpoints: mesh.changeEndpoints,
          recorder: record ? 0 : undefined,
          onRecorded: (what, _change, rec) => {
            if (!recorded) return;
            if (what === "initial") recorded.initial = rec.state;
            else if (what === "virtualService") recorded.vs.push(rec.change);
            else recorded.eds.push(rec.change);
          },
        });
      } catch (error) {
        if (!(error instanceof RunTimeout)) throw error;
        if (record) recorded = undefined;
        table.push(`${prefix} push: ${error.message} |`);
        console.error(table.at(-1));
        continue;
      } finally {
        if (!record) nextChange += changes;
        for (const p of pushes) await p.process.stop();
      }

      // The floor once per (N, S, scope), after the first push run recorded its bytes.
      if (floor === undefined && recorded?.initial) {
        const replay = await startReplayFloor(recorded.initial);
        const bytes = recorded;
        const namespace = mesh.options.scoped ? mesh.changedNamespace : undefined;
        try {
          floor = await measureRun({
            load,
            sidecars: specs.map((spec) => ({ ...spec, address: replay.address })),
            delta: false,
            timeoutMs,
            pids: [replay.pid],
            affected: mesh.affected,
            changes,
            firstChange,
            changeVirtualService: (c) =>
              replay.change(TypeUrl.RouteConfiguration, bytes.vs[c - firstChange] ?? [], namespace),
            changeEndpoints: (c) =>
              replay.change(TypeUrl.ClusterLoadAssignment, bytes.eds[c - firstChange] ?? [], namespace),
          });
        } finally {
          await replay.close();
        }
      }
      table.push(`${prefix} ${row(push, floor)} |`);
      console.error(`${((Date.now() - started) / 1000).toFixed(0)} s: ${table.at(-1)}`);
    }
  }
}

const loadBefore = loadavg()[0] ?? 0;
try {
  // Cheapest first (scoped before unscoped), so that the budget cuts the most expensive rows.
  for (const scope of [...scopes].sort((a, b) => (a === "namespace" ? -1 : b === "namespace" ? 1 : 0))) {
    for (const services of [...new Set(rows.map((row) => row.services))]) {
      const mesh = await startMesh({ services, scoped: scope === "namespace" });
      try {
        await runRows(mesh, scope);
      } finally {
        await mesh.close();
      }
    }
  }
} finally {
  await load.dispose();
}

console.log(
  `\nSidecar-scale benchmark, ${new Date().toISOString().slice(0, 16)}Z, ${cpus().length}× ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${delta ? "delta" : "SotW"}, ${changes} changes of each kind per row, ${workers} load workers, load average ${loadBefore.toFixed(1)} at start, ${((Date.now() - started) / 1000).toFixed(0)} s in all`,
);
console.log("Each cell: push (floor). Latencies pooled over the affected sidecars of every change.\n");
console.log(
  "| sidecars | services | Sidecar scope | replicas | affected | converge p50 / p99 s | VS change → ACK p50 / p99 ms | VS p99 ÷ floor | endpoint change → EDS ACK p50 / p99 ms | CPU ms per VS change | CPU ms per endpoint change | CPU ms per connected proxy | push RSS MB total / KB per proxy | MB sent per VS change | KB sent per endpoint change |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
for (const line of table) console.log(line);
