import { setImmediate as yieldToIo } from "node:timers/promises";
import { WorkQueue } from "@sextant/kube/retry";
import { mergedConfigs } from "../cache/dependencies.js";
import type { ConfigChange, PushChange } from "../model/types.js";

/** A proxy's pending push: what changed, and when the oldest change began. */
interface Pending {
  full: boolean;
  /** What a full change changed, if known (cache/dependencies.ts). */
  configs?: ConfigChange | undefined;
  readonly endpointHosts: Set<string>;
  readonly secrets: Set<string>;
  startedAt: number;
}

/**
 * Two pushes waiting for one proxy are one: full if either is (with what
 * the full ones changed, united), every endpoint host and Secret, the earlier start. The waiting one is the queue's own copy,
 * so it grows in place rather than being copied on every change.
 */
function mergePending(waiting: Pending, added: Pending): Pending {
  waiting.configs = mergedConfigs(waiting, added);
  waiting.full ||= added.full;
  for (const host of added.endpointHosts) waiting.endpointHosts.add(host);
  for (const secret of added.secrets) waiting.secrets.add(secret);
  waiting.startedAt = Math.min(waiting.startedAt, added.startedAt);
  return waiting;
}

/**
 * PushQueue holds at most one pending push per proxy (istiod's PushQueue):
 * a second change for a proxy still waiting merges into the first, so a slow
 * proxy never builds a backlog. At most `concurrency` pushes run at once.
 */
export class PushQueue {
  readonly #queue: WorkQueue<string, Pending>;

  constructor(
    concurrency: number,
    work: (id: string, change: PushChange, startedAt: number) => void | Promise<void>,
  ) {
    this.#queue = new WorkQueue<string, Pending>({
      concurrency,
      merge: mergePending,
      process: async (id, pending) => {
        // Yield before each push so that requests and ACKs keep flowing during a large push.
        await yieldToIo();
        await work(
          id,
          {
            full: pending.full,
            endpointHosts: pending.endpointHosts,
            secrets: pending.secrets,
            ...(pending.configs ? { configs: pending.configs } : {}),
          },
          pending.startedAt,
        );
      },
      // A push that throws is a bug: it stays an unhandled rejection, as loud as before.
      onError: (_id, error) => {
        throw error;
      },
    });
  }

  /** Adds a push for id, merging with one already waiting. */
  enqueue(id: string, change: PushChange, startedAt: number): void {
    this.#queue.add(id, {
      full: change.full,
      configs: change.configs,
      endpointHosts: new Set(change.endpointHosts),
      secrets: new Set(change.secrets),
      startedAt,
    });
  }

  /** Resolves when nothing is pending or running. */
  idle(): Promise<void> {
    return this.#queue.idle();
  }
}
