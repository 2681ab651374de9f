// Push benchmark: N simulated ADS clients (a separate process) against M
// services. For each (M, N) it measures the time from one VirtualService
// change (written to sextant-config, as ingest would) until every client has
// received the new route configuration, p50 and p99 over clients, and push's
// resident memory per connected proxy. The same clients are then run against
// a server that fans out pre-encoded resources with no translation: the floor
// for an xDS server in Node, and the ratio to it is reported.
//
//   pnpm --filter @sextant/push bench            (N = 100, 1000, 2000; M = 100, 1000)
//   BENCH_N=100 BENCH_M=100 pnpm --filter @sextant/push bench
import { type ChildProcess, fork, spawn } from "node:child_process";
import { cpus } from "node:os";
import { fileURLToPath } from "node:url";
import { Buckets, connectBus, encodeKey } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { EndpointShard, HealthStatus, Protocol, Resolution, Service } from "@sextant/proto";
import { eventually, freePort, metricValue, startNatsServer } from "@sextant/testing";

const NS = (process.env.BENCH_N ?? "100,1000,2000").split(",").map(Number);
const MS = (process.env.BENCH_M ?? "100,1000").split(",").map(Number);
const HOST = "svc-0.default.svc.cluster.local";
const LISTENER = `${HOST}:9080`;
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const tsx = ["--conditions=@sextant/source", "--import", "tsx"];

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

function waitFor<T extends { type: string }>(
  child: ChildProcess,
  type: string,
  timeoutMs = 300_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no "${type}" from child within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const listener = (message: T) => {
      if (message.type !== type) return;
      clearTimeout(timer);
      child.off("message", listener);
      resolve(message);
    };
    child.on("message", listener);
  });
}

/** Starts N clients against address, waits until all have routes, changes config, and returns per-client latencies. */
async function measure(address: string, count: number, change: () => Promise<void> | void) {
  const clients = fork(here("./ads-clients.ts"), [address, String(count), LISTENER], {
    execArgv: tsx,
    stdio: "inherit",
  });
  clients.on("exit", (code) => {
    if (code) console.error(`simulated clients exited with ${code}`);
  });
  await waitFor(clients, "ready");
  clients.send({ type: "arm" });
  await waitFor(clients, "armed");
  const changed = waitFor<{ type: string; times: number[] }>(clients, "changed");
  const started = Date.now();
  await change();
  const { times } = await changed;
  return { latencies: times.map((t) => t - started), clients };
}

const virtualService = (weight: number) => ({
  kind: "VirtualService",
  apiVersion: "networking.istio.io/v1",
  namespace: "default",
  name: "svc-0",
  labels: {},
  annotations: {},
  generation: weight,
  revision: 0,
  spec: {
    hosts: ["svc-0"],
    http: [
      {
        route: [
          { destination: { host: "svc-0", subset: "v1" }, weight },
          { destination: { host: "svc-0", subset: "v2" }, weight: 100 - weight },
        ],
      },
    ],
  },
});

const rows: string[] = [];
for (const services of MS) {
  const nats = await startNatsServer();
  const bus = await connectBus({
    url: nats.url,
    name: "bench",
    logger: createLogger({ service: "bench", level: "silent" }),
  });
  const servicesBucket = await bus.bucket(Buckets.services);
  const endpointsBucket = await bus.bucket(Buckets.endpoints);
  for (let i = 0; i < services; i++) {
    const host = `svc-${i}.default.svc.cluster.local`;
    await servicesBucket.put(
      encodeKey("default", host),
      Service.fromPartial({
        hostname: host,
        namespace: "default",
        name: `svc-${i}`,
        ports: [{ name: "grpc", number: 9080, protocol: Protocol.PROTOCOL_GRPC }],
        resolution: Resolution.RESOLUTION_STATIC,
      }),
    );
    await endpointsBucket.put(
      encodeKey("default", host, "bench"),
      EndpointShard.fromPartial({
        hostname: host,
        namespace: "default",
        shard: "bench",
        endpoints: [1, 2, 3].map((n) => ({
          address: `10.${i >> 8}.${i & 255}.${n}`,
          ports: { grpc: 9080 },
          labels: { version: `v${n}` },
          health: HealthStatus.HEALTH_STATUS_HEALTHY,
        })),
      }),
    );
  }
  const config = await bus.bucket(Buckets.config);
  await config.put(encodeKey("VirtualService", "default", "svc-0"), virtualService(90));

  const xdsPort = await freePort();
  const httpPort = await freePort();
  const push = spawn(process.execPath, [...tsx, here("../src/main.ts")], {
    env: {
      ...process.env,
      NATS_URL: nats.url,
      XDS_PLAINTEXT_ENABLED: "true",
      XDS_PORT: String(xdsPort),
      HTTP_PORT: String(httpPort),
      // Plaintext clients only: the mTLS port would need a ca to get push's certificate.
      XDS_TLS_ENABLED: "false",
      LOG_LEVEL: "warn",
      OTEL_SDK_DISABLED: "true",
    },
    stdio: "inherit",
  });
  const metric = async (name: string) => {
    return metricValue(await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text(), name);
  };
  await eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/ready`)).ok, { timeoutMs: 60_000 });

  let weight = 90;
  for (const count of NS) {
    const rssBefore = await metric("process_resident_memory_bytes");
    const run = await measure(`127.0.0.1:${xdsPort}`, count, async () => {
      weight = weight === 90 ? 50 : 90;
      await config.put(encodeKey("VirtualService", "default", "svc-0"), virtualService(weight));
    });
    const rssAfter = await metric("process_resident_memory_bytes");
    run.clients.send({ type: "exit" });
    await eventually(async () => (await metric("pilot_xds")) === 0, { timeoutMs: 60_000 });

    const baseline = fork(here("./baseline-server.ts"), [LISTENER], { execArgv: tsx, stdio: "inherit" });
    const { port } = await waitFor<{ type: string; port: number }>(baseline, "listening");
    const floor = await measure(`127.0.0.1:${port}`, count, () => {
      baseline.send({ type: "change" });
    });
    floor.clients.send({ type: "exit" });
    baseline.send({ type: "exit" });

    const p50 = percentile(run.latencies, 50);
    const p99 = percentile(run.latencies, 99);
    const f50 = percentile(floor.latencies, 50);
    const f99 = percentile(floor.latencies, 99);
    rows.push(
      `| ${services} | ${count} | ${p50} | ${p99} | ${f50} | ${f99} | ${(p99 / Math.max(f99, 1)).toFixed(1)}× | ${((rssAfter - rssBefore) / count / 1024).toFixed(1)} |`,
    );
    console.error(rows.at(-1));
  }
  push.kill("SIGTERM");
  await new Promise((resolve) => push.once("exit", resolve));
  await bus.close();
  await nats.dispose();
}

console.log(
  `\nPush benchmark, ${new Date().toISOString().slice(0, 10)}, ${cpus().length}× ${cpus()[0]?.model.trim()}, node ${process.version}`,
);
console.log(
  "Change-to-received latency is from the write of one VirtualService to sextant-config until each client has the new routes",
);
console.log(
  "(including NATS, the debounce (none for a lone change with the leading edge) and the push). The baseline fans out pre-encoded routes with no translation.\n",
);
console.log(
  "| services (M) | clients (N) | p50 ms | p99 ms | baseline p50 ms | baseline p99 ms | p99 ratio | push RSS per proxy KiB |",
);
console.log("|---|---|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
