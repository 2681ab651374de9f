import { Buckets, type Bus, encodeKey, Subjects } from "@sextant/bus";
import { registrationIdentityMismatch } from "@sextant/model";
import { Counter, type Logger, type Registry } from "@sextant/observability";
import {
  type ConfigRef,
  NackEvent,
  type ProxyStatus,
  RegistrationEventType,
  type TypeSyncStatus,
  WorkloadRegistration,
} from "@sextant/proto";
import { type Runner, SerialTasks } from "@sextant/runtime";
import type { PushContext } from "../model/push-context.js";
import type { Connection } from "../server/connection.js";
import type { DiscoveryServerEvents } from "../server/discovery-server.js";

/** Options of {@link ProxyStatusReporter}. */
export interface ProxyStatusReporterOptions {
  bus: () => Bus;
  logger: Logger;
  replica: string;
  /** Where this replica serves /debug/*, recorded so a client can ask the replica holding a stream. */
  debugAddress: string;
  flushMs: number;
  /** How often every record is rewritten; a record not rewritten for three heartbeats is stale. */
  heartbeatMs: number;
  /** The current snapshot, whose config holds the WorkloadGroups registrations are checked against. */
  context: () => PushContext | undefined;
  metrics: Registry;
}

/**
 * The most names of a subscription a stored record lists (beyond it, the
 * count only): a sidecar subscribes to every cluster's endpoints by name,
 * and every record is rewritten each heartbeat.
 */
const STORED_NAMES_MAX = 32;

/** Missed heartbeats after which a record is stale (its replica stopped or lost NATS). */
const STALE_HEARTBEATS = 3;

/** Why a connection naming a WorkloadGroup is served but not registered (the metric's reason label). */
type RegistrationRefusal = "plaintext" | "no_group" | "namespace" | "service_account";

/**
 * ProxyStatusReporter tells the rest of the mesh about this replica's
 * proxies: their sync state in `sextant-proxy-status` (written at most every
 * STATUS_FLUSH_MS per proxy, removed when its last stream closes),
 * registration events for proxies naming a WorkloadGroup whose verified
 * identity may join it (see {@link registrationRefusal}), and NACK events
 * traced to config. If NATS is away, state waits and is written on the next
 * flush; events published meanwhile are buffered by the NATS client.
 */
export class ProxyStatusReporter implements Runner, DiscoveryServerEvents {
  readonly name = "proxy-status";
  /** Open streams per node id. */
  readonly #streams = new Map<string, Set<Connection>>();
  readonly #dirty = new Set<string>();
  /**
   * The streams per node id that proved an identity allowed to register:
   * CONNECTED is published with the first, DISCONNECTED when the last closes.
   * Unproven streams of the same node id neither keep nor end a registration.
   */
  readonly #registered = new Map<string, Set<Connection>>();
  readonly #refused: Counter<"reason">;
  #timer: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;

  readonly #tasks: SerialTasks;

  constructor(private readonly options: ProxyStatusReporterOptions) {
    this.#tasks = new SerialTasks((error) =>
      options.logger.warn({ err: error }, "proxy status not written; will retry"),
    );
    this.#refused = new Counter({
      name: "sextant_registration_refused_total",
      help: "Connections naming a WorkloadGroup that were served but not auto-registered, by reason: plaintext (no identity proven), no_group, namespace or service_account (the verified identity does not match the group).",
      labelNames: ["reason"],
      registers: [options.metrics],
    });
  }

  async start(): Promise<void> {
    this.#timer = setInterval(() => void this.flush(), this.options.flushMs);
    // Rewriting every record proves the replica alive: readers judge a record by its staleAfter.
    this.#heartbeat = setInterval(() => {
      for (const proxyId of this.#streams.keys()) this.#dirty.add(proxyId);
    }, this.options.heartbeatMs);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    clearInterval(this.#heartbeat);
    await this.flush();
  }

  connected(connection: Connection): void {
    const streams = this.#streams.get(connection.proxy.id) ?? new Set();
    streams.add(connection);
    this.#streams.set(connection.proxy.id, streams);
    if (connection.proxy.workloadGroup) this.register(connection);
    this.#dirty.add(connection.proxy.id);
  }

  disconnected(connection: Connection): void {
    const streams = this.#streams.get(connection.proxy.id);
    streams?.delete(connection);
    if (streams && streams.size === 0) this.#streams.delete(connection.proxy.id);
    const registered = this.#registered.get(connection.proxy.id);
    if (registered?.delete(connection) && registered.size === 0) {
      this.#registered.delete(connection.proxy.id);
      this.publishRegistration(connection, RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED);
    }
    this.#dirty.add(connection.proxy.id);
  }

  changed(connection: Connection): void {
    this.#dirty.add(connection.proxy.id);
  }

  nacked(
    connection: Connection,
    typeUrl: string,
    resourceNames: string[],
    message: string,
    configs: ConfigRef[],
  ): void {
    this.options
      .bus()
      .subject(Subjects.nack)
      .publish(
        NackEvent.fromPartial({
          proxyId: connection.proxy.id,
          typeUrl,
          resourceNames,
          message,
          configs,
          replica: this.options.replica,
          at: new Date(),
        }),
      );
  }

  /** Writes the state of every proxy that changed since the last flush. */
  flush(): Promise<void> {
    return this.#tasks.run(() => this.flushOnce());
  }

  private async flushOnce(): Promise<void> {
    if (this.#dirty.size === 0) return;
    const bucket = await this.options.bus().bucket(Buckets.proxyStatus);
    for (const proxyId of [...this.#dirty]) {
      const streams = this.#streams.get(proxyId);
      const latest = streams ? [...streams].at(-1) : undefined;
      if (latest) await bucket.put(encodeKey(proxyId), this.statusOf(latest, STORED_NAMES_MAX));
      else await bucket.delete(encodeKey(proxyId));
      this.#dirty.delete(proxyId);
    }
  }

  /**
   * The sync state of a connection, as stored and as /debug/syncz shows it;
   * a subscription of more than maxNames names is recorded by its count only.
   */
  statusOf(connection: Connection, maxNames = Number.POSITIVE_INFINITY): ProxyStatus {
    const types: Record<string, TypeSyncStatus> = {};
    for (const [typeUrl, state] of connection.watched) {
      const count = state.names === "*" ? 1 : state.names.size;
      types[typeUrl] = {
        versionSent: state.versionSent ?? "",
        nonceSent: state.nonceSent ?? "",
        versionAcked: state.versionAcked ?? "",
        traceIdSent: state.traceIdSent ?? "",
        traceIdAcked: state.traceIdAcked ?? "",
        lastNack: state.lastNack,
        resourceNames: count > maxNames ? [] : state.names === "*" ? ["*"] : [...state.names].sort(),
        resourceCount: count,
      };
    }
    const now = Date.now();
    const { proxy } = connection;
    return {
      proxyId: proxy.id,
      replica: this.options.replica,
      connectedAt: connection.connectedAt,
      types,
      updatedAt: new Date(now),
      staleAfter: new Date(now + STALE_HEARTBEATS * this.options.heartbeatMs),
      replicaDebugAddress: this.options.debugAddress,
      clusterId: proxy.clusterId,
      istioVersion: typeof proxy.metadata.ISTIO_VERSION === "string" ? proxy.metadata.ISTIO_VERSION : "",
      generator: proxy.kind === "grpc" ? "grpc" : "",
    };
  }

  /** Registers a stream naming a WorkloadGroup if its identity may join the group; logs and counts it if not. */
  private register(connection: Connection): void {
    const { proxy } = connection;
    const refusal = this.registrationRefusal(connection);
    if (refusal) {
      this.#refused.inc({ reason: refusal.reason });
      this.options.logger.warn(
        {
          proxy: proxy.id,
          stream: connection.id,
          group: `${proxy.namespace}/${proxy.workloadGroup}`,
          ...refusal,
        },
        "not auto-registering a proxy naming a WorkloadGroup; it is served its config",
      );
      return;
    }
    const streams = this.#registered.get(proxy.id) ?? new Set();
    streams.add(connection);
    this.#registered.set(proxy.id, streams);
    if (streams.size === 1)
      this.publishRegistration(connection, RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED);
  }

  /**
   * Why a stream may not register, as Istio decides it: only a stream on the
   * mTLS port has a verified identity, and that identity must match the
   * WorkloadGroup (its namespace; its template's service account, if named).
   * A plaintext client could otherwise claim any group and any address.
   */
  private registrationRefusal(
    connection: Connection,
  ): { reason: RegistrationRefusal; message: string } | undefined {
    const { proxy, verifiedIdentity } = connection;
    if (!verifiedIdentity)
      return { reason: "plaintext", message: "the stream proved no identity (not on the mTLS port)" };
    const group = this.options.context()?.workloadGroup(proxy.namespace, proxy.workloadGroup ?? "");
    if (!group)
      return {
        reason: "no_group",
        message: `there is no WorkloadGroup ${proxy.namespace}/${proxy.workloadGroup}`,
      };
    return registrationIdentityMismatch(verifiedIdentity, {
      namespace: group.ref.namespace,
      name: group.ref.name,
      serviceAccount: group.spec.template?.serviceAccount,
    });
  }

  private publishRegistration(connection: Connection, type: RegistrationEventType): void {
    const { proxy, verifiedIdentity } = connection;
    this.options
      .bus()
      .subject(Subjects.registration)
      .publish(
        WorkloadRegistration.fromPartial({
          type,
          workloadGroup: proxy.workloadGroup,
          namespace: proxy.namespace,
          proxyId: proxy.id,
          address: proxy.ip,
          labels: { ...proxy.labels },
          serviceAccount: proxy.serviceAccount,
          network: proxy.network,
          locality: proxy.locality,
          identity: verifiedIdentity,
          replica: this.options.replica,
          at: new Date(),
        }),
      );
  }
}
