// Admission benchmark: p50/p99 latency of /inject (a Bookinfo pod) and
// /validate (a VirtualService) at 50 concurrent requests, against the
// webhook running as its own process over HTTPS. Prints a Markdown table.
//
//   pnpm --filter @sextant/webhook bench
import { request } from "node:https";
import { cpus } from "node:os";
import { freePort, startNatsServer, startServiceProcess } from "@sextant/testing";
import { bookinfoDeployments, podCreateReview } from "../test/bookinfo.js";
import { selfSignedCert } from "../test/helpers.js";

const CONCURRENCY = 50;
const REQUESTS = 4_000;

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

const validateReview = JSON.stringify({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid: "bench",
    kind: { group: "networking.istio.io", version: "v1", kind: "VirtualService" },
    resource: { group: "networking.istio.io", version: "v1", resource: "virtualservices" },
    namespace: "default",
    operation: "CREATE",
    object: {
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "reviews", namespace: "default" },
      spec: {
        hosts: ["reviews"],
        http: [
          {
            route: [
              { destination: { host: "reviews", subset: "v1" }, weight: 90 },
              { destination: { host: "reviews", subset: "v2" }, weight: 10 },
            ],
          },
        ],
      },
    },
  },
});

async function measure(port: number, path: string, body: string, ca: string) {
  const latencies: number[] = [];
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (sent < REQUESTS) {
        sent++;
        const t0 = performance.now();
        await new Promise<void>((resolve, reject) => {
          const req = request(
            {
              host: "127.0.0.1",
              port,
              path,
              method: "POST",
              ca,
              servername: "localhost",
              headers: { "content-type": "application/json" },
            },
            (response) => {
              response.resume();
              response.on("end", () =>
                response.statusCode === 200 ? resolve() : reject(new Error(`status ${response.statusCode}`)),
              );
            },
          );
          req.on("error", reject);
          req.end(body);
        });
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), rate: REQUESTS / seconds };
}

const nats = await startNatsServer();
const tls = selfSignedCert();
const httpsPort = await freePort();
const webhook = await startServiceProcess("webhook", {
  NATS_URL: nats.url,
  HTTPS_PORT: String(httpsPort),
  TLS_CERT_FILE: tls.certFile,
  TLS_KEY_FILE: tls.keyFile,
  LOG_LEVEL: "warn",
});
try {
  const deployment =
    bookinfoDeployments().find((d) => d.metadata.name.startsWith("reviews")) ?? bookinfoDeployments()[0]!;
  const injectBody = JSON.stringify(podCreateReview(deployment));
  const rows: string[] = [];
  for (const [name, path, body] of [
    ["/inject (Bookinfo reviews pod)", "/inject", injectBody],
    ["/validate (VirtualService)", "/validate", validateReview],
  ] as const) {
    await measure(httpsPort, path, body, tls.cert); // warm-up
    const { p50, p99, rate } = await measure(httpsPort, path, body, tls.cert);
    rows.push(
      `| ${name} | ${CONCURRENCY} | ${REQUESTS} | ${Math.round(rate)} | ${p50.toFixed(1)} | ${p99.toFixed(1)} |`,
    );
  }
  console.log(
    `\nWebhook admission benchmark, ${new Date().toISOString().slice(0, 10)}, ${cpus().length}× ${cpus()[0]?.model.trim()}, node ${process.version}\n`,
  );
  console.log("| request | concurrency | requests | requests/s | p50 ms | p99 ms |");
  console.log("|---|---|---|---|---|---|");
  for (const row of rows) console.log(row);
} finally {
  await webhook.stop();
  await nats.dispose();
}
