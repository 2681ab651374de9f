// `npm run demo`: starts a local Sextant control plane (nats-server and every
// service as its own process, in dependency order, each waiting for the
// previous one's /ready) and reports what is running. It shows only what
// exists: where a part of the mesh is not built yet, it says so.
//
//   npm run demo            run until Ctrl-C
//   npm run demo -- --once  start, check, stop (also the default when CI=true)
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const once = process.argv.includes("--once") || process.env.CI === "true";
const stateDir = join(root, ".sextant");
const natsPort = 4222;

/** Start order: each service starts once the previous ones are ready. */
const services = [
  { name: "ingest", port: 8080, role: "config API: validation and storage (sextant-config)" },
  { name: "discovery", port: 15015, role: "service registry (sextant-services, sextant-endpoints)" },
  { name: "ca", port: 15016, role: "workload certificates over TLS on 8060 (sextant-trust)" },
  { name: "push", port: 15014, role: "xDS server: ADS on 15010 (plaintext) and 15012 (mTLS, for agents)" },
  { name: "webhook", port: 15018, role: "sidecar injection and config validation" },
];

/** What the services do not do yet, said plainly rather than faked. */
const notBuiltYet = [
  "webhook serves /inject and /validate on 15017 only when given TLS files (TLS_CERT_FILE, TLS_KEY_FILE); the demo has no Kubernetes to call it",
  "push serves proxyless gRPC clients; Envoy sidecars come later",
  "the demo workloads run without agents, so their traffic is plaintext (agents, mTLS and authorization are tested end to end in test-e2e/test/security.test.ts)",
];

const children = [];
const color = (code, text) => (process.stdout.isTTY ? `\x1b[${code}m${text}\x1b[0m` : text);

async function assertPortFree(port, owner) {
  await new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", () =>
      reject(
        new Error(`port ${port} (${owner}) is already in use: stop whatever listens there and try again`),
      ),
    );
    probe.listen(port, "0.0.0.0", () => probe.close(resolve));
  });
}

function start(name, command, args, env = {}, { quiet = false } = {}) {
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, OTEL_SDK_DISABLED: process.env.OTEL_SDK_DISABLED ?? "true", ...env },
    stdio: ["ignore", quiet ? "ignore" : "pipe", quiet ? "ignore" : "pipe"],
  });
  if (quiet) {
    children.push({ name, child });
    child.on("exit", (code, signal) => {
      if (!stopping) {
        console.error(color(31, `${name} exited unexpectedly (${signal ?? code}); see .sextant/${name}.log`));
        void stop(1);
      }
    });
    return child;
  }
  const prefix = color(36, `${name.padEnd(9)}|`);
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = "";
    stream.setEncoding("utf8");
    stream.on("data", (chunk) => {
      buffered += chunk;
      const lines = buffered.split("\n");
      buffered = lines.pop();
      for (const line of lines) if (line.trim()) process.stdout.write(`${prefix} ${summarize(line)}\n`);
    });
  }
  child.on("exit", (code, signal) => {
    if (!stopping) {
      console.error(color(31, `${name} exited unexpectedly (${signal ?? code}); stopping the demo`));
      void stop(1);
    }
  });
  children.push({ name, child });
  return child;
}

/** Shortens a JSON log line to "level msg"; other lines pass through. */
function summarize(line) {
  try {
    const { level, msg, ...rest } = JSON.parse(line);
    delete rest.time;
    delete rest.service;
    delete rest.pid;
    delete rest.hostname;
    const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : "";
    return `${level.padEnd(5)} ${msg}${extra}`;
  } catch {
    return line;
  }
}

async function waitReady(name, url, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url);
      if (response.ok) return;
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${name} did not report ready at ${url} within ${timeoutMs / 1000} s`);
}

async function waitNats(port, timeoutMs = 15_000) {
  const { connect } = await import("node:net");
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.once("data", (data) => {
        socket.destroy();
        resolve(data.toString().startsWith("INFO"));
      });
      socket.once("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nats-server did not accept connections on ${port}`);
}

/**
 * Applies Istio's own Bookinfo networking samples through ingest's API, as a
 * user would, and shows what ingest answered and what its analysis found.
 */
async function applyBookinfoSamples() {
  const dir = join(root, "..", "shared", "samples", "bookinfo", "networking");
  if (!existsSync(dir)) {
    console.log(`\n(${dir} not found: skipping the Bookinfo samples)`);
    return;
  }
  console.log(
    `\n${color(1, "Applying Istio's Bookinfo samples through ingest")} (POST localhost:8080/v1/apply)`,
  );
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()) {
    const response = await fetch("http://127.0.0.1:8080/v1/apply", {
      method: "POST",
      body: readFileSync(join(dir, file)),
    });
    const body = await response.json();
    const results = response.ok
      ? body.resources.map((r) => `${r.kind}/${r.name} ${r.result} (gen ${r.generation})`).join(", ")
      : body.error;
    console.log(
      `  ${response.ok ? color(32, String(response.status)) : color(31, String(response.status))} ${file.padEnd(42)} ${results}`,
    );
  }
  // Analysis runs after each burst of changes settles: wait until its answer stops changing.
  let analysis = { messages: [] };
  for (let previous = -1, deadline = Date.now() + 5_000; Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 300));
    analysis = await (await fetch("http://127.0.0.1:8080/v1/analyze")).json();
    if (analysis.messages.length === previous && previous > 0) break;
    previous = analysis.messages.length;
  }
  console.log(
    `\n${color(1, "Analysis")} (GET localhost:8080/v1/analyze): ${analysis.messages.length} messages`,
  );
  for (const m of analysis.messages.slice(0, 8))
    console.log(`  ${m.code} ${m.level.padEnd(7)} ${m.kind}/${m.name} ${m.field}: ${m.message}`);
  if (analysis.messages.length > 8) console.log(`  ... and ${analysis.messages.length - 8} more`);
}

/**
 * Runs the traffic walk-through (libs/bookinfo): real gRPC backends and a
 * real @grpc/grpc-js-xds client routed by push as the samples change.
 * Resolves to its exit code: 0 when every step's observed split held.
 */
function runWalkthrough() {
  const samples = join(root, "..", "shared", "samples", "bookinfo", "networking");
  const args = [
    join(root, "libs", "bookinfo", "dist", "walkthrough.js"),
    "http://127.0.0.1:8080",
    "127.0.0.1:15010",
    samples,
  ];
  if (once) args.push("--once");
  const child = spawn(process.execPath, args, { cwd: root, stdio: "inherit" });
  children.push({ name: "walkthrough", child });
  return new Promise((resolve) => child.once("exit", (code) => resolve(code ?? 1)));
}

let stopping = false;
async function stop(code) {
  if (stopping) return;
  stopping = true;
  for (const { child } of [...children].reverse()) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    }
  }
  process.exit(code);
}
process.on("SIGINT", () => void stop(0));
process.on("SIGTERM", () => void stop(0));

try {
  await assertPortFree(natsPort, "nats-server");
  for (const service of services) await assertPortFree(service.port, service.name);
  await assertPortFree(15010, "push (xDS)");
  await assertPortFree(15012, "push (xDS over mTLS)");
  await assertPortFree(8060, "ca (CreateCertificate)");

  mkdirSync(join(stateDir, "nats"), { recursive: true });
  // nats-server logs every start-up detail; keep them in a file, not on screen.
  start(
    "nats",
    "nats-server",
    [
      "-js",
      "-a",
      "127.0.0.1",
      "-p",
      String(natsPort),
      "-sd",
      join(stateDir, "nats"),
      "-l",
      join(stateDir, "nats.log"),
    ],
    {},
    { quiet: true },
  );
  await waitNats(natsPort);
  console.log(color(32, `nats-server ready on ${natsPort} (JetStream store in .sextant/nats)`));

  // Bootstrap tokens stand in for Kubernetes service-account tokens: ca
  // issues push's certificate (istio-system/sextant-push) for this one. A new
  // random token each run.
  const pushToken = randomBytes(24).toString("base64url");
  writeFileSync(
    join(stateDir, "bootstrap-tokens.json"),
    JSON.stringify({ [pushToken]: { namespace: "istio-system", serviceAccount: "sextant-push" } }),
    { mode: 0o600 },
  );
  writeFileSync(join(stateDir, "push-token"), pushToken, { mode: 0o600 });

  for (const service of services) {
    start(service.name, process.execPath, [join("services", service.name, "dist", "main.js")], {
      NATS_URL: `nats://127.0.0.1:${natsPort}`,
      HTTP_PORT: String(service.port),
      // The CA keeps its root in Istio's cacerts layout; the demo's lives with its NATS store.
      CA_CERTS_DIR: join(stateDir, "cacerts"),
      BOOTSTRAP_TOKENS_FILE: join(stateDir, "bootstrap-tokens.json"),
      // Push asks ca for its certificate, trusting the root ca wrote.
      CA_ROOT_CERT: join(stateDir, "cacerts", "root-cert.pem"),
      TOKEN_FILE: join(stateDir, "push-token"),
      // Discovery creates auto-registered WorkloadEntries through ingest's API.
      INGEST_URL: "http://127.0.0.1:8080",
    });
    await waitReady(service.name, `http://127.0.0.1:${service.port}/ready`);
  }

  console.log(`\n${color(1, "Sextant control plane")}`);
  for (const service of services) {
    const ready = await fetch(`http://127.0.0.1:${service.port}/ready`).then(
      (r) => r.ok,
      () => false,
    );
    console.log(
      `  ${ready ? color(32, "ready") : color(31, "DOWN ")}  ${service.name.padEnd(10)} :${service.port}  ${service.role}`,
    );
  }
  await applyBookinfoSamples();
  const walkthrough = await runWalkthrough();

  console.log(`\n${color(33, "Not built yet")} (see the open issues):`);
  for (const line of notBuiltYet) console.log(`  - ${line}`);

  if (once) {
    console.log(
      `\nEvery service reported ready; the walk-through ${walkthrough === 0 ? "held" : "FAILED"}; stopping (--once).`,
    );
    await stop(walkthrough);
  } else {
    console.log("\nRunning. Metrics: curl localhost:15014/metrics. Press Ctrl-C to stop.");
  }
} catch (error) {
  console.error(color(31, `demo failed: ${error.message}`));
  await stop(1);
}
