// The membership record: each control-plane process keeps a key in
// sextant-members while it runs, so that anyone reading the bucket (ingest's
// GET /v1/version, `sextantctl version`) sees which services run, at which
// version and with how many replicas. The bucket's TTL removes the key of a
// process that died without deleting it.
import type { Logger } from "@sextant/observability";
import { Struct } from "@sextant/proto";
import { Buckets } from "./catalog.js";
import type { Bus } from "./connection.js";
import { encodeKey } from "./keys.js";

/** One running process, as it records itself. */
export interface MemberRecord {
  /** The service's name, e.g. "push". */
  readonly service: string;
  /** Its release (SEXTANT_VERSION). */
  readonly version: string;
  /** Its REPLICA_ID (the pod's name under Kubernetes). */
  readonly instance: string;
  /** When it started (ISO 8601). */
  readonly started: string;
  /** When it last rewrote the record (ISO 8601): every write restarts the key's TTL. */
  readonly refreshed: string;
}

/** How often a process rewrites its record: a third of the bucket's TTL, so two refreshes may fail before it expires. */
const MEMBER_REFRESH_MS = (Buckets.members.ttlMs ?? 30_000) / 3;

/** Keeps one process's record in sextant-members from start() to stop(). */
export class MemberRecorder {
  readonly #key: string;
  readonly #started = new Date().toISOString();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly bus: () => Bus,
    private readonly member: { service: string; version: string; instance: string },
    private readonly logger: Logger,
    private readonly refreshMs = MEMBER_REFRESH_MS,
  ) {
    this.#key = encodeKey(member.service, member.instance);
  }

  /** Writes the record, then rewrites it every refreshMs (default {@link MEMBER_REFRESH_MS}). */
  async start(): Promise<void> {
    await this.#write();
    this.#timer = setInterval(() => {
      this.#write().catch((error: Error) =>
        // NATS away: the connection reconnects, and the next refresh writes again.
        this.logger.warn({ err: error.message }, "could not refresh the membership record"),
      );
    }, this.refreshMs);
    this.#timer.unref();
  }

  /** Stops refreshing and deletes the record, so the replica count drops now rather than at expiry. */
  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await (await this.bus().bucket(Buckets.members)).delete(this.#key).catch((error: Error) => {
      this.logger.warn(
        { err: error.message },
        "could not delete the membership record; it expires on its own",
      );
    });
  }

  async #write(): Promise<void> {
    const record: MemberRecord = {
      ...this.member,
      started: this.#started,
      refreshed: new Date().toISOString(),
    };
    await (await this.bus().bucket(Buckets.members)).put(this.#key, Struct.wrap({ ...record }));
  }
}

/** Every process's record in sextant-members, sorted by service and instance. */
export async function listMembers(bus: Bus): Promise<MemberRecord[]> {
  const entries = await (await bus.bucket(Buckets.members)).list();
  return entries
    .map((entry) => Struct.unwrap(entry.value) as unknown as MemberRecord)
    .sort((a, b) => a.service.localeCompare(b.service) || a.instance.localeCompare(b.instance));
}
