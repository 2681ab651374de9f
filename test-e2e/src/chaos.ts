// The chaos suite's instruments (test/chaos.test.ts): a NATS cluster whose
// nodes can be killed, calls at a fixed rate with every result recorded, a
// ledger of the config applied, and the table the suite prints.
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type NatsClusterFixture, natsClusterConfig, startNatsCluster } from "@sextant/testing";
import type { WorkloadControl } from "./workload-control.js";

/**
 * A 3-node JetStream cluster as deploy/nats runs it, on loopback. The nodes
 * do not advertise their client URLs (no_advertise), so a client knows only
 * the URLs it was given: push's path to NATS can then go through a proxy
 * that the suite cuts, without the client finding its way around it.
 */
export function startChaosNatsCluster(): Promise<NatsClusterFixture> {
  return startNatsCluster({ config: (node) => natsClusterConfig(node, { cluster: "  no_advertise: true" }) });
}

/** The pid of the nats-server this suite started on storeDir (its command line names the store). */
function natsServerPid(storeDir: string): number {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let commandLine: string[];
    try {
      commandLine = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (commandLine[0]?.endsWith("nats-server") && commandLine.includes(storeDir)) return Number(entry);
  }
  throw new Error(`no nats-server runs on ${storeDir}`);
}

/** kill -9 one node; its fixture's start() brings it back on the same ports and store. */
export async function killNatsNode(node: NatsClusterFixture["nodes"][number]): Promise<void> {
  const pid = natsServerPid(node.storeDir);
  process.kill(pid, "SIGKILL");
  while (alive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
}

function alive(pid: number): boolean {
  try {
    // A killed child stays a zombie until Node reaps it; the state letter tells.
    return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** Waits until every node answers /healthz (JetStream current), as startNatsCluster does at first. */
export async function natsClusterHealthy(cluster: NatsClusterFixture, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const { node } of cluster.nodes) {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${node.monitorPort}/healthz`).then(
        (response) => response.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline) throw new Error(`nats node ${node.name} is not healthy`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/** A self-signed serving certificate for webhook (localhost, 127.0.0.1), in a new temporary directory. */
export function selfSignedTls(): { dir: string; certFile: string; keyFile: string } {
  const dir = mkdtempSync(join(tmpdir(), "sextant-chaos-tls-"));
  const certFile = join(dir, "tls.crt");
  const keyFile = join(dir, "tls.key");
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", keyFile, "-out", certFile, "-days", "1", "-subj", "/CN=localhost"],
      ...["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
    ],
    { stdio: "ignore" },
  );
  return { dir, certFile, keyFile };
}

/** One call's result: when it started and ended (ms since the epoch) and its answer ("error:<code>" on failure). */
export interface CallRecord {
  client: string;
  start: number;
  end: number;
  answer: string;
}

/**
 * Calls `target` from each client at a fixed rate, one call per interval
 * whether or not the previous one has answered (a hung call does not slow
 * the rate down), and keeps every result.
 */
export class CallRecorder {
  readonly records: CallRecord[] = [];
  readonly #timers: NodeJS.Timeout[] = [];
  readonly #pending = new Set<Promise<void>>();

  constructor(
    private readonly clients: ReadonlyMap<string, WorkloadControl>,
    private readonly target: string,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    for (const [name, client] of this.clients)
      this.#timers.push(setInterval(() => this.#call(name, client), this.intervalMs));
  }

  #call(name: string, client: WorkloadControl): void {
    const start = Date.now();
    const done = client
      .tally(this.target, 1)
      .then(
        ({ counts }) => Object.keys(counts)[0] ?? "error:no answer",
        (error: Error) => `error:control ${error.message}`,
      )
      .then((answer) => {
        this.records.push({ client: name, start, end: Date.now(), answer });
      });
    this.#pending.add(done);
    void done.finally(() => this.#pending.delete(done));
  }

  /** The calls that started in [from, to). */
  between(from: number, to: number): CallRecord[] {
    return this.records.filter((record) => record.start >= from && record.start < to);
  }

  /**
   * The time the last client began to answer `answer` for good: for each
   * client, the start of the run of `answer`s that ends its record (at least
   * `streak` long, all started after `since`); undefined while any client has none.
   */
  servedSince(answer: string, since: number, streak = 5): number | undefined {
    let latest = since;
    for (const name of this.clients.keys()) {
      const calls = this.records
        .filter((record) => record.client === name && record.start >= since)
        .sort((a, b) => a.start - b.start);
      let first = calls.length;
      while (first > 0 && calls[first - 1]?.answer === answer) first--;
      if (calls.length - first < streak) return undefined;
      latest = Math.max(latest, calls[first]?.start ?? since);
    }
    return latest;
  }

  async stop(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    await Promise.all(this.#pending);
  }
}

export const isFailure = (record: CallRecord): boolean => record.answer.startsWith("error");

/** A resource's identity and the generation ingest gave it. */
interface Applied {
  kind: string;
  namespace: string;
  name: string;
  generation: number;
}

/**
 * Every resource applied through ingest's API with the generation it got;
 * lost() lists those that are not stored with that generation any more.
 */
export class ConfigLedger {
  readonly #applied = new Map<string, Applied>();

  constructor(private readonly ingestUrl: () => string) {}

  /** POST /v1/apply; true when stored (200), and then the ledger holds the generations. */
  async apply(yaml: string): Promise<boolean> {
    const response = await fetch(`${this.ingestUrl()}/v1/apply`, { method: "POST", body: yaml }).catch(
      () => undefined,
    );
    if (response?.status !== 200) return false;
    const { resources } = (await response.json()) as { resources: Applied[] };
    for (const resource of resources)
      this.#applied.set(`${resource.kind}/${resource.namespace}/${resource.name}`, resource);
    return true;
  }

  get size(): number {
    return this.#applied.size;
  }

  async lost(): Promise<string[]> {
    const response = await fetch(`${this.ingestUrl()}/v1/config`);
    if (!response.ok) throw new Error(`GET /v1/config: ${response.status}`);
    const { items } = (await response.json()) as {
      items: Array<{ kind: string; metadata: { namespace: string; name: string; generation: number } }>;
    };
    const stored = new Map(
      items.map((item) => [
        `${item.kind}/${item.metadata.namespace}/${item.metadata.name}`,
        item.metadata.generation,
      ]),
    );
    return [...this.#applied]
      .filter(([key, resource]) => stored.get(key) !== resource.generation)
      .map(([key, resource]) => `${key} (generation ${resource.generation}, stored ${stored.get(key)})`);
  }
}

/** The serial number of the certificate an agent last wrote for its workload (OUTPUT_CERTS). */
export function certificateSerial(certDir: string): string {
  return new X509Certificate(readFileSync(`${certDir}/cert-chain.pem`)).serialNumber;
}

/** One fault's outcome, a row of the table. */
export interface ChaosRow {
  fault: string;
  /** How long the fault lasted (seconds). */
  downSeconds: number;
  calls: number;
  failed: number;
  /** Applied resources missing or at another generation afterwards. */
  configLost: number;
  /** When the change went in: "during" the fault or "after" it. */
  changeApplied: "during" | "after";
  /** From the change being stored to every client answering by it (seconds). */
  servedAfterSeconds: number;
  /** From the end of the fault to every agent having a new certificate (seconds). */
  certsRenewedAfterSeconds: number;
  /** What else the row measured (a leader's takeover). */
  note: string;
}

const seconds = (value: number) => value.toFixed(1);

/** The rows as a Markdown table. */
export function chaosTable(rows: readonly ChaosRow[]): string {
  const lines = [
    "| fault | down (s) | calls | failed | config lost | change | served after (s) | new certificates after (s) | note |",
    "|---|---:|---:|---:|---:|---|---:|---:|---|",
  ];
  for (const row of rows)
    lines.push(
      `| ${row.fault} | ${seconds(row.downSeconds)} | ${row.calls} | ${row.failed} | ${row.configLost} | ${row.changeApplied} | ${seconds(row.servedAfterSeconds)} | ${seconds(row.certsRenewedAfterSeconds)} | ${row.note} |`,
    );
  return lines.join("\n");
}
