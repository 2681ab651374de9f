// Benchmark: CreateCertificate issuances per second and p99 latency with 1, 16
// and 64 concurrent callers, through TLS and the generated client, with a
// bootstrap token and an RSA 2048 CSR. Prints a Markdown table.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { startService } from "@sextant/runtime";
import { freePort, startNatsServer } from "@sextant/testing";
import { caService } from "../src/main.js";
import { caClient, createCertificate, workloadKey } from "../test/helpers.js";

const TOKEN = "bench-bootstrap-token-0123456789";
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 4_000);

const nats = await startNatsServer();
const work = mkdtempSync(join(tmpdir(), "sextant-ca-bench-"));
writeFileSync(
  join(work, "tokens.json"),
  JSON.stringify({ [TOKEN]: { namespace: "bench", serviceAccount: "load" } }),
);
const port = await freePort();
const ca = await startService(caService, {
  NATS_URL: nats.url,
  HTTP_PORT: "0",
  GRPC_PORT: String(port),
  LOG_LEVEL: "silent",
  OTEL_SDK_DISABLED: "true",
  CA_CERTS_DIR: join(work, "cacerts"),
  BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
  CA_AUTHENTICATORS: "bootstrap-token",
  // Every caller is one identity: the per-identity limit would measure itself.
  CA_RATE_LIMIT_PER_IDENTITY: "0",
});
const client = caClient(`localhost:${port}`, readFileSync(join(work, "cacerts", "root-cert.pem"), "utf8"));
const csr = (await workloadKey(2048)).csrPem;
for (let i = 0; i < 50; i++) await createCertificate(client, csr, { token: TOKEN }); // warm-up

const rows: string[] = [];
for (const concurrency of [1, 16, 64]) {
  const latencies: number[] = [];
  let failures = 0;
  const end = Date.now() + DURATION_MS;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const t = performance.now();
        const result = await createCertificate(client, csr, { token: TOKEN });
        if ("error" in result) failures++;
        else latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const p = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  rows.push(
    `| ${concurrency} | ${latencies.length} | ${(latencies.length / seconds).toFixed(0)} | ${p(0.5).toFixed(1)} | ${p(0.99).toFixed(1)} | ${failures} |`,
  );
}
client.close();
await ca.stop();
await nats.dispose();
console.log(
  `CreateCertificate over TLS, RSA 2048 CSR, RSA 2048 self-signed root, bootstrap-token auth, one client channel, ${DURATION_MS / 1000} s per row, ${availableParallelism()} CPUs, Node ${process.version}\n`,
);
console.log("| concurrent callers | issued | issuances/s | p50 ms | p99 ms | errors |");
console.log("|---|---|---|---|---|---|");
for (const row of rows) console.log(row);
