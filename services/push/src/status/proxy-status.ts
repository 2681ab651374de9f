import { Buckets, type Bus, encodeKey, Subjects } from "@sextant/bus";
import type { Logger } from "@sextant/observability";
import {
  type ConfigRef,
  NackEvent,
  type ProxyStatus,
  RegistrationEventType,
  type TypeSyncStatus,
  WorkloadRegistration,
} from "@sextant/proto";
import { type Runner, SerialTasks } from "@sextant/runtime";
import type { Connection } from "../server/connection.js";
import type { DiscoveryServerEvents } from "../server/discovery-server.js";

/** Options of {@link ProxyStatusReporter}. */
export interface ProxyStatusReporterOptions {
  bus: () => Bus;
  logger: Logger;
  replica: string;
  flushMs: number;
}

/**
 * ProxyStatusReporter tells the rest of the mesh about this replica's
 * proxies: their sync state in `sextant-proxy-status` (written at most every
 * STATUS_FLUSH_MS per proxy, removed when its last stream closes),
 * registration events for proxies naming a WorkloadGroup, and NACK events
 * traced to config. If NATS is away, state waits and is written on the next
 * flush; events published meanwhile are buffered by the NATS client.
 */
export class ProxyStatusReporter implements Runner, DiscoveryServerEvents {
  readonly name = "proxy-status";
  /** Open streams per node id. */
  readonly #streams = new Map<string, Set<Connection>>();
  readonly #dirty = new Set<string>();
  #timer: NodeJS.Timeout | undefined;

  readonly #tasks: SerialTasks;

  constructor(private readonly options: ProxyStatusReporterOptions) {
    this.#tasks = new SerialTasks((error) =>
      options.logger.warn({ err: error }, "proxy status not written; will retry"),
    );
  }

  async start(): Promise<void> {
    this.#timer = setInterval(() => void this.flush(), this.options.flushMs);
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    await this.flush();
  }

  connected(connection: Connection): void {
    const streams = this.#streams.get(connection.proxy.id) ?? new Set();
    const first = streams.size === 0;
    streams.add(connection);
    this.#streams.set(connection.proxy.id, streams);
    if (first && connection.proxy.workloadGroup)
      this.publishRegistration(connection, RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED);
    this.#dirty.add(connection.proxy.id);
  }

  disconnected(connection: Connection): void {
    const streams = this.#streams.get(connection.proxy.id);
    streams?.delete(connection);
    if (streams && streams.size === 0) {
      this.#streams.delete(connection.proxy.id);
      if (connection.proxy.workloadGroup) {
        this.publishRegistration(connection, RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED);
      }
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
      if (latest) await bucket.put(encodeKey(proxyId), this.statusOf(latest));
      else await bucket.delete(encodeKey(proxyId));
      this.#dirty.delete(proxyId);
    }
  }

  /** The sync state of a connection, as stored and as /debug/syncz shows it. */
  statusOf(connection: Connection): ProxyStatus {
    const types: Record<string, TypeSyncStatus> = {};
    for (const [typeUrl, state] of connection.watched) {
      types[typeUrl] = {
        versionSent: state.versionSent ?? "",
        nonceSent: state.nonceSent ?? "",
        versionAcked: state.versionAcked ?? "",
        lastNack: state.lastNack,
        resourceNames: state.names === "*" ? ["*"] : [...state.names].sort(),
      };
    }
    return {
      proxyId: connection.proxy.id,
      replica: this.options.replica,
      connectedAt: connection.connectedAt,
      types,
    };
  }

  private publishRegistration(connection: Connection, type: RegistrationEventType): void {
    const { proxy } = connection;
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
          replica: this.options.replica,
          at: new Date(),
        }),
      );
  }
}
