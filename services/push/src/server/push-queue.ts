import type { PushChange } from "../model/types.js";

interface Pending {
  full: boolean;
  endpointHosts: Set<string>;
  startedAt: number;
}

/**
 * PushQueue holds at most one pending push per proxy (istiod's PushQueue):
 * a second change for a proxy still waiting merges into the first, so a slow
 * proxy never builds a backlog. At most `concurrency` pushes run at once.
 */
export class PushQueue {
  readonly #pending = new Map<string, Pending>();
  #running = 0;
  #idleWaiters: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly work: (id: string, change: PushChange, startedAt: number) => void | Promise<void>,
  ) {}

  /** Adds a push for id, merging with one already waiting. */
  enqueue(id: string, change: PushChange, startedAt: number): void {
    const pending = this.#pending.get(id);
    if (pending) {
      pending.full ||= change.full;
      for (const host of change.endpointHosts) pending.endpointHosts.add(host);
      pending.startedAt = Math.min(pending.startedAt, startedAt);
    } else {
      this.#pending.set(id, { full: change.full, endpointHosts: new Set(change.endpointHosts), startedAt });
    }
    this.drain();
  }

  /** Resolves when nothing is pending or running. */
  idle(): Promise<void> {
    if (this.#pending.size === 0 && this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  private drain(): void {
    while (this.#running < this.concurrency && this.#pending.size > 0) {
      const [id, pending] = this.#pending.entries().next().value as [string, Pending];
      this.#pending.delete(id);
      this.#running++;
      // Yield between pushes so that requests and ACKs keep flowing during a large push.
      setImmediate(async () => {
        try {
          await this.work(
            id,
            { full: pending.full, endpointHosts: pending.endpointHosts },
            pending.startedAt,
          );
        } finally {
          this.#running--;
          this.drain();
          if (this.#pending.size === 0 && this.#running === 0) {
            for (const resolve of this.#idleWaiters.splice(0)) resolve();
          }
        }
      });
    }
  }
}
