// The local control plane shared by `npm run demo` and `pnpm dev`: nats-server
// with its JetStream store in .sextant/ (gitignored), then ingest, discovery,
// ca, push and webhook, each started only once the previous one reports
// /ready, on the local ports libs/runtime's DEFAULT_PORTS gives. Ingest's API
// asks for a bearer token (API_AUTH=tokens): the local user's admin token and
// discovery's are kept in .sextant/ too.
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { assertPortFree, waitNats, waitReady } from "./runner.mjs";

/** The repository's root. */
export const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** Where local state lives: the JetStream store, the CA's root, tokens, logs (gitignored). */
export const stateDir = join(root, ".sextant");

const portsModule = join(root, "libs", "runtime", "dist", "ports.js");
if (!existsSync(portsModule)) {
  console.error(
    `${portsModule} is missing: build first (bash scripts/bootstrap.sh, or pnpm exec turbo run build)`,
  );
  process.exit(1);
}
/** libs/runtime's DEFAULT_PORTS: the one list of local ports. */
export const { DEFAULT_PORTS } = await import(portsModule);
const P = DEFAULT_PORTS;

/** nats-server's client port. */
export const natsPort = P.nats;

/** Start order: each service starts once the previous ones are ready. `port` serves /ready. */
export const services = [
  { name: "ingest", port: P.ingest.http, role: "config API: validation and storage (sextant-config)" },
  {
    name: "discovery",
    port: P.discovery.http,
    role: "service registry (sextant-services, sextant-endpoints)",
  },
  { name: "ca", port: P.ca.http, role: `workload certificates over TLS on ${P.ca.grpc} (sextant-trust)` },
  {
    name: "push",
    port: P.push.http,
    role: `xDS server: ADS on ${P.push.xds} (plaintext) and ${P.push.xdsTls} (mTLS, for agents)`,
  },
  { name: "webhook", port: P.webhook.http, role: "sidecar injection and config validation" },
];

/** Every port the control plane listens on, with who listens there, in the order they are checked. */
export const controlPlanePorts = [
  { port: natsPort, owner: "nats-server" },
  ...services.map(({ name, port }) => ({ port, owner: name })),
  { port: P.push.xds, owner: "push (xDS)" },
  { port: P.push.xdsTls, owner: "push (xDS over mTLS)" },
  { port: P.ca.grpc, owner: "ca (CreateCertificate)" },
];

/** Fails, naming the port and the service, if any control-plane port is taken. */
export async function assertControlPlanePortsFree() {
  for (const { port, owner } of controlPlanePorts) await assertPortFree(port, owner);
}

/**
 * Writes new random bootstrap tokens, which stand in for Kubernetes
 * service-account tokens: ca issues push's certificate
 * (istio-system/sextant-push) for push-token, and each workload's
 * (default/<account>) for <account>-token. One file per account, and the
 * map ca reads (bootstrap-tokens.json).
 */
export function writeBootstrapTokens(workloadAccounts = []) {
  const accounts = [
    { namespace: "istio-system", serviceAccount: "sextant-push", file: "push-token" },
    ...[...new Set(workloadAccounts)].map((serviceAccount) => ({
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
}

/** Reads the token of file, or writes a new one (32 random bytes, hex) readable by the user alone. */
function tokenIn(file) {
  if (existsSync(file)) {
    const token = readFileSync(file, "utf8").trim();
    if (token) {
      // An earlier run, or the user, may have loosened it: a token file is the user's alone.
      chmodSync(file, 0o600);
      return { token, created: false };
    }
  }
  const token = randomBytes(32).toString("hex");
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return { token, created: true };
}

/**
 * The credentials for ingest's API (`/v1/*`), which ingest checks against
 * its token file (API_AUTH=tokens): an admin token for the local user
 * (.sextant/api-admin-token, allowed everything), created on the first start
 * and reused afterwards, and discovery's (.sextant/discovery-ingest-token:
 * create and delete of WorkloadEntries, for auto-registration, nothing
 * else). The token file (.sextant/api-tokens.yaml) holds their sha256 only
 * and is rewritten on every start from the token files, so a token deleted
 * by the user is replaced rather than left valid. `created`: whether the
 * admin token is new (the scripts say where it is then, once).
 */
export function ensureApiTokens() {
  mkdirSync(stateDir, { recursive: true });
  const adminTokenFile = join(stateDir, "api-admin-token");
  const discoveryTokenFile = join(stateDir, "discovery-ingest-token");
  const tokensFile = join(stateDir, "api-tokens.yaml");
  const admin = tokenIn(adminTokenFile);
  const discovery = tokenIn(discoveryTokenFile);
  const sha256 = (token) => createHash("sha256").update(token).digest("hex");
  writeFileSync(
    tokensFile,
    `# ingest's API_TOKENS_FILE, written by scripts/lib/control-plane.mjs on every start.
- subject: local-admin
  token_sha256: ${sha256(admin.token)}
  namespaces: ["*"]
  verbs: ["*"]
  kinds: ["*"]
- subject: discovery
  token_sha256: ${sha256(discovery.token)}
  namespaces: ["*"]
  verbs: [create, delete]
  kinds: [WorkloadEntry]
`,
    { mode: 0o600 },
  );
  return {
    adminToken: admin.token,
    adminTokenFile,
    discoveryTokenFile,
    tokensFile,
    created: admin.created,
  };
}

/**
 * What the scripts print when they create the admin token, and only then:
 * where it is and how to use it. The token itself is never printed, so that
 * it stays out of terminal scrollback and CI logs.
 */
export function tokenNotice(file) {
  const path = relative(process.cwd(), file);
  return [
    `Created an admin token for ingest's API in ${path} (mode 0600; later starts reuse it). Use it as:`,
    `  curl -H "Authorization: Bearer $(cat ${path})" localhost:8080/v1/config`,
  ].join("\n");
}

/** The environment each service gets beyond the shared one: ingest checks tokens, discovery shows its own. */
function serviceEnv(name, apiTokens) {
  if (name === "ingest") return { API_AUTH: "tokens", API_TOKENS_FILE: apiTokens.tokensFile };
  if (name === "discovery") return { INGEST_TOKEN_FILE: apiTokens.discoveryTokenFile };
  // Push's /debug/* asks for a token allowed the `debug` verb: the local admin's (the demo's gateway view reads config_dump).
  if (name === "push") return { API_AUTH: "tokens", API_TOKENS_FILE: apiTokens.tokensFile };
  return {};
}

/**
 * Starts nats-server and the five services with runner, in dependency order,
 * and resolves once webhook, the last, reports ready.
 *
 * - logsDir: when set, each process's output goes to <logsDir>/<name>.log;
 *   otherwise nats-server writes .sextant/nats.log and the services' logs are
 *   printed, prefixed.
 * - workloadAccounts: service accounts to mint bootstrap tokens for, besides push's.
 * - apiTokens: ensureApiTokens()'s answer, when the caller already has it.
 * - onStarting(name, port, child) and onReady(name, port): progress callbacks.
 */
export async function startControlPlane(
  runner,
  { logsDir, workloadAccounts = [], apiTokens = ensureApiTokens(), onStarting, onReady } = {},
) {
  mkdirSync(join(stateDir, "nats"), { recursive: true });
  if (logsDir) mkdirSync(logsDir, { recursive: true });
  const natsArgs = ["-js", "-a", "127.0.0.1", "-p", String(natsPort), "-sd", join(stateDir, "nats")];
  // nats-server logs every start-up detail: keep them in a file, not on screen.
  const nats = logsDir
    ? runner.start(
        "nats",
        "nats-server",
        natsArgs,
        {},
        { logFile: join(logsDir, "nats.log"), port: natsPort },
      )
    : runner.start(
        "nats",
        "nats-server",
        [...natsArgs, "-l", join(stateDir, "nats.log")],
        {},
        { logFile: join(stateDir, "nats.log"), ownLog: true, port: natsPort },
      );
  onStarting?.("nats", natsPort, nats);
  await waitNats(natsPort);
  onReady?.("nats", natsPort);

  writeBootstrapTokens(workloadAccounts);

  for (const service of services) {
    const child = runner.start(
      service.name,
      process.execPath,
      [join(root, "services", service.name, "dist", "main.js")],
      {
        NATS_URL: `nats://127.0.0.1:${natsPort}`,
        HTTP_PORT: String(service.port),
        // The CA keeps its root in Istio's cacerts layout; the local one lives with the NATS store.
        CA_CERTS_DIR: join(stateDir, "cacerts"),
        BOOTSTRAP_TOKENS_FILE: join(stateDir, "bootstrap-tokens.json"),
        // Push asks ca for its certificate, trusting the root ca wrote.
        CA_ROOT_CERT: join(stateDir, "cacerts", "root-cert.pem"),
        TOKEN_FILE: join(stateDir, "push-token"),
        // Push serves plaintext ADS too (off by default) for proxyless clients without an agent.
        XDS_PLAINTEXT_ENABLED: "true",
        // Discovery creates auto-registered WorkloadEntries through ingest's API.
        INGEST_URL: `http://127.0.0.1:${P.ingest.http}`,
        ...serviceEnv(service.name, apiTokens),
      },
      { logFile: logsDir ? join(logsDir, `${service.name}.log`) : undefined, port: service.port },
    );
    onStarting?.(service.name, service.port, child);
    await waitReady(service.name, `http://127.0.0.1:${service.port}/ready`);
    onReady?.(service.name, service.port);
  }
}
