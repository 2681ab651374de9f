// `npm run demo`: starts a local Sextant control plane (nats-server and every
// service as its own process, in dependency order, each waiting for the
// previous one's /ready) and reports what is running. It shows only what
// exists: where a part of the mesh is not built yet, it says so.
//
//   npm run demo            run until Ctrl-C
//   npm run demo -- --once  start, check, stop (also the default when CI=true)
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
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
  "the demo's workloads are reviews v1-v3 and a productpage client; details and ratings, and workloads behind Envoy sidecars, are not in it (compose.yaml runs ratings behind Envoy)",
];

/**
 * The demo's mesh: one agent per workload (its identity from ca, its xDS
 * through push over mTLS), joined through WorkloadGroup auto-registration.
 * grpc-js-xds 1.14's XdsServer listens on its port on every interface, so
 * each reviews version has a port of its own, and so a WorkloadGroup of its
 * own (the group's template carries the port).
 */
const controlPort = 19180;
const reviewsVersions = ["v1", "v2", "v3"].map((version, index) => ({
  version,
  ip: `127.0.0.${11 + index}`,
  port: 19181 + index,
}));
const workloads = [
  ...reviewsVersions.map(({ version, ip, port }) => ({
    pod: `reviews-${version}-0`,
    role: "server",
    name: `reviews-${version}`,
    ip,
    port,
    serviceAccount: "bookinfo-reviews",
    group: `reviews-${version}`,
    labels: { app: "reviews", version },
  })),
  {
    pod: "productpage-v1-0",
    role: "client",
    name: "productpage",
    ip: "127.0.0.10",
    serviceAccount: "bookinfo-productpage",
    group: "productpage",
    labels: { app: "productpage", version: "v1" },
  },
].map((workload, index) => ({ ...workload, xdsProxyPort: 15110 + index, agentPort: 15120 + index }));

const REVIEWS_HOST = "reviews.default.svc.cluster.local";
const meshYaml = [
  `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [${REVIEWS_HOST}]
  addresses: [10.96.0.10]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: grpc, protocol: GRPC}]
  workloadSelector:
    labels: {app: reviews}
`,
  ...reviewsVersions.map(
    ({ version, port }) => `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: reviews-${version}, namespace: default}
spec:
  metadata:
    labels: {app: reviews, version: ${version}}
  template:
    ports: {grpc: ${port}}
    serviceAccount: bookinfo-reviews
`,
  ),
  `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: productpage, namespace: default}
spec:
  metadata:
    labels: {app: productpage, version: v1}
  template:
    serviceAccount: bookinfo-productpage
`,
  `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: STRICT}
`,
].join("---\n");

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

function start(name, command, args, env = {}, { quiet = false, logFile } = {}) {
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, OTEL_SDK_DISABLED: process.env.OTEL_SDK_DISABLED ?? "true", ...env },
    stdio: ["ignore", quiet ? "ignore" : "pipe", quiet ? "ignore" : "pipe"],
  });
  if (quiet || logFile) {
    // Logs go to a file (nats-server writes its own); `output` keeps them for readiness checks.
    child.output = "";
    if (logFile) {
      const log = createWriteStream(logFile);
      for (const stream of [child.stdout, child.stderr]) {
        stream.setEncoding("utf8");
        stream.on("data", (chunk) => {
          log.write(chunk);
          if (child.output.length < 100_000) child.output += chunk;
        });
      }
    }
    children.push({ name, child });
    child.on("exit", (code, signal) => {
      if (!stopping) {
        const where = logFile ? logFile.slice(root.length + 1) : `.sextant/${name}.log`;
        console.error(color(31, `${name} exited unexpectedly (${signal ?? code}); see ${where}`));
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
 * Runs the traffic walk-through (libs/bookinfo): it drives the productpage
 * workload over its control port while it applies the samples, and draws the
 * split productpage observes.
 * Resolves to its exit code: 0 when every step's observed split held.
 */
function runWalkthrough() {
  const samples = join(root, "..", "shared", "samples", "bookinfo", "networking");
  const args = [
    join(root, "libs", "bookinfo", "dist", "walkthrough.js"),
    "http://127.0.0.1:8080",
    `http://127.0.0.1:${controlPort}`,
    samples,
  ];
  if (once) args.push("--once");
  const child = spawn(process.execPath, args, { cwd: root, stdio: "inherit" });
  children.push({ name: "walkthrough", child });
  return new Promise((resolve) => child.once("exit", (code) => resolve(code ?? 1)));
}

/**
 * Registers the mesh (ServiceEntry, WorkloadGroups, PeerAuthentication STRICT)
 * through ingest, then starts each workload beside its own agent: the agent
 * gets the workload's certificate from ca and proxies its xDS to push over
 * mTLS; its node metadata names the WorkloadGroup, so discovery registers the
 * workload as a WorkloadEntry through ingest once it connects.
 */
async function startMesh() {
  // WorkloadEntries left by an earlier run (the JetStream store persists) would be stale endpoints.
  const stale = await (
    await fetch("http://127.0.0.1:8080/v1/config?kind=WorkloadEntry&namespace=default")
  ).json();
  for (const item of stale.items ?? [])
    await fetch(`http://127.0.0.1:8080/v1/config/WorkloadEntry/default/${item.metadata.name}`, {
      method: "DELETE",
    });
  // Bookinfo's destination-rule-all-mtls.yaml: ISTIO_MUTUAL from the clients, and the subsets. Applied
  // now so productpage's first connection gets it (the walk-through applies it again in its first step).
  const mtlsRule = join(
    root,
    "..",
    "shared",
    "samples",
    "bookinfo",
    "networking",
    "destination-rule-all-mtls.yaml",
  );
  const body = existsSync(mtlsRule) ? `${meshYaml}---\n${readFileSync(mtlsRule, "utf8")}` : meshYaml;
  const response = await fetch("http://127.0.0.1:8080/v1/apply", { method: "POST", body });
  if (!response.ok)
    throw new Error(`ingest refused the demo's mesh (${response.status}): ${await response.text()}`);
  console.log(
    `\n${color(1, "Bookinfo mesh")}: ServiceEntry reviews, WorkloadGroups reviews-v1/v2/v3 and productpage, PeerAuthentication STRICT (default), destination-rule-all-mtls.yaml`,
  );

  const agentsDir = join(stateDir, "agents");
  rmSync(agentsDir, { recursive: true, force: true });
  for (const workload of workloads) {
    const dir = join(agentsDir, workload.pod);
    mkdirSync(dir, { recursive: true });
    const grpcBootstrap = join(dir, "grpc-bootstrap.json");
    start(
      `agent ${workload.pod}`,
      process.execPath,
      [join("services", "agent", "dist", "main.js")],
      {
        CA_ADDR: "127.0.0.1:8060",
        XDS_ADDR: "127.0.0.1:15012",
        CA_ROOT_CERT: join(stateDir, "cacerts", "root-cert.pem"),
        TOKEN_FILE: join(stateDir, `${workload.serviceAccount}-token`),
        POD_NAME: workload.pod,
        POD_NAMESPACE: "default",
        SERVICE_ACCOUNT: workload.serviceAccount,
        INSTANCE_IP: workload.ip,
        ISTIO_METAJSON_LABELS: JSON.stringify(workload.labels),
        ISTIO_META_AUTO_REGISTER_GROUP: workload.group,
        XDS_PROXY_PORT: String(workload.xdsProxyPort),
        GRPC_XDS_BOOTSTRAP: grpcBootstrap,
        SDS_SOCKET: join(dir, "sds.sock"),
        XDS_SOCKET: join(dir, "xds.sock"),
        OUTPUT_CERTS: join(dir, "certs"),
        HTTP_PORT: String(workload.agentPort),
      },
      { logFile: join(dir, "agent.log") },
    );
    await waitReady(`agent of ${workload.pod}`, `http://127.0.0.1:${workload.agentPort}/ready`);
    const child = start(
      workload.name,
      process.execPath,
      [join("libs", "bookinfo", "dist", "mesh-workload.js")],
      {
        WORKLOAD_ROLE: workload.role,
        WORKLOAD_NAME: workload.name,
        WORKLOAD_ADDRESS: workload.port ? `${workload.ip}:${workload.port}` : "",
        CONTROL_PORT: String(workload.role === "client" ? controlPort : 0),
        GRPC_XDS_BOOTSTRAP: grpcBootstrap,
        GRPC_XDS_EXPERIMENTAL_RBAC: "true",
      },
      { logFile: join(dir, "workload.log") },
    );
    // A server serves once push sent its inbound listener (with its mTLS policy); a client once its control port listens.
    const ready = workload.role === "server" ? '"serving":true' : '"control"';
    const deadline = Date.now() + 30_000;
    while (!child.output.includes(ready)) {
      if (Date.now() > deadline)
        throw new Error(
          `${workload.name} did not start within 30 s; see .sextant/agents/${workload.pod}/workload.log`,
        );
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const where = workload.port
      ? `serves ${workload.ip}:${workload.port}`
      : `control port 127.0.0.1:${controlPort}`;
    console.log(
      `  ${color(32, "ready")}  ${workload.name.padEnd(12)} ${where.padEnd(30)} agent :${workload.agentPort} (spiffe://cluster.local/ns/default/sa/${workload.serviceAccount}), group ${workload.group}`,
    );
  }
  // A client opens its xDS stream with its first call: one call (whatever it answers) connects productpage.
  await fetch(
    `http://127.0.0.1:${controlPort}/caller?target=${encodeURIComponent(`xds:///${REVIEWS_HOST}:9080`)}`,
  ).catch(() => {});
  // Auto-registration: discovery wrote one WorkloadEntry per connected workload through ingest.
  const expected = workloads.map((w) => `${w.group}-${w.ip}`);
  let names = [];
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
    const { items = [] } = await (
      await fetch("http://127.0.0.1:8080/v1/config?kind=WorkloadEntry&namespace=default")
    ).json();
    names = items.map((item) => item.metadata.name);
    if (expected.every((name) => names.includes(name))) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  console.log(`  auto-registered through ingest: WorkloadEntry ${names.sort().join(", ") || "(none yet)"}`);
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
  for (const workload of workloads) {
    await assertPortFree(workload.xdsProxyPort, `agent of ${workload.pod} (xDS proxy)`);
    await assertPortFree(workload.agentPort, `agent of ${workload.pod} (/ready)`);
    if (workload.port) await assertPortFree(workload.port, `${workload.name} (gRPC)`);
  }
  await assertPortFree(controlPort, "productpage (control port)");

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
  // issues push's certificate (istio-system/sextant-push) for the first, and
  // each workload's (default/<account>) for its account's. New random tokens
  // each run, one file per account.
  const accounts = [
    { namespace: "istio-system", serviceAccount: "sextant-push", file: "push-token" },
    ...[...new Set(workloads.map((w) => w.serviceAccount))].map((serviceAccount) => ({
      namespace: "default",
      serviceAccount,
      file: `${serviceAccount}-token`,
    })),
  ];
  const tokens = {};
  for (const { namespace, serviceAccount, file } of accounts) {
    const token = randomBytes(24).toString("base64url");
    tokens[token] = { namespace, serviceAccount };
    writeFileSync(join(stateDir, file), token, { mode: 0o600 });
  }
  writeFileSync(join(stateDir, "bootstrap-tokens.json"), JSON.stringify(tokens), { mode: 0o600 });

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
  await startMesh();
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
