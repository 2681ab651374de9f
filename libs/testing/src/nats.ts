import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onCleanup, trackChildProcess } from "./cleanup.js";
import { freePort } from "./ports.js";

/** A nats-server started for a test, with its own JetStream store. */
export interface NatsServerFixture {
  /** nats://127.0.0.1:<port> */
  readonly url: string;
  readonly port: number;
  readonly storeDir: string;
  /** Stops the server (SIGTERM, then SIGKILL after a grace period). */
  stop(): Promise<void>;
  /** Stops it and starts it again on the same port and store. */
  restart(): Promise<void>;
  /** Starts it again after stop(), on the same port and store. */
  start(): Promise<void>;
  /** Stops it for good and removes the store. */
  dispose(): Promise<void>;
}

const READY_TIMEOUT_MS = 15_000;

/** Fails with a message that says how to install nats-server, rather than a bare ENOENT. */
export function assertNatsServerInstalled(): void {
  const probe = spawnSync("nats-server", ["--version"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    throw new Error(
      "nats-server is not installed: `apt-get install -y nats-server` (npm test installs it when root)",
    );
  }
}

/** Options of {@link startNatsServer}. */
export interface NatsServerOptions {
  /**
   * Extra configuration (nats-server's config syntax), such as an
   * `authorization` block with users and permissions. It is written to a
   * file in the store directory and loaded with `-c`; the command line still
   * sets the address, the port and JetStream's store, so it cannot move them.
   */
  config?: string;
  /** Extra environment for the server process: the `$VARIABLES` the config refers to. */
  env?: Record<string, string>;
  /**
   * Receives everything the server logs, also after it is ready (by default
   * the log is read only until then): for tests that look for what the
   * server refused.
   */
  onLog?: (chunk: string) => void;
}

/**
 * Starts a real nats-server with JetStream on a random port (the server picks
 * it: no race with other tests), storing in a fresh temporary directory.
 */
export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerFixture> {
  assertNatsServerInstalled();
  const storeDir = mkdtempSync(join(tmpdir(), "sextant-nats-"));
  let configFile: string | undefined;
  if (options.config !== undefined) {
    configFile = join(storeDir, "nats-server.conf");
    writeFileSync(configFile, options.config);
  }
  let port = -1;
  let child: ChildProcess | undefined;

  const start = async () => {
    const launched = await launch(port, storeDir, configFile, options.env, options.onLog);
    child = launched.child;
    port = launched.port;
  };
  const stop = async () => {
    const running = child;
    child = undefined;
    if (!running || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running.once("exit", resolve));
    running.kill("SIGTERM");
    const timer = setTimeout(() => running.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(timer);
  };

  await start();
  // Stopped and removed even when the suite that started it never reaches its own cleanup.
  const unregister = onCleanup(`nats-server ${storeDir}`, () => dispose());
  const dispose = async () => {
    unregister();
    await stop();
    rmSync(storeDir, { recursive: true, force: true });
  };
  return {
    get url() {
      return `nats://127.0.0.1:${port}`;
    },
    get port() {
      return port;
    },
    storeDir,
    stop,
    start,
    restart: async () => {
      await stop();
      await start();
    },
    dispose,
  };
}

async function launch(
  port: number,
  storeDir: string,
  configFile: string | undefined,
  env: Record<string, string> | undefined,
  onLog?: (chunk: string) => void,
): Promise<{ child: ChildProcess; port: number }> {
  const args = [
    ...(configFile ? ["-c", configFile] : []),
    "-js",
    "-a",
    "127.0.0.1",
    "-p",
    String(port),
    "-sd",
    storeDir,
  ];
  const child = spawn("nats-server", args, {
    stdio: ["ignore", "ignore", "pipe"],
    ...(env ? { env: { ...process.env, ...env } } : {}),
  });
  trackChildProcess(child);
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`nats-server did not become ready within ${READY_TIMEOUT_MS} ms:\n${log}`));
    }, READY_TIMEOUT_MS);
    let listening = port;
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (chunk: string) => {
      log += chunk;
      onLog?.(chunk);
      const match = /Listening for client connections on [^\s]+:(\d+)/.exec(log);
      if (match) listening = Number(match[1]);
      if (/Server is ready/.test(log) && listening > 0) {
        clearTimeout(timer);
        child.stderr?.removeAllListeners("data");
        if (onLog) child.stderr?.on("data", onLog);
        child.stderr?.resume();
        resolve({ child, port: listening });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`nats-server exited with ${code} before it was ready:\n${log}`));
    });
  });
}

/** One node of a {@link startNatsCluster} cluster, as its configuration sees it. */
export interface NatsClusterNode {
  /** 0, 1, 2, ... */
  readonly index: number;
  /** Its server_name. */
  readonly name: string;
  /** The port it listens on for routes (127.0.0.1). */
  readonly clusterPort: number;
  /** The port of its monitoring endpoint (127.0.0.1): /healthz, /routez, /jsz. */
  readonly monitorPort: number;
  /** The cluster ports of every node, this one's included (a route to itself is harmless). */
  readonly clusterPorts: readonly number[];
}

/** Options of {@link startNatsCluster}. */
export interface NatsClusterOptions {
  /** The number of nodes; 3 by default, the least for replicated (R3) JetStream. */
  size?: number;
  /**
   * Each node's whole configuration, which must set server_name, `http` on
   * the node's monitorPort and a `cluster` block listening on its
   * clusterPort (127.0.0.1) with routes to the others; see
   * {@link natsClusterConfig}. By default that plain cluster.
   */
  config?: (node: NatsClusterNode) => string;
  /** Each node's environment: the `$VARIABLES` its configuration refers to. */
  env?: (node: NatsClusterNode) => Record<string, string>;
}

/** A cluster of nats-servers with JetStream started for a test. */
export interface NatsClusterFixture {
  readonly nodes: readonly (NatsServerFixture & { readonly node: NatsClusterNode })[];
  /** Every node's client URL, comma-separated, as NATS_URL takes them. */
  readonly url: string;
  /**
   * A rolling restart: each node in turn is stopped and started on its port
   * and store, and is healthy again (JetStream current) before the next one
   * goes. Replicated streams stay available, changing leader on the way.
   */
  restart(): Promise<void>;
  /**
   * The server_name of the node that leads a stream (e.g. "KV_sextant-config"),
   * as the nodes' monitoring endpoints (/jsz) report it; undefined while it
   * has none (an election) or the stream does not exist.
   */
  streamLeader(stream: string): Promise<string | undefined>;
  /** Stops every node for good and removes their stores. */
  dispose(): Promise<void>;
}

/**
 * The configuration of a plain cluster node: its name, its monitoring port,
 * and a cluster listening on its port with routes to every node; `cluster`
 * is added inside the cluster block (authorization, tls), and `routeUserInfo`
 * ("user:password") goes into each route URL.
 */
export function natsClusterConfig(
  node: NatsClusterNode,
  extra: { cluster?: string; routeUserInfo?: string } = {},
): string {
  const userInfo = extra.routeUserInfo === undefined ? "" : `${extra.routeUserInfo}@`;
  return [
    `server_name: ${node.name}`,
    `http: 127.0.0.1:${node.monitorPort}`,
    "cluster {",
    "  name: sextant-test",
    `  listen: 127.0.0.1:${node.clusterPort}`,
    `  routes: [${node.clusterPorts.map((port) => `nats://${userInfo}127.0.0.1:${port}`).join(", ")}]`,
    extra.cluster ?? "",
    "}",
    "",
  ].join("\n");
}

/**
 * Starts a cluster of real nats-servers with JetStream on loopback, and waits
 * until each reports JetStream healthy (its /healthz), so replicated buckets
 * can be created at once. Client ports are the servers' own choice; the
 * route and monitoring ports, which the nodes must know of each other before
 * they start, are free ports taken just before. Every node is stopped and
 * removed by the file's cleanup even when the suite never reaches its own.
 */
export async function startNatsCluster(options: NatsClusterOptions = {}): Promise<NatsClusterFixture> {
  const size = options.size ?? 3;
  const ports = await freePorts(size * 2);
  const clusterPorts = ports.slice(0, size);
  const nodes: NatsClusterNode[] = clusterPorts.map((clusterPort, index) => ({
    index,
    name: `n${index}`,
    clusterPort,
    monitorPort: ports[size + index] as number,
    clusterPorts,
  }));
  const config = options.config ?? ((node: NatsClusterNode) => natsClusterConfig(node));
  const started = await Promise.allSettled(
    nodes.map((node) =>
      startNatsServer({ config: config(node), ...(options.env ? { env: options.env(node) } : {}) }),
    ),
  );
  const servers = started.flatMap((result) => (result.status === "fulfilled" ? [result.value] : []));
  const dispose = async () => {
    await Promise.all(servers.map((server) => server.dispose()));
  };
  const failed = started.find((result) => result.status === "rejected");
  if (failed) {
    await dispose();
    throw (failed as PromiseRejectedResult).reason;
  }
  try {
    await Promise.all(nodes.map((node) => waitHealthy(node.monitorPort)));
  } catch (error) {
    await dispose();
    throw error;
  }
  return {
    nodes: servers.map((server, index) => Object.assign(server, { node: nodes[index] as NatsClusterNode })),
    get url() {
      return servers.map((server) => server.url).join(",");
    },
    restart: async () => {
      for (const [index, server] of servers.entries()) {
        await server.restart();
        await waitHealthy((nodes[index] as NatsClusterNode).monitorPort);
      }
    },
    streamLeader: async (stream) => {
      for (const node of nodes) {
        const leader = await streamLeaderSeenBy(node.monitorPort, stream).catch(() => undefined);
        if (leader) return leader;
      }
      return undefined;
    },
    dispose,
  };
}

/** The leader of a stream as one node's /jsz reports it (its replica's view). */
async function streamLeaderSeenBy(monitorPort: number, stream: string): Promise<string | undefined> {
  const response = await fetch(`http://127.0.0.1:${monitorPort}/jsz?accounts=true&streams=true`);
  const jsz = (await response.json()) as {
    account_details?: Array<{ stream_detail?: Array<{ name: string; cluster?: { leader?: string } }> }>;
  };
  for (const account of jsz.account_details ?? []) {
    for (const detail of account.stream_detail ?? []) {
      if (detail.name === stream && detail.cluster?.leader) return detail.cluster.leader;
    }
  }
  return undefined;
}

/** The installed nats-server's version as [major, minor, patch]. */
export function natsServerVersion(): [number, number, number] {
  assertNatsServerInstalled();
  const output = spawnSync("nats-server", ["--version"], { encoding: "utf8" }).stdout;
  const match = /v?(\d+)\.(\d+)\.(\d+)/.exec(output);
  if (!match) throw new Error(`cannot read nats-server's version from ${JSON.stringify(output)}`);
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** True if version is at least minimum. */
function atLeast(version: readonly number[], minimum: readonly number[]): boolean {
  for (const [index, part] of minimum.entries()) {
    const have = version[index] ?? 0;
    if (have !== part) return have > part;
  }
  return true;
}

/** The NATS deployments a bus suite runs against: one server, and a 3-node cluster with R3 buckets. */
export const NATS_TOPOLOGIES = ["single", "cluster"] as const;
export type NatsTopologyKind = (typeof NATS_TOPOLOGIES)[number];

/**
 * Whether concurrent writes conditional on the same revision are serialised
 * (exactly one wins) on a topology. A single server always does; a clustered
 * stream only from nats-server 2.9.21 (nats-io/nats-server#4320: the leader
 * checked the expected last subject sequence before proposing, blind to
 * writes still in flight, so several could win). The Debian package some
 * machines install is older; deploy/ runs 2.10.
 */
export function serialisesConcurrentConditionalWrites(kind: NatsTopologyKind): boolean {
  return kind === "single" || atLeast(natsServerVersion(), [2, 9, 21]);
}

/** A single nats-server or a 3-node cluster, seen the same way by a suite parametrised over both. */
export interface NatsTopology {
  readonly kind: NatsTopologyKind;
  /** The client URL(s), comma-separated. */
  readonly url: string;
  /** The stream replicas buckets should be created with: 1, or 3 on the cluster. */
  readonly replicas: number;
  /** The single server restarted on its port and store, or the cluster's rolling restart. */
  restart(): Promise<void>;
  /** The cluster itself (undefined for a single server): its nodes, stream leaders. */
  readonly cluster?: NatsClusterFixture;
  dispose(): Promise<void>;
}

/** Starts one of {@link NATS_TOPOLOGIES}. */
export async function startNatsTopology(kind: NatsTopologyKind): Promise<NatsTopology> {
  if (kind === "single") {
    const server = await startNatsServer();
    return {
      kind,
      replicas: 1,
      get url() {
        return server.url;
      },
      restart: () => server.restart(),
      dispose: () => server.dispose(),
    };
  }
  const cluster = await startNatsCluster();
  return {
    kind,
    replicas: 3,
    cluster,
    get url() {
      return cluster.url;
    },
    restart: () => cluster.restart(),
    dispose: () => cluster.dispose(),
  };
}

/** Distinct ports that were free a moment ago (see {@link freePort}). */
async function freePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** Waits until a node's /healthz answers 200: connected to its peers, JetStream current. */
async function waitHealthy(monitorPort: number): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS * 2;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`http://127.0.0.1:${monitorPort}/healthz`);
      last = `${response.status} ${await response.text()}`;
      if (response.ok) return;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`nats-server on monitoring port ${monitorPort} is not healthy: ${last}`);
}
