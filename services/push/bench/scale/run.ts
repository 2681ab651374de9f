// The building blocks of the scale benchmark: the load generator (worker
// processes of simulated sidecars), one measured run against a set of ADS
// servers (push replicas or the floor), and the floor itself.
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { TypeUrl } from "@sextant/proto/envoy";
import { cpuSeconds, endpointMarker, rssBytes, virtualServiceMarker } from "./mesh.js";
import type { ReplayFloorCommand, ReplayFloorEvent } from "./replay-floor.js";
import type { ScaleWorkerCommand, ScaleWorkerEvent, SidecarSpec } from "./sidecars.js";

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const tsx = ["--conditions=@sextant/source", "--import", "tsx"];
/** How long after the last response a run counts as settled (for CPU and bytes). */
const QUIET_MS = 500;
const TIMEOUT_MS = 600_000;

export const percentile = (values: readonly number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

function next<T extends { type: string }>(child: ChildProcess, type: T["type"]): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off("message", listener);
      reject(new Error(`no "${type}" from ${child.pid} within ${TIMEOUT_MS} ms`));
    }, TIMEOUT_MS);
    const listener = (message: T) => {
      if (message.type !== type) return;
      clearTimeout(timer);
      child.off("message", listener);
      resolve(message);
    };
    child.on("message", listener);
  });
}

/** The load generator: worker processes each running a share of the sidecars. */
export class SidecarLoad {
  private readonly workers: ChildProcess[];
  private readonly owner = new Map<number, ChildProcess>();

  constructor(count: number) {
    this.workers = Array.from({ length: count }, () =>
      fork(here("./sidecars.ts"), [], { execArgv: tsx, stdio: "inherit" }),
    );
  }

  private command(worker: ChildProcess, command: ScaleWorkerCommand) {
    worker.send(command);
  }

  /** Connects the sidecars (spread over the workers) and resolves with each one's connect → converged ms. */
  async connect(sidecars: SidecarSpec[], delta: boolean, recorder?: number): Promise<number[]> {
    this.owner.clear();
    const shares = this.workers.map(() => [] as SidecarSpec[]);
    sidecars.forEach((spec, i) => {
      const w = i % this.workers.length;
      shares[w]?.push(spec);
      this.owner.set(spec.index, this.workers[w] as ChildProcess);
    });
    const busy = this.workers.filter((_, w) => (shares[w]?.length ?? 0) > 0);
    const converged = busy.map((worker) =>
      next<Extract<ScaleWorkerEvent, { type: "converged" }>>(worker, "converged"),
    );
    this.workers.forEach((worker, w) => {
      if (shares[w]?.length) this.command(worker, { type: "connect", sidecars: shares[w], delta, recorder });
    });
    return (await Promise.all(converged)).flatMap((event) =>
      event.times.map((time) => time.convergedAt - time.connectAt),
    );
  }

  /** Arms every worker to time when each expected sidecar ACKs a response of typeUrl holding marker. */
  async arm(typeUrl: string, marker: string, expected: readonly number[]) {
    const armed = this.workers.map((worker) => next(worker, "armed"));
    const observed = this.workers.map((worker) =>
      next<Extract<ScaleWorkerEvent, { type: "observed" }>>(worker, "observed"),
    );
    for (const worker of this.workers) {
      const mine = expected.filter((index) => this.owner.get(index) === worker);
      this.command(worker, { type: "arm", typeUrl, marker, expected: mine });
    }
    await Promise.all(armed);
    return async () => (await Promise.all(observed)).flatMap((event) => event.times);
  }

  /** Bytes received since the last arm, and when the last response arrived, over every worker. */
  async stats() {
    const replies = this.workers.map((worker) =>
      next<Extract<ScaleWorkerEvent, { type: "stats" }>>(worker, "stats"),
    );
    for (const worker of this.workers) this.command(worker, { type: "stats" });
    const all = await Promise.all(replies);
    return {
      converged: all.reduce((sum, s) => sum + s.converged, 0),
      bytes: all.reduce((sum, s) => sum + s.bytes, 0),
      responses: all.reduce((sum, s) => sum + s.responses, 0),
      lastResponseAt: Math.max(...all.map((s) => s.lastResponseAt)),
    };
  }

  /** Waits until no sidecar has received anything for QUIET_MS. */
  async settle() {
    for (;;) {
      const { lastResponseAt } = await this.stats();
      const idle = Date.now() - lastResponseAt;
      if (idle >= QUIET_MS) return;
      await new Promise((resolve) => setTimeout(resolve, QUIET_MS - idle));
    }
  }

  /** What the recorder sidecar holds (per type) and the resources of the last marked response it got. */
  async record(recorder: number) {
    const worker = this.owner.get(recorder);
    if (!worker) throw new Error(`sidecar ${recorder} is not connected`);
    const recorded = next<Extract<ScaleWorkerEvent, { type: "recorded" }>>(worker, "recorded");
    this.command(worker, { type: "record" });
    const { state, change } = await recorded;
    return { state, change };
  }

  async disconnect() {
    const closed = this.workers.map((worker) => next(worker, "closed"));
    for (const worker of this.workers) this.command(worker, { type: "close" });
    await Promise.all(closed);
  }

  async dispose() {
    await Promise.all(
      this.workers.map(
        (worker) =>
          new Promise<void>((resolve) => {
            if (worker.exitCode !== null) return resolve();
            worker.once("exit", () => resolve());
            worker.kill("SIGTERM");
          }),
      ),
    );
  }
}

/** A run that did not finish within RunOptions.timeoutMs: what had happened by then. */
export class RunTimeout extends Error {}

async function within<T>(promise: Promise<T>, timeoutMs: number, what: () => Promise<string>): Promise<T> {
  promise.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<"expired">((resolve) => {
    timer = setTimeout(() => resolve("expired"), timeoutMs);
  });
  const outcome = await Promise.race([promise, expired]);
  clearTimeout(timer);
  if (outcome === "expired") throw new RunTimeout(await what());
  return outcome as T;
}

/** One change's outcome: per affected sidecar ms from the change to its ACK, server CPU s, bytes received. */
export interface ChangeResult {
  latencies: number[];
  cpuSeconds: number;
  bytes: number;
}

export interface RunResult {
  convergence: number[];
  /** Server CPU seconds from before the first connect until every sidecar converged and settled. */
  connectCpuSeconds: number;
  /** Server RSS before the sidecars connected and after they converged, summed over the servers. */
  rssBefore: number;
  rssAfter: number;
  virtualService: ChangeResult[];
  endpoints: ChangeResult[];
}

export interface RunOptions {
  load: SidecarLoad;
  sidecars: SidecarSpec[];
  delta: boolean;
  /** The server processes whose CPU and memory are measured. */
  pids: number[];
  /** Which sidecars a change reaches. */
  affected: (spec: SidecarSpec) => boolean;
  changes: number;
  /** A bound on convergence and on each change; past it the run ends with RunTimeout. */
  timeoutMs?: number;
  /** Changes are numbered from here on (so markers stay unique over runs against one mesh). */
  firstChange: number;
  changeVirtualService: (change: number) => Promise<void> | void;
  changeEndpoints: (change: number) => Promise<void> | void;
  /** Called after convergence and after each change: the recorder sidecar's view, for the floor. */
  recorder?: number;
  onRecorded?: (what: "initial" | "virtualService" | "endpoints", change: number, recorded: Recorded) => void;
}

export type Recorded = Awaited<ReturnType<SidecarLoad["record"]>>;

const totalCpu = (pids: readonly number[]) => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
const totalRss = (pids: readonly number[]) => pids.reduce((sum, pid) => sum + rssBytes(pid), 0);

/** Connects every sidecar, then makes `changes` VirtualService changes and as many endpoint changes, one at a time. */
export async function measureRun(options: RunOptions): Promise<RunResult> {
  try {
    return await run(options);
  } finally {
    await options.load.disconnect();
  }
}

async function run(options: RunOptions): Promise<RunResult> {
  const { load, pids, recorder } = options;
  const timeoutMs = options.timeoutMs ?? TIMEOUT_MS;
  const count = options.sidecars.length;
  const rssBefore = totalRss(pids);
  const cpuBefore = totalCpu(pids);
  const convergence = await within(
    load.connect(options.sidecars, options.delta, recorder),
    timeoutMs,
    async () => `${(await load.stats()).converged} of ${count} converged in ${timeoutMs / 1000} s`,
  );
  await load.settle();
  const connectCpuSeconds = totalCpu(pids) - cpuBefore;
  const rssAfter = totalRss(pids);
  if (recorder !== undefined) options.onRecorded?.("initial", 0, await load.record(recorder));
  const expected = options.sidecars.filter(options.affected).map((spec) => spec.index);

  const change = async (
    typeUrl: string,
    marker: string,
    make: () => Promise<void> | void,
  ): Promise<ChangeResult> => {
    const observed = await load.arm(typeUrl, marker, expected);
    const cpu = totalCpu(pids);
    const started = Date.now();
    await make();
    const times = await within(
      observed(),
      timeoutMs,
      async () => `a change reached too few of ${expected.length} sidecars in ${timeoutMs / 1000} s`,
    );
    await load.settle();
    const cpuUsed = totalCpu(pids) - cpu;
    const { bytes } = await load.stats();
    return { latencies: times.map((time) => time - started), cpuSeconds: cpuUsed, bytes };
  };
  const virtualService: ChangeResult[] = [];
  const endpoints: ChangeResult[] = [];
  for (let i = 0; i < options.changes; i++) {
    const n = options.firstChange + i;
    virtualService.push(
      await change(TypeUrl.RouteConfiguration, virtualServiceMarker(n), () =>
        options.changeVirtualService(n),
      ),
    );
    if (recorder !== undefined) options.onRecorded?.("virtualService", n, await load.record(recorder));
    endpoints.push(
      await change(TypeUrl.ClusterLoadAssignment, endpointMarker(n), () => options.changeEndpoints(n)),
    );
    if (recorder !== undefined) options.onRecorded?.("endpoints", n, await load.record(recorder));
  }
  return { convergence, connectCpuSeconds, rssBefore, rssAfter, virtualService, endpoints };
}

/** The floor: baseline-server.ts --replay, loaded with the bytes recorded from push. */
export async function startReplayFloor(initial: Recorded["state"]) {
  const child = fork(here("../baseline-server.ts"), ["--replay"], { execArgv: tsx, stdio: "inherit" });
  const { port } = await next<Extract<ReplayFloorEvent, { type: "listening" }>>(child, "listening");
  const command = (message: ReplayFloorCommand) => child.send(message);
  command({ type: "load", state: initial });
  return {
    address: `127.0.0.1:${port}`,
    pid: child.pid as number,
    /** Sends recorded resources of typeUrl to the namespace's streams (every stream without one). */
    change: async (typeUrl: string, resources: string[], namespace?: string) => {
      const sent = next(child, "sent");
      command({ type: "change", typeUrl, resources, namespace });
      await sent;
    },
    close: async () => {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      command({ type: "exit" });
      await exited;
    },
  };
}
