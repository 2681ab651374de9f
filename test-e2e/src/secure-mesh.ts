import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import {
  captureOutput,
  freePort,
  type NatsServerFixture,
  repositoryRoot,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { awaitWorkload, type WorkloadControl } from "./workload-control.js";

/** A mesh identity: namespace and service account. */
export interface Account {
  namespace: string;
  serviceAccount: string;
}

/**
 * The whole control plane with security on, as real processes: nats-server,
 * ca, ingest, discovery and push (with its mTLS port). Workloads join with
 * an agent each. Bootstrap tokens stand in for Kubernetes service-account
 * tokens (no API server runs here); ca reads them at start, so every account
 * a test needs is declared up front.
 */
export interface SecureMesh {
  /** The mesh's own nats-server; undefined with SecureMeshOptions.natsUrl. */
  readonly nats: NatsServerFixture | undefined;
  readonly bus: Bus;
  readonly ca: ServiceProcess;
  readonly ingest: ServiceProcess;
  readonly discovery: ServiceProcess;
  readonly push: ServiceProcess;
  /** Every push replica (pushReplicas); `push` is the first. */
  readonly pushes: ServiceProcess[];
  /** Every discovery replica (discoveryReplicas); `discovery` is the first. */
  readonly discoveries: ServiceProcess[];
  /** Started with SecureMeshOptions.webhookTls. */
  readonly webhook: ServiceProcess | undefined;
  /** The root ca wrote; agents verify ca with it. */
  readonly caRootFile: string;
  readonly caAddress: string;
  readonly xdsTlsAddress: string;
  /** The mTLS ADS address of each push replica; `xdsTlsAddress` is the first. */
  readonly xdsTlsAddresses: string[];
  /** Push's plaintext ADS address, when started with plaintextXds. */
  readonly xdsAddress: string | undefined;
  /** A file holding the bootstrap token of an account (declared in startSecureMesh). */
  tokenFile(account: Account): string;
  apply(yaml: string): Promise<void>;
  /**
   * Starts a control-plane process that was killed again, with the same
   * environment and ports, and puts it in the old one's place (ca, ingest,
   * pushes[i], ...).
   */
  restart(process: ServiceProcess): Promise<ServiceProcess>;
  startAgent(options: AgentOptions): Promise<Agent>;
  startWorkload(options: WorkloadOptions): Promise<Workload>;
  close(): Promise<void>;
}

/** One agent, for one workload. */
export interface AgentOptions {
  pod: string;
  account: Account;
  /** The account whose token the agent presents (default: its own); another makes a mismatched identity. */
  tokenOf?: Account;
  ip: string;
  labels: Record<string, string>;
  /**
   * Configure the agent as the webhook's template does: labels only in the
   * downward-API labels file, push's address only in PROXY_CONFIG. By
   * default, ISTIO_METAJSON_LABELS and XDS_ADDR.
   */
  asInjected?: boolean;
  /** SECRET_TTL, e.g. "60s". */
  secretTtl?: string;
  /** The push replica the agent connects to (default 0). */
  pushReplica?: number;
  /** More agent environment (ISTIO_META_*, DNS_PROXY_ADDR, ...). */
  env?: Record<string, string>;
}

/**
 * The agent of version `version` of app `app`, as Bookinfo's deployments
 * name their pods: pod <app>-<version>-0, labelled with app and version.
 */
export function versionedAgent(app: string, version: string, account: Account, ip: string): AgentOptions {
  return { pod: `${app}-${version}-0`, account, ip, labels: { app, version } };
}

export interface Agent {
  readonly process: ServiceProcess;
  readonly dir: string;
  /** The gRPC bootstrap the agent wrote, for GRPC_XDS_BOOTSTRAP. */
  readonly grpcBootstrap: string;
  /** 127.0.0.1:<port> of the agent's xDS proxy for proxyless apps. */
  readonly xdsProxyAddress: string;
  readonly sdsSocket: string;
  readonly certDir: string;
  stop(): Promise<void>;
}

export interface WorkloadOptions {
  role: "server" | "client";
  name: string;
  agent: Agent;
  /** server: ip:port to serve on. */
  address?: string;
}

/** A mesh workload; a client's calls go through its control port (WorkloadControl). */
export interface Workload extends WorkloadControl {
  readonly child: ChildProcess;
  /** client: the HTTP control port. */
  readonly controlPort: number;
  output(): string;
  stop(): Promise<void>;
}

const key = (account: Account) => `${account.namespace}/${account.serviceAccount}`;

/** Options of {@link startSecureMesh}. */
export interface SecureMeshOptions {
  /** Also serve plaintext ADS (XDS_PLAINTEXT_ENABLED), off as in production unless a test needs it. */
  plaintextXds?: boolean;
  /** Push replicas, each with its own ports, sharing NATS (default 1). */
  pushReplicas?: number;
  /** More discovery environment (KUBERNETES, KUBECONFIG for a fake kube-apiserver). */
  discoveryEnv?: Record<string, string>;
  /** Discovery replicas competing for the lease (default 1). */
  discoveryReplicas?: number;
  /** An external NATS (a cluster's URLs, comma-separated) instead of a nats-server of the mesh's own. */
  natsUrl?: string;
  /** The NATS URL push replica `replica` connects to (a proxy that can cut it); by default the mesh's. */
  pushNatsUrl?: (replica: number) => string;
  /** More environment for every control-plane service (NATS_KV_REPLICAS for a cluster). */
  serviceEnv?: Record<string, string>;
  /** Also start webhook, serving /inject and /validate with these files. */
  webhookTls?: { certFile: string; keyFile: string };
}

export async function startSecureMesh(
  accounts: Account[],
  options: SecureMeshOptions = {},
): Promise<SecureMesh> {
  const dir = mkdtempSync(join(tmpdir(), "sextant-secure-mesh-"));
  const tokens = new Map<string, string>();
  const tokenFiles = new Map<string, string>();
  const pushAccount = { namespace: "istio-system", serviceAccount: "sextant-push" };
  for (const account of [pushAccount, ...accounts]) {
    const token = randomBytes(24).toString("base64url");
    tokens.set(token, key(account));
    const file = join(dir, "tokens", `${account.namespace}.${account.serviceAccount}`);
    mkdirSync(join(dir, "tokens"), { recursive: true });
    writeFileSync(file, token, { mode: 0o600 });
    tokenFiles.set(key(account), file);
  }
  writeFileSync(
    join(dir, "bootstrap-tokens.json"),
    JSON.stringify(
      Object.fromEntries(
        [...tokens].map(([token, account]) => {
          const [namespace, serviceAccount] = account.split("/");
          return [token, { namespace, serviceAccount }];
        }),
      ),
    ),
  );
  const tokenFile = (account: Account) => {
    const file = tokenFiles.get(key(account));
    if (!file) throw new Error(`no token declared for ${key(account)}`);
    return file;
  };

  const nats = options.natsUrl === undefined ? await startNatsServer() : undefined;
  const natsUrl = options.natsUrl ?? (nats as NatsServerFixture).url;
  const bus = await connectBus({
    url: natsUrl,
    name: "e2e",
    logger: createLogger({ service: "e2e", level: "silent" }),
  });
  // Each process keeps its environment, HTTP_PORT included, so that restart() brings it back as it was.
  const environments = new Map<ServiceProcess, Record<string, string>>();
  const launch = async (name: string, env: Record<string, string>) => {
    const full = { HTTP_PORT: String(await freePort()), ...options.serviceEnv, ...env };
    const started = await startServiceProcess(name, full);
    environments.set(started, full);
    return started;
  };
  const caPort = await freePort();
  const caCertsDir = join(dir, "cacerts");
  let ca = await launch("ca", {
    NATS_URL: natsUrl,
    GRPC_PORT: String(caPort),
    CA_CERTS_DIR: caCertsDir,
    BOOTSTRAP_TOKENS_FILE: join(dir, "bootstrap-tokens.json"),
  });
  const caRootFile = join(caCertsDir, "root-cert.pem");
  const caAddress = `127.0.0.1:${caPort}`;
  // The mesh's security under test is the data plane's; the config API is open (test/auth.test.ts of ingest tests it).
  let ingest = await launch("ingest", { NATS_URL: natsUrl, API_AUTH: "none" });
  const discoveries: ServiceProcess[] = [];
  for (let replica = 0; replica < (options.discoveryReplicas ?? 1); replica++)
    discoveries.push(
      await launch("discovery", {
        NATS_URL: natsUrl,
        INGEST_URL: `http://127.0.0.1:${ingest.httpPort}`,
        REPLICA_ID: `discovery-${replica}`,
        ...options.discoveryEnv,
      }),
    );
  let webhook = options.webhookTls
    ? await launch("webhook", {
        NATS_URL: natsUrl,
        HTTPS_PORT: String(await freePort()),
        TLS_CERT_FILE: options.webhookTls.certFile,
        TLS_KEY_FILE: options.webhookTls.keyFile,
      })
    : undefined;
  const pushes: ServiceProcess[] = [];
  const xdsTlsPorts: number[] = [];
  const xdsPorts: number[] = [];
  for (let replica = 0; replica < (options.pushReplicas ?? 1); replica++) {
    const xdsTlsPort = await freePort();
    const xdsPort = await freePort();
    xdsTlsPorts.push(xdsTlsPort);
    xdsPorts.push(xdsPort);
    pushes.push(
      await launch("push", {
        NATS_URL: options.pushNatsUrl?.(replica) ?? natsUrl,
        XDS_PLAINTEXT_ENABLED: String(options.plaintextXds ?? false),
        XDS_PORT: String(xdsPort),
        XDS_TLS_PORT: String(xdsTlsPort),
        CA_ADDR: caAddress,
        CA_ROOT_CERT: caRootFile,
        TOKEN_FILE: tokenFile(pushAccount),
        PUSH_DEBOUNCE_AFTER: "50",
        REPLICA_ID: `push-${replica}`,
      }),
    );
  }
  const [xdsTlsPort] = xdsTlsPorts;
  const [xdsPort] = xdsPorts;

  const agents: Agent[] = [];
  const workloads: Workload[] = [];

  return {
    nats,
    bus,
    get ca() {
      return ca;
    },
    get ingest() {
      return ingest;
    },
    get discovery() {
      return discoveries[0]!;
    },
    get push() {
      return pushes[0]!;
    },
    pushes,
    discoveries,
    get webhook() {
      return webhook;
    },
    caRootFile,
    caAddress,
    xdsTlsAddress: `127.0.0.1:${xdsTlsPort}`,
    xdsTlsAddresses: xdsTlsPorts.map((port) => `127.0.0.1:${port}`),
    xdsAddress: options.plaintextXds ? `127.0.0.1:${xdsPort}` : undefined,
    tokenFile,
    async apply(yaml) {
      const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
        method: "POST",
        body: yaml,
      });
      assert.equal(response.status, 200, await response.text());
    },
    async restart(old) {
      const env = environments.get(old);
      if (!env) throw new Error(`${old.name} is not a process of this mesh`);
      await old.kill("SIGKILL");
      const started = await startServiceProcess(old.name, env);
      environments.set(started, env);
      if (old === ca) ca = started;
      if (old === ingest) ingest = started;
      if (old === webhook) webhook = started;
      for (const replicas of [pushes, discoveries]) {
        const index = replicas.indexOf(old);
        if (index >= 0) replicas[index] = started;
      }
      return started;
    },
    async startAgent(options) {
      const agentDir = mkdtempSync(join(dir, `agent-${options.pod}-`));
      const xdsProxyPort = await freePort();
      const grpcBootstrap = join(agentDir, "grpc-bootstrap.json");
      const sdsSocket = join(agentDir, "sds.sock");
      const certDir = join(agentDir, "certs");
      // The kubelet's downward-API format: one key="value" line each, Go-quoted (JSON's quoting is a subset).
      const labelsFile = join(agentDir, "labels");
      const pushAddress = `127.0.0.1:${xdsTlsPorts[options.pushReplica ?? 0]}`;
      if (options.asInjected)
        writeFileSync(
          labelsFile,
          Object.entries(options.labels)
            .map(([key, value]) => `${key}=${JSON.stringify(value)}`)
            .join("\n"),
        );
      const process = await startServiceProcess("agent", {
        CA_ADDR: caAddress,
        ...(options.asInjected
          ? { PROXY_CONFIG: JSON.stringify({ discoveryAddress: pushAddress }) }
          : { XDS_ADDR: pushAddress }),
        CA_ROOT_CERT: caRootFile,
        TOKEN_FILE: tokenFile(options.tokenOf ?? options.account),
        POD_NAME: options.pod,
        POD_NAMESPACE: options.account.namespace,
        SERVICE_ACCOUNT: options.account.serviceAccount,
        INSTANCE_IP: options.ip,
        ...(options.asInjected ? {} : { ISTIO_METAJSON_LABELS: JSON.stringify(options.labels) }),
        POD_LABELS_FILE: labelsFile,
        POD_ANNOTATIONS_FILE: join(agentDir, "annotations"),
        SECRET_TTL: options.secretTtl ?? "24h",
        XDS_PROXY_PORT: String(xdsProxyPort),
        GRPC_XDS_BOOTSTRAP: grpcBootstrap,
        SDS_SOCKET: sdsSocket,
        XDS_SOCKET: join(agentDir, "xds.sock"),
        OUTPUT_CERTS: certDir,
        ...options.env,
      });
      const agent: Agent = {
        process,
        dir: agentDir,
        grpcBootstrap,
        xdsProxyAddress: `127.0.0.1:${xdsProxyPort}`,
        sdsSocket,
        certDir,
        stop: async () => {
          await process.stop();
        },
      };
      agents.push(agent);
      return agent;
    },
    async startWorkload(options) {
      const controlPort = options.role === "client" ? await freePort() : 0;
      const script = join(repositoryRoot(), "libs", "bookinfo", "src", "mesh-workload.ts");
      const child = spawn(process.execPath, ["--conditions=@sextant/source", "--import", "tsx", script], {
        cwd: join(repositoryRoot(), "libs", "bookinfo"),
        env: {
          ...process.env,
          WORKLOAD_ROLE: options.role,
          WORKLOAD_NAME: options.name,
          WORKLOAD_ADDRESS: options.address ?? "",
          CONTROL_PORT: String(controlPort),
          GRPC_XDS_BOOTSTRAP: options.agent.grpcBootstrap,
          GRPC_XDS_EXPERIMENTAL_RBAC: "true",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      const output = captureOutput(child);
      const control = await awaitWorkload(child, {
        name: options.name,
        ready: options.role === "server" ? '"serving":true' : '"control"',
        output,
        controlPort,
      });
      const workload: Workload = {
        ...control,
        child,
        controlPort,
        output,
        stop: async () => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise((resolve) => child.once("exit", resolve));
          child.kill("SIGTERM");
          await exited;
        },
      };
      workloads.push(workload);
      return workload;
    },
    async close() {
      for (const workload of workloads) await workload.stop();
      for (const agent of agents) await agent.stop();
      for (const replica of pushes) await replica.stop();
      for (const replica of discoveries) await replica.stop();
      await webhook?.stop();
      await ingest.stop();
      await ca.stop();
      await bus.close();
      await nats?.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Every NACK push logged ("proxy rejected config"): what a client refused of what push sent, in its own words. */
export function nacks(mesh: SecureMesh): string[] {
  return mesh.push
    .output()
    .split("\n")
    .filter((line) => line.includes('"proxy rejected config"'))
    .map((line) => {
      const entry = JSON.parse(line) as { proxy: string; type: string; nack: string };
      return `${entry.proxy} ${entry.type}: ${entry.nack}`;
    });
}
