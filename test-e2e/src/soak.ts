// The soak (issue 24): the control plane under steady churn for a bounded
// time, its memory recorded, its clients checked for sync. An endpoint change
// every 100 ms through discovery's input and a config change every 2 s
// through ingest's API reach every client; each service's RSS and heap floor
// are recorded every interval, and the run fails when any service's
// least-squares slope over the window exceeds the threshold, or when any
// client falls behind (at each checkpoint, and at the end, when every client
// must hold the last change of each kind and push must see every type ACKed
// at the version it sent).
import { DEBUG_HEADERS, eventually } from "@sextant/testing";
import { type SoakClientState, startSoakClients } from "./soak-clients.js";
import { type MemorySample, type MemoryTrend, memoryTrends, recordMemory } from "./soak-memory.js";
import { type SoakedService, startSoakMesh } from "./soak-mesh.js";

export interface SoakOptions {
  minutes: number;
  clients: number;
  /** Push replicas; the clients are spread over them. */
  pushReplicas?: number;
  /** The push replica given the test-only leak (soak-leak.mjs), if any. */
  leakyPush?: number;
  endpointChangeMs?: number;
  configChangeMs?: number;
  /** How often a memory sample is recorded. */
  recordMs?: number;
  /** The slopes are fitted over the samples of the last windowMinutes. */
  windowMinutes: number;
  /** The largest slope (MB per minute) of each measure a service may show; a measure left out is recorded, not judged. */
  threshold: { heapMbPerMinute: number; rssMbPerMinute?: number };
  /** How often the clients are checked to have caught up with the changes made so far. */
  checkpointMs?: number;
  /** How long a client may take to catch up at a checkpoint or at the end. */
  syncTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface SoakResult {
  minutes: number;
  clients: number;
  endpointChanges: number;
  configChanges: number;
  checkpoints: number;
  trends: MemoryTrend[];
  samples: Map<string, MemorySample[]>;
  /** Service names whose slope exceeded the threshold, with the reason. */
  leaks: string[];
  /** Every sync failure: a checkpoint or the end at which a client had not caught up. */
  syncFailures: string[];
  /** What the leak injection (if any) reported at the services' exit. */
  serviceOutput: Map<string, string>;
}

const behind = (states: SoakClientState[], endpoint: number, config: number) =>
  states.filter((state) => state.ended || state.endpointChange < endpoint || state.configChange < config);

interface SynczEntry {
  kind: string;
  proxyId: string;
  types: Record<string, { versionSent: string; versionAcked: string }>;
}

/** Push's own view, per replica: its connections whose last response of some type is not ACKed. */
async function unacked(pushes: SoakedService[]): Promise<{ connections: number; unacked: string[] }> {
  let connections = 0;
  const pending: string[] = [];
  for (const push of pushes) {
    const response = await fetch(`http://127.0.0.1:${push.process.httpPort}/debug/syncz`, {
      headers: DEBUG_HEADERS,
    });
    const entries = (await response.json()) as SynczEntry[];
    connections += entries.length;
    for (const entry of entries)
      for (const [typeUrl, type] of Object.entries(entry.types))
        if (type.versionSent !== type.versionAcked)
          pending.push(`${entry.proxyId} ${typeUrl}: sent ${type.versionSent}, acked ${type.versionAcked}`);
  }
  return { connections, unacked: pending };
}

export async function runSoak(options: SoakOptions): Promise<SoakResult> {
  const log = options.log ?? (() => {});
  const syncTimeoutMs = options.syncTimeoutMs ?? 30_000;
  const mesh = await startSoakMesh({ pushReplicas: options.pushReplicas ?? 1, leakyPush: options.leakyPush });
  const syncFailures: string[] = [];
  let endpointChange = -1;
  let configChange = 0;
  let checkpoints = 0;
  const clients = startSoakClients(options.clients, mesh.xdsAddresses);
  const timers: NodeJS.Timeout[] = [];
  let recorder: ReturnType<typeof recordMemory> | undefined;
  try {
    await eventually(() => behind(clients.states, -1, 0).length === 0, {
      timeoutMs: 120_000,
      intervalMs: 200,
      message: `${options.clients} clients did not all get the service's config`,
    });
    log(`${options.clients} clients connected to ${mesh.xdsAddresses.length} push replica(s)`);
    const startedAt = Date.now();
    let applying = false;
    recorder = recordMemory(mesh.services, startedAt, options.recordMs ?? 10_000);
    const endpointChangeMs = options.endpointChangeMs ?? 100;
    let nextEndpointChangeAt = startedAt + endpointChangeMs;
    timers.push(
      setInterval(() => {
        const now = Date.now();
        // A timer on a busy event loop fires late; the changes it owes are made at once, as a burst of
        // pod moves would arrive, so the run makes one change per interval on average.
        while (nextEndpointChangeAt <= now) {
          mesh.changeEndpoints(++endpointChange);
          nextEndpointChangeAt += endpointChangeMs;
        }
      }, endpointChangeMs),
    );
    timers.push(
      setInterval(async () => {
        // One apply at a time: a slow ingest gets fewer changes, not a queue of them.
        if (applying) return;
        applying = true;
        try {
          await mesh.changeConfig(configChange + 1);
          configChange++;
        } catch (error) {
          syncFailures.push(`config change ${configChange + 1} refused: ${(error as Error).message}`);
        } finally {
          applying = false;
        }
      }, options.configChangeMs ?? 2000),
    );
    const checks: Promise<void>[] = [];
    timers.push(
      setInterval(() => {
        const target = {
          endpoint: endpointChange,
          config: configChange,
          minute: (Date.now() - startedAt) / 60_000,
        };
        checkpoints++;
        checks.push(
          eventually(() => behind(clients.states, target.endpoint, target.config).length === 0, {
            timeoutMs: syncTimeoutMs,
            intervalMs: 250,
          }).then(
            () =>
              log(
                `minute ${target.minute.toFixed(1)}: every client caught up with endpoint change ${target.endpoint}, config change ${target.config}`,
              ),
            () => {
              const late = behind(clients.states, target.endpoint, target.config);
              syncFailures.push(
                `minute ${target.minute.toFixed(1)}: ${late.length} clients not at endpoint change ${target.endpoint} / config change ${target.config} within ${syncTimeoutMs} ms, e.g. ${late[0]?.nodeId} at ${late[0]?.endpointChange} / ${late[0]?.configChange}${late[0]?.ended ? ` (${late[0].ended})` : ""}`,
              );
            },
          ),
        );
      }, options.checkpointMs ?? 60_000),
    );
    await new Promise((resolve) => setTimeout(resolve, options.minutes * 60_000));
    for (const timer of timers) clearInterval(timer);
    await recorder.stop();
    await eventually(() => !applying, { timeoutMs: 30_000 });
    await Promise.all(checks);
    // The end: every client holds the last change of each kind, and push saw each of its responses ACKed.
    const last = { endpoint: endpointChange, config: configChange };
    try {
      await eventually(() => behind(clients.states, last.endpoint, last.config).length === 0, {
        timeoutMs: syncTimeoutMs,
        intervalMs: 250,
      });
    } catch {
      const late = behind(clients.states, last.endpoint, last.config);
      syncFailures.push(
        `end: ${late.length} clients not at the last endpoint change ${last.endpoint} / config change ${last.config}`,
      );
    }
    const pushes = mesh.services.filter((service) => service.name.startsWith("push-"));
    let pushView = { connections: 0, unacked: [] as string[] };
    try {
      await eventually(
        async () => {
          pushView = await unacked(pushes);
          return pushView.connections === options.clients && pushView.unacked.length === 0;
        },
        { timeoutMs: syncTimeoutMs, intervalMs: 500 },
      );
    } catch {
      syncFailures.push(
        `end: push holds ${pushView.connections} of ${options.clients} connections, ${pushView.unacked.length} types not ACKed at the version sent, e.g. ${pushView.unacked[0] ?? "-"}`,
      );
    }
    for (const [service, error] of recorder.errors)
      syncFailures.push(`${service}'s memory probe failed: ${error}`);
    const nacks = clients.states.reduce((sum, state) => sum + state.nacks, 0);
    if (nacks > 0) syncFailures.push(`clients NACKed ${nacks} responses`);
    const trends = memoryTrends(recorder.samples, options.windowMinutes);
    const leaks: string[] = [];
    for (const trend of trends) {
      if (trend.heapMbPerMinute > options.threshold.heapMbPerMinute)
        leaks.push(`${trend.service}: heap ${trend.heapMbPerMinute.toFixed(3)} MB/min`);
      const rssLimit = options.threshold.rssMbPerMinute;
      if (rssLimit !== undefined && trend.rssMbPerMinute > rssLimit)
        leaks.push(`${trend.service}: RSS ${trend.rssMbPerMinute.toFixed(3)} MB/min`);
    }
    clients.close();
    await mesh.close();
    return {
      minutes: options.minutes,
      clients: options.clients,
      endpointChanges: endpointChange + 1,
      configChanges: configChange,
      checkpoints,
      trends,
      samples: recorder.samples,
      leaks,
      syncFailures,
      serviceOutput: new Map(mesh.services.map(({ name, process }) => [name, process.output()])),
    };
  } finally {
    for (const timer of timers) clearInterval(timer);
    await recorder?.stop();
    clients.close();
    await mesh.close();
  }
}

/** The result as a Markdown table, one row per service. */
export function trendTable(result: SoakResult): string {
  const rows = result.trends.map(
    (t) =>
      `| ${t.service} | ${t.rssMbPerMinute.toFixed(3)} | ${t.heapMbPerMinute.toFixed(3)} | ${t.finalRssMb.toFixed(1)} | ${t.finalHeapMb.toFixed(1)} | ${t.samples} |`,
  );
  return [
    "| service | RSS slope (MB/min) | heap slope (MB/min) | final RSS (MB) | final heap (MB) | samples in window |",
    "|---|---|---|---|---|---|",
    ...rows,
  ].join("\n");
}
