// Discovery benchmark: the initial sync of 10,000 pods behind 1,000
// services (from the fake kube-apiserver to both KV buckets, until /ready),
// and endpoint-churn throughput (endpoint updates written to KV per second).
// Discovery runs as its own process against a real nats-server; the fake
// kube-apiserver runs in this process. Prints a Markdown table; no assertion.
//
//   pnpm --filter @sextant/discovery bench
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Buckets, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { eventually, type KubeObject, startFakeKubeApiServer, startNatsServer } from "@sextant/testing";

const SERVICES = 1_000;
const PODS_PER_SERVICE = 10;
const CHURN_UPDATES = 5_000;
const port = 19_000 + Math.floor(Math.random() * 1_000);
const url = `http://127.0.0.1:${port}`;

const ip = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

function service(s: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: `svc-${s}`, namespace: `ns-${s % 20}`, labels: { app: `svc-${s}` } },
    spec: {
      clusterIP: `10.96.${s >> 8}.${s & 255}`,
      selector: { app: `svc-${s}` },
      ports: [{ name: "http", port: 80, targetPort: 8080 }],
    },
  } as KubeObject;
}

function pod(s: number, p: number): KubeObject {
  const i = s * PODS_PER_SERVICE + p;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `svc-${s}-${p}`,
      namespace: `ns-${s % 20}`,
      labels: { app: `svc-${s}`, version: "v1" },
    },
    spec: { serviceAccountName: `sa-${s}`, nodeName: `node-${i % 50}`, containers: [{ name: "app" }] },
    status: { phase: "Running", podIP: ip(i), conditions: [{ type: "Ready", status: "True" }] },
  } as KubeObject;
}

function slice(s: number, notReady: number): KubeObject {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `svc-${s}-x`,
      namespace: `ns-${s % 20}`,
      labels: { "kubernetes.io/service-name": `svc-${s}` },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080 }],
    endpoints: Array.from({ length: PODS_PER_SERVICE }, (_, p) => ({
      addresses: [ip(s * PODS_PER_SERVICE + p)],
      conditions: { ready: p !== notReady, serving: p !== notReady, terminating: false },
      targetRef: { kind: "Pod", name: `svc-${s}-${p}`, namespace: `ns-${s % 20}` },
    })),
  } as KubeObject;
}

async function endpointPuts(): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const match = /sextant_discovery_kv_writes_total\{bucket="endpoints",op="put"[^}]*\} (\d+)/.exec(text);
  return Number(match?.[1] ?? 0);
}

const nats = await startNatsServer();
const server = await startFakeKubeApiServer({ bookmarkIntervalMs: 60_000 });
for (let n = 0; n < 20; n++)
  server.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: `ns-${n}` } } as KubeObject);
for (let n = 0; n < 50; n++)
  server.apply({
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: `node-${n}`,
      labels: { "topology.kubernetes.io/region": "r", "topology.kubernetes.io/zone": `z${n % 3}` },
    },
  } as KubeObject);
for (let s = 0; s < SERVICES; s++) {
  server.apply(service(s));
  for (let p = 0; p < PODS_PER_SERVICE; p++) server.apply(pod(s, p));
  server.apply(slice(s, -1));
}
const kubeconfig = join(mkdtempSync(join(tmpdir(), "discovery-bench-")), "kubeconfig");
writeFileSync(kubeconfig, server.kubeconfigYaml());

const bus = await connectBus({
  url: nats.url,
  name: "bench",
  logger: createLogger({ service: "bench", level: "silent" }),
});
const main = fileURLToPath(new URL("../src/main.ts", import.meta.url));
const started = performance.now();
const discovery: ChildProcess = spawn(
  process.execPath,
  ["--conditions=@sextant/source", "--import", "tsx", main],
  {
    env: {
      ...process.env,
      NATS_URL: nats.url,
      HTTP_PORT: String(port),
      KUBERNETES: "on",
      KUBECONFIG: kubeconfig,
      LOG_LEVEL: "warn",
      OTEL_SDK_DISABLED: "true",
    },
    stdio: "inherit",
  },
);
try {
  await eventually(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.ok, {
    timeoutMs: 300_000,
    intervalMs: 50,
  });
  const syncSeconds = (performance.now() - started) / 1000;
  const endpoints = await bus.bucket(Buckets.endpoints);
  const services = await bus.bucket(Buckets.services);
  const [storedServices, storedEndpoints] = [(await services.list()).length, (await endpoints.list()).length];

  // Churn: each update turns one endpoint of one service not-ready (a different one each round),
  // spread over every service, applied as fast as the fake API server takes them.
  const before = await endpointPuts();
  const churnStarted = performance.now();
  for (let u = 0; u < CHURN_UPDATES; u++) {
    const s = u % SERVICES;
    server.apply(slice(s, Math.floor(u / SERVICES) % PODS_PER_SERVICE));
    if (u % 100 === 99) await new Promise((resolve) => setImmediate(resolve));
  }
  const last = CHURN_UPDATES - 1;
  const lastKey = (await endpoints.list(`ns-${(last % SERVICES) % 20}.>`)).find((entry) =>
    entry.value.hostname.startsWith(`svc-${last % SERVICES}.`),
  )?.key;
  await eventually(
    async () => {
      const entry = lastKey ? await endpoints.get(lastKey) : undefined;
      const notReady = Math.floor(last / SERVICES) % PODS_PER_SERVICE;
      return (
        entry?.value.endpoints.find((e) => e.address === ip((last % SERVICES) * PODS_PER_SERVICE + notReady))
          ?.health === 2
      );
    },
    { timeoutMs: 300_000, intervalMs: 20 },
  );
  // Let the writer drain what is queued behind the last one.
  let puts = await endpointPuts();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = await endpointPuts();
    if (now === puts) break;
    puts = now;
  }
  const churnSeconds = (performance.now() - churnStarted) / 1000 - 0.2;
  const written = puts - before;

  console.log(
    `\nDiscovery benchmark, ${new Date().toISOString().slice(0, 10)}, ${cpus().length}× ${cpus()[0]?.model.trim()}, node ${process.version}\n`,
  );
  console.log("| scenario | input | result | seconds | rate |");
  console.log("|---|---|---|---|---|");
  console.log(
    `| initial sync (process start → /ready) | ${SERVICES} services, ${SERVICES * PODS_PER_SERVICE} pods, ${SERVICES} EndpointSlices | ${storedServices} services + ${storedEndpoints} endpoint shards in KV | ${syncSeconds.toFixed(1)} | ${Math.round((SERVICES * PODS_PER_SERVICE) / syncSeconds)} pods/s |`,
  );
  console.log(
    `| endpoint churn | ${CHURN_UPDATES} EndpointSlice updates over ${SERVICES} services | ${written} endpoint shards written | ${churnSeconds.toFixed(1)} | ${Math.round(written / churnSeconds)} endpoint updates/s written |`,
  );
} finally {
  discovery.kill("SIGTERM");
  await new Promise((resolve) => discovery.once("exit", resolve));
  await bus.close();
  await server.close();
  await nats.dispose();
}
