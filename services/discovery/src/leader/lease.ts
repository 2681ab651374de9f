import { RevisionConflictError, type TypedBucket } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import { Struct } from "@sextant/proto";

/** What a lease holds. */
export interface LeaseRecord {
  /** The REPLICA_ID of the holder. */
  readonly holder: string;
  /** When the holder took it (ISO time, for people; never compared across machines). */
  readonly acquired: string;
  /** Bumped by every renewal, so that each renewal is a new KV revision. */
  readonly renewals: number;
  /** The lease duration the holder promises to respect. */
  readonly durationMs: number;
}

/** Options of {@link LeaseElector}. */
export interface LeaseOptions {
  readonly bucket: TypedBucket<Struct>;
  /** The role, e.g. "discovery". */
  readonly key: string;
  readonly identity: string;
  readonly durationMs: number;
  readonly renewMs: number;
  readonly logger: Logger;
  /**
   * Called on every change of leadership, in order. Not awaited: work done
   * on becoming leader (a full reconcile) must never delay the renewals.
   */
  readonly onChange: (leader: boolean) => void;
}

/** A monotonic clock in milliseconds (never jumps with the wall clock). */
const now = (): number => performance.now();

/**
 * LeaseElector keeps one replica the leader of a role with a lease in a KV
 * key, checked against the KV revision rather than against clocks:
 *
 * - The leader renews every renewMs with a write conditional on the
 *   revision it last wrote. A conflict means someone else took the lease:
 *   it steps down at once.
 * - A standby reads the key every renewMs. It never compares timestamps
 *   written by another machine; it notes, on its own monotonic clock, when it
 *   first saw the current revision. If the revision has not moved for a whole
 *   lease duration, the holder is gone, and the standby takes the lease with
 *   a write conditional on that revision, so of several standbys exactly one
 *   wins.
 * - The leader counts its lease from the moment it *sent* its last
 *   successful renewal and stops acting as leader renewMs before the lease
 *   runs out, even if NATS is unreachable. A standby starts counting no
 *   earlier than the renewal was stored, so the old leader has stopped
 *   before anyone else may start.
 * - A leader that closes deletes its lease (conditionally), so a planned
 *   restart hands over at once; a crash hands over within durationMs plus
 *   one renewMs.
 */
export class LeaseElector {
  #leader = false;
  #revision = 0;
  #renewals = 0;
  #acquired = "";
  #validUntil = 0;
  #observed: { revision: number; since: number } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #tick: Promise<void> = Promise.resolve();
  #closed = false;
  #decided!: () => void;
  /** Resolves once the first attempt has decided whether this replica leads. */
  readonly decided = new Promise<void>((resolve) => {
    this.#decided = resolve;
  });

  constructor(private readonly options: LeaseOptions) {}

  /** True while this replica holds an unexpired lease. */
  isLeader(): boolean {
    return this.#leader && now() < this.#validUntil;
  }

  /** The current holder as last read (for /debug/registryz). */
  status(): { leader: boolean; identity: string; revision: number } {
    return { leader: this.isLeader(), identity: this.options.identity, revision: this.#revision };
  }

  /** Makes a first attempt, then keeps renewing or watching. */
  async start(): Promise<void> {
    await this.#run();
    this.#decided();
    this.#timer = setInterval(() => void this.#run(), this.options.renewMs);
    this.#timer.unref();
  }

  /** Stops competing; a leader releases its lease so that a standby takes over at once. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    await this.#tick;
    if (!this.#leader) return;
    await this.#setLeader(false);
    try {
      await this.options.bucket.delete(this.options.key, { expectedRevision: this.#revision });
    } catch (error) {
      this.options.logger.warn({ err: error }, "could not release the lease; it expires by itself");
    }
  }

  #run(): Promise<void> {
    // Ticks never overlap: a slow KV round trip delays the next one.
    this.#tick = this.#tick
      .then(() => (this.#closed ? undefined : this.#once()))
      .catch((error) => {
        this.options.logger.warn({ err: error }, "lease round failed");
      });
    return this.#tick;
  }

  async #once(): Promise<void> {
    if (this.#leader) {
      if (now() >= this.#validUntil) {
        this.options.logger.warn("lease not renewed in time; stepping down");
        await this.#setLeader(false);
      } else {
        await this.#renew();
        return;
      }
    }
    await this.#observe();
  }

  async #renew(): Promise<void> {
    const sentAt = now();
    try {
      const result = await this.options.bucket.put(this.options.key, this.#record(this.#renewals + 1), {
        expectedRevision: this.#revision,
      });
      this.#renewals += 1;
      this.#revision = result.revision;
      this.#validUntil = sentAt + this.options.durationMs - this.options.renewMs;
    } catch (error) {
      if (error instanceof RevisionConflictError) {
        this.options.logger.warn("lease taken by another replica; stepping down");
        await this.#setLeader(false);
        return;
      }
      // NATS unreachable: keep leading until the lease would expire.
      this.options.logger.warn({ err: error }, "lease renewal failed");
    }
  }

  async #observe(): Promise<void> {
    const entry = await this.options.bucket.get(this.options.key);
    if (!entry) return this.#acquire(0);
    const record = Struct.unwrap(entry.value) as Partial<LeaseRecord>;
    if (!this.#observed || this.#observed.revision !== entry.revision) {
      this.#observed = { revision: entry.revision, since: now() };
      return;
    }
    const duration = Math.max(Number(record.durationMs) || 0, this.options.durationMs);
    if (now() - this.#observed.since >= duration) {
      this.options.logger.info(
        { previous: record.holder, revision: entry.revision },
        "lease expired; taking it",
      );
      await this.#acquire(entry.revision);
    }
  }

  async #acquire(expectedRevision: number): Promise<void> {
    const sentAt = now();
    this.#acquired = new Date().toISOString();
    try {
      const result = await this.options.bucket.put(this.options.key, this.#record(0), { expectedRevision });
      this.#renewals = 0;
      this.#revision = result.revision;
      this.#validUntil = sentAt + this.options.durationMs - this.options.renewMs;
      this.#observed = undefined;
      await this.#setLeader(true);
    } catch (error) {
      if (!(error instanceof RevisionConflictError)) throw error;
      // Another replica won the race; watch its lease from now on.
      this.#observed = undefined;
    }
  }

  #record(renewals: number): Struct {
    const record: LeaseRecord = {
      holder: this.options.identity,
      acquired: this.#acquired,
      renewals,
      durationMs: this.options.durationMs,
    };
    return Struct.wrap(record);
  }

  async #setLeader(leader: boolean): Promise<void> {
    if (this.#leader === leader) return;
    this.#leader = leader;
    this.options.logger.info(
      { leader, identity: this.options.identity },
      leader ? "became leader" : "lost leadership",
    );
    try {
      this.options.onChange(leader);
    } catch (error) {
      this.options.logger.error({ err: error }, "leadership change handler failed");
    }
  }
}
