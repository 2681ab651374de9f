import { type JetStreamClient, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { connect } from "@nats-io/transport-node";
import type { Logger } from "@sextant/observability";
import { type BucketSpec, TypedBucket } from "./bucket.js";
import { type BusPolicy, CheckedSubject, checkBucket, ReadOnlyBucket } from "./contract.js";
import { DEFAULT_RETRY_POLICY, type RetryPolicy, retryTransient } from "./retry.js";
import { type SubjectSpec, TypedSubject } from "./subject.js";

/** Options of {@link connectBus}. */
export interface BusOptions {
  /** One or more comma-separated NATS URLs. */
  url: string;
  /** The connection name the server shows, e.g. "push-7f9c". */
  name: string;
  logger: Logger;
  /** Stream replicas for buckets this client creates (3 on a clustered JetStream). */
  replicas?: number;
  /**
   * How bucket reads and writes ride out a JetStream leader change (see
   * retry.ts); its DEFAULT_RETRY_POLICY by default.
   */
  retry?: RetryPolicy;
  /** Keep retrying the first connection instead of failing (services: yes; tests: no). */
  waitOnFirstConnect?: boolean;
  /** The NATS user to authenticate as, with password; unset for a server without authentication. */
  user?: string;
  password?: string;
  /**
   * The CA (PEM file) the server's certificate must chain to. Set: TLS is
   * required and verified; unset: whatever the server offers, as a local
   * nats-server without TLS.
   */
  tlsCaFile?: string;
  /**
   * The prefix of this connection's reply subjects (default `_INBOX`). With
   * per-user permissions each service may subscribe only to its own prefix.
   */
  inboxPrefix?: string;
  /**
   * The service's contract: only the buckets and subjects it declares may be
   * used, and only declared writers may write. Unset (tests, tools): anything.
   */
  policy?: BusPolicy;
}

/**
 * Bus is a service's connection to NATS: typed KV buckets and event
 * subjects. It reconnects forever; JetStream state survives a server restart
 * (file storage), and watches resume where they stopped.
 */
export class Bus {
  readonly #buckets = new Map<string, Promise<TypedBucket<unknown>>>();
  readonly #kvm: Kvm;
  readonly #jsm: Promise<JetStreamManager>;
  readonly js: JetStreamClient;

  private constructor(
    readonly nc: NatsConnection,
    private readonly options: BusOptions,
  ) {
    this.js = jetstream(nc);
    this.#kvm = new Kvm(this.js);
    // connect() has checked the API already.
    this.#jsm = this.js.jetstreamManager(false);
  }

  /** Connects to NATS and checks that JetStream is enabled. */
  static async connect(options: BusOptions): Promise<Bus> {
    const nc = await connect({
      servers: options.url.split(",").map((url) => url.trim()),
      name: options.name,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 500,
      waitOnFirstConnect: options.waitOnFirstConnect ?? false,
      ...(options.user !== undefined ? { user: options.user, pass: options.password } : {}),
      ...(options.inboxPrefix !== undefined ? { inboxPrefix: options.inboxPrefix } : {}),
      ...(options.tlsCaFile !== undefined ? { tls: { caFile: options.tlsCaFile } } : {}),
    });
    const bus = new Bus(nc, options);
    bus.#logStatus();
    try {
      await (await jetstreamManager(nc)).getAccountInfo();
    } catch (error) {
      await nc.close();
      const who = options.user === undefined ? "" : ` for user ${options.user}`;
      throw new Error(
        `NATS at ${options.url} has no JetStream${who} (start nats-server with -js; a user needs publish permission on $JS.API.INFO): ${(error as Error).message}`,
      );
    }
    return bus;
  }

  /** Opens a bucket, creating it (file storage) if it does not exist. */
  bucket<T>(spec: BucketSpec<T>): Promise<TypedBucket<T>> {
    const { policy } = this.options;
    let writable = true;
    try {
      if (policy) ({ writable } = checkBucket(policy, spec.name));
    } catch (error) {
      return Promise.reject(error);
    }
    let bucket = this.#buckets.get(spec.name);
    if (!bucket) {
      bucket = Promise.all([
        retryTransient(
          `creation of bucket ${spec.name}`,
          this.options.retry ?? DEFAULT_RETRY_POLICY,
          () =>
            this.#kvm.create(spec.name, {
              storage: "file",
              history: 1,
              replicas: this.options.replicas ?? 1,
              description: spec.description,
              ...(spec.ttlMs === undefined ? {} : { ttl: spec.ttlMs }),
            }),
          undefined,
          // A node just back has not caught up yet: the cluster places an R3
          // stream only once it has.
          (error) => /no suitable peers/i.test((error as Error)?.message ?? ""),
        ),
        this.#jsm,
      ]).then(([kv, jsm]) => {
        const context = {
          js: this.js,
          jsm,
          connectionClosed: () => this.nc.isClosed(),
          ...(this.options.retry ? { retry: this.options.retry } : {}),
        };
        return (
          policy && !writable
            ? new ReadOnlyBucket(policy.service, spec, kv, this.options.logger, context)
            : new TypedBucket(spec, kv, this.options.logger, context)
        ) as TypedBucket<unknown>;
      });
      bucket.catch(() => this.#buckets.delete(spec.name));
      this.#buckets.set(spec.name, bucket);
    }
    return bucket as Promise<TypedBucket<T>>;
  }

  /** A typed event subject on this connection. */
  subject<T>(spec: SubjectSpec<T>): TypedSubject<T> {
    const { policy } = this.options;
    return policy
      ? new CheckedSubject(policy, spec, this.nc, this.options.logger)
      : new TypedSubject(spec, this.nc, this.options.logger);
  }

  /** Flushes pending publishes and closes the connection. */
  async close(): Promise<void> {
    if (this.nc.isClosed()) return;
    await this.nc.drain().catch(() => this.nc.close());
  }

  async #logStatus(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (status.type === "disconnect" || status.type === "reconnect") {
        this.options.logger.info(
          { nats: status.type, server: "server" in status ? status.server : undefined },
          `NATS ${status.type}`,
        );
      }
    }
  }
}

/** Connects to NATS; see {@link Bus}. */
export const connectBus = (options: BusOptions): Promise<Bus> => Bus.connect(options);
