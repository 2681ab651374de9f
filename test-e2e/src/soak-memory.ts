// Memory of the soaked services. A service's own /metrics reports the V8
// heap in use garbage included (nodejs_heap_size_used_bytes), which swings
// by tens of MB between collections: a 1-minute run measured 10-30 MB swings
// with no leak at all. So every sample asks each service's memory probe
// (soak-probe.mjs, preloaded by the harness) for the heap after a full
// collection, which moves only with what the process keeps, and for its RSS.

export interface MemorySample {
  /** Minutes since the soak started. */
  minute: number;
  rssBytes: number;
  /** V8 heap in use right after a full collection. */
  heapBytes: number;
}

export interface MemoryRecorder {
  /** The samples so far, by service name. */
  readonly samples: Map<string, MemorySample[]>;
  /** Failed probes (a service that stopped answering), by service name. */
  readonly errors: Map<string, string>;
  stop(): Promise<void>;
}

/** Records one sample of each service every recordMs, one service at a time (each sample is a full collection). */
export function recordMemory(
  services: { name: string; probePort: number }[],
  startedAt: number,
  recordMs: number,
): MemoryRecorder {
  const samples = new Map<string, MemorySample[]>(services.map(({ name }) => [name, []]));
  const errors = new Map<string, string>();
  let running: Promise<void> = Promise.resolve();
  const record = async () => {
    for (const { name, probePort } of services) {
      try {
        const response = await fetch(`http://127.0.0.1:${probePort}/`);
        const { heapUsed, rss } = (await response.json()) as { heapUsed: number; rss: number };
        samples
          .get(name)
          ?.push({ minute: (Date.now() - startedAt) / 60_000, rssBytes: rss, heapBytes: heapUsed });
      } catch (error) {
        errors.set(name, (error as Error).message);
      }
    }
  };
  const timer = setInterval(() => {
    running = running.then(record);
  }, recordMs);
  return {
    samples,
    errors,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/** Least-squares slope of y over x (units of y per unit of x); 0 with fewer than two points. */
export function slope(points: { x: number; y: number }[]): number {
  if (points.length < 2) return 0;
  const meanX = points.reduce((sum, p) => sum + p.x, 0) / points.length;
  const meanY = points.reduce((sum, p) => sum + p.y, 0) / points.length;
  let covariance = 0;
  let variance = 0;
  for (const p of points) {
    covariance += (p.x - meanX) * (p.y - meanY);
    variance += (p.x - meanX) ** 2;
  }
  return variance === 0 ? 0 : covariance / variance;
}

/** One service's memory trend over the window: MB per minute of RSS and of the heap after collection. */
export interface MemoryTrend {
  service: string;
  samples: number;
  rssMbPerMinute: number;
  heapMbPerMinute: number;
  finalRssMb: number;
  finalHeapMb: number;
}

const MB = 1024 * 1024;

/** The trend of each service over the samples of the last windowMinutes. */
export function memoryTrends(samples: Map<string, MemorySample[]>, windowMinutes: number): MemoryTrend[] {
  return [...samples].map(([service, all]) => {
    const end = all.at(-1)?.minute ?? 0;
    const window = all.filter((sample) => sample.minute >= end - windowMinutes);
    const last = all.at(-1);
    return {
      service,
      samples: window.length,
      rssMbPerMinute: slope(window.map((s) => ({ x: s.minute, y: s.rssBytes / MB }))),
      heapMbPerMinute: slope(window.map((s) => ({ x: s.minute, y: s.heapBytes / MB }))),
      finalRssMb: (last?.rssBytes ?? 0) / MB,
      finalHeapMb: (last?.heapBytes ?? 0) / MB,
    };
  });
}
