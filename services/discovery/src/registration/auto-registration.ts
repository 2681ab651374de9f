import type { Subscription } from "@nats-io/nats-core";
import { type Bus, Subjects } from "@sextant/bus";
import { type BackoffPolicy, retry } from "@sextant/kube";
import { registrationIdentityMismatch } from "@sextant/model";
import { Counter, type Logger, type Registry as MetricsRegistry } from "@sextant/observability";
import { RegistrationEventType, type WorkloadRegistration } from "@sextant/proto";
import type { WorkloadGroup } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_group";
import type { Runner } from "@sextant/runtime";
import type { Registry } from "../registry/registry.js";
import type { Named } from "../serviceentry/translate.js";
import { ingestAuthorization } from "./ingest-token.js";

/** The annotation naming the WorkloadGroup an entry was registered for, as Istio sets it. */
const AUTO_REGISTRATION_GROUP_ANNOTATION = "istio.io/autoRegistrationGroup";
/** The annotation naming the controller that manages the entry, as Istio sets it. */
const WORKLOAD_CONTROLLER_ANNOTATION = "istio.io/workloadController";

/**
 * The name of an auto-registered WorkloadEntry, as Istio builds it:
 * `<group>-<address>[-<network>]`, with an IPv6 address's colons made
 * dashes, cut to Kubernetes' 253 characters from the end.
 */
export function autoRegisteredName(group: string, address: string, network: string): string {
  const name = [group, address.replaceAll(":", "-"), ...(network ? [network] : [])].join("-");
  return name.length > 253 ? name.slice(-253) : name;
}

/**
 * The WorkloadEntry a connecting proxy gets, as Istio builds it from the
 * group: the group's template, with the proxy's address; labels from the
 * template, then the group's metadata, then the proxy's own (later wins);
 * the proxy's network and locality when it reports them; the group's
 * annotations plus the auto-registration ones.
 */
export function workloadEntryFor(
  group: Named<WorkloadGroup>,
  event: WorkloadRegistration,
): Record<string, unknown> {
  const template = group.spec.template;
  const labels = { ...(template?.labels ?? {}), ...(group.spec.metadata?.labels ?? {}), ...event.labels };
  const locality = event.locality
    ? [event.locality.region, event.locality.zone, event.locality.subzone].join("/").replace(/\/+$/, "")
    : "";
  const spec: Record<string, unknown> = {
    address: event.address,
    labels,
    ...(Object.keys(template?.ports ?? {}).length > 0 ? { ports: template?.ports } : {}),
    ...((template?.serviceAccount || event.serviceAccount) && {
      serviceAccount: template?.serviceAccount || event.serviceAccount,
    }),
    ...((event.network || template?.network) && { network: event.network || template?.network }),
    ...((locality || template?.locality) && { locality: locality || template?.locality }),
    ...(template?.weight ? { weight: template.weight } : {}),
  };
  return {
    apiVersion: "networking.istio.io/v1",
    kind: "WorkloadEntry",
    metadata: {
      name: autoRegisteredName(group.name, event.address, event.network),
      namespace: group.namespace,
      labels,
      annotations: {
        ...(group.spec.metadata?.annotations ?? {}),
        [AUTO_REGISTRATION_GROUP_ANNOTATION]: group.name,
        [WORKLOAD_CONTROLLER_ANNOTATION]: "sextant-discovery",
      },
    },
    spec,
  };
}

/** Options of {@link AutoRegistration}. */
export interface AutoRegistrationOptions {
  readonly bus: () => Bus;
  readonly registry: Registry;
  /** Ingest's base URL. */
  readonly ingestUrl: string;
  /** A file holding the bearer token ingest's API authenticates discovery by, read on each call; unset: none sent. */
  readonly ingestTokenFile?: string;
  readonly gracePeriodMs: number;
  /** True while this replica writes (leads). */
  readonly isLeader: () => boolean;
  readonly logger: Logger;
  readonly metrics?: MetricsRegistry;
}

/** A registered workload: its entry and the proxy connections that hold it. */
interface Registered {
  readonly namespace: string;
  readonly name: string;
  event: WorkloadRegistration;
  readonly connections: Set<string>;
  removal?: NodeJS.Timeout;
}

/** A failed call to ingest is made again after a second, for as long as it still matters. */
const RETRY: BackoffPolicy = { initialMs: 1_000, maxMs: 1_000 };

/**
 * AutoRegistration is Istio's workload auto-registration: a proxy whose
 * metadata names a WorkloadGroup connects to push, push publishes a
 * `sextant.registration` event, and discovery asks ingest (the only writer
 * of config) to create the WorkloadEntry, which then flows back through
 * `sextant-config` like any other. When the proxy's last connection closes,
 * the entry is deleted after the grace period, unless the proxy reconnects.
 *
 * Every replica follows the events (no queue group), so a standby that
 * takes over knows which workloads are connected and which removals are
 * due; only the leader calls ingest. On becoming leader it applies every
 * connected workload's entry again (idempotent: ingest reports
 * "unchanged"), finishing whatever the previous leader had not.
 */
export class AutoRegistration implements Runner {
  readonly name = "auto-registration";
  readonly #registered = new Map<string, Registered>();
  /** Aborted on close: ends the retries' waits. */
  readonly #lifetime = new AbortController();
  #subscription: Subscription | undefined;
  #closed = false;
  readonly #calls: Counter<"op" | "result"> | undefined;
  readonly #refused: Counter<"reason"> | undefined;

  constructor(private readonly options: AutoRegistrationOptions) {
    if (options.metrics)
      this.#calls = new Counter({
        name: "sextant_discovery_autoregistration_calls_total",
        help: "WorkloadEntry creations and deletions asked of ingest, by op and result",
        labelNames: ["op", "result"],
        registers: [options.metrics],
      });
    if (options.metrics)
      this.#refused = new Counter({
        name: "sextant_discovery_registration_refused_total",
        help: "Registration events not written as WorkloadEntries because their verified identity is missing (no_identity) or does not match the WorkloadGroup (namespace, service_account)",
        labelNames: ["reason"],
        registers: [options.metrics],
      });
  }

  async start(): Promise<void> {
    this.#subscription = this.options
      .bus()
      .subject(Subjects.registration)
      .subscribe((event) => this.handle(event.value));
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#subscription?.unsubscribe();
    this.#lifetime.abort();
    for (const entry of this.#registered.values()) clearTimeout(entry.removal);
  }

  /** The registered workloads (for /debug/registryz). */
  status(): Array<{ namespace: string; name: string; connections: number; removalPending: boolean }> {
    return [...this.#registered.values()].map((entry) => ({
      namespace: entry.namespace,
      name: entry.name,
      connections: entry.connections.size,
      removalPending: entry.removal !== undefined,
    }));
  }

  /** Called on becoming leader: re-applies every connected workload's entry. */
  leaderChanged(leader: boolean): void {
    if (!leader) return;
    for (const entry of this.#registered.values()) if (entry.connections.size > 0) void this.#apply(entry);
  }

  /** Handles one registration event. */
  handle(event: WorkloadRegistration): void {
    if (!event.workloadGroup || !event.namespace || !event.address) {
      this.options.logger.warn({ event }, "registration event without group, namespace or address; ignored");
      return;
    }
    const name = autoRegisteredName(event.workloadGroup, event.address, event.network);
    const key = `${event.namespace}/${name}`;
    const connection = `${event.replica}/${event.proxyId}`;
    if (event.type === RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED) {
      // Refused events are not tracked, so their disconnection removes nothing either.
      if (this.#refuses(event, this.options.registry.workloadGroup(event.namespace, event.workloadGroup)))
        return;
      let entry = this.#registered.get(key);
      if (!entry) {
        entry = { namespace: event.namespace, name, event, connections: new Set() };
        this.#registered.set(key, entry);
      }
      entry.event = event;
      entry.connections.add(connection);
      clearTimeout(entry.removal);
      entry.removal = undefined;
      void this.#apply(entry);
    } else if (event.type === RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED) {
      const entry = this.#registered.get(key);
      if (!entry) return;
      entry.connections.delete(connection);
      if (entry.connections.size > 0 || entry.removal) return;
      entry.removal = setTimeout(() => {
        entry.removal = undefined;
        if (entry.connections.size > 0) return;
        this.#registered.delete(key);
        void this.#remove(entry);
      }, this.options.gracePeriodMs);
    }
  }

  async #apply(entry: Registered): Promise<void> {
    const key = `${entry.namespace}/${entry.name}`;
    await this.#retry("apply", entry, "registering a WorkloadEntry failed; retrying", async () => {
      if (this.#closed || !this.options.isLeader()) return;
      // A retry is moot once the workload has gone (or come back as another entry).
      if (this.#registered.get(key) !== entry || entry.connections.size === 0) return;
      const group = this.options.registry.workloadGroup(entry.namespace, entry.event.workloadGroup);
      if (!group) {
        this.options.logger.warn(
          { namespace: entry.namespace, group: entry.event.workloadGroup },
          "registration names a WorkloadGroup that does not exist; not registering",
        );
        this.#calls?.inc({ op: "apply", result: "no-group" });
        return;
      }
      // Again: the group may have been unknown when the event came, or changed since.
      if (this.#refuses(entry.event, group)) return;
      const body = JSON.stringify(workloadEntryFor(group, entry.event));
      const response = await fetch(`${this.options.ingestUrl}/v1/apply`, {
        method: "POST",
        body,
        headers: await ingestAuthorization(this.options.ingestTokenFile),
      });
      const text = await response.text();
      if (!response.ok) throw new Error(`ingest answered ${response.status}: ${text}`);
      this.#calls?.inc({ op: "apply", result: "ok" });
      this.options.logger.info({ namespace: entry.namespace, name: entry.name }, "WorkloadEntry registered");
    });
  }

  /**
   * True (after a log line and a count) if the event's verified identity may
   * not register into the group: push checks it before publishing, and
   * discovery again before writing, so that a WorkloadEntry is only ever
   * written for an identity that proved itself on push's mTLS port. Without
   * the group (not read yet), only a missing identity is refused.
   */
  #refuses(event: WorkloadRegistration, group: Named<WorkloadGroup> | undefined): boolean {
    const { identity } = event;
    const refusal = !identity
      ? { reason: "no_identity", message: "the event carries no verified identity" }
      : group &&
        registrationIdentityMismatch(identity, {
          namespace: group.namespace,
          name: group.name,
          serviceAccount: group.spec.template?.serviceAccount,
        });
    if (!refusal) return false;
    this.#refused?.inc({ reason: refusal.reason });
    this.options.logger.warn(
      {
        namespace: event.namespace,
        group: event.workloadGroup,
        proxy: event.proxyId,
        replica: event.replica,
        ...refusal,
      },
      "registration refused: not writing a WorkloadEntry",
    );
    return true;
  }

  async #remove(entry: Registered): Promise<void> {
    const key = `${entry.namespace}/${entry.name}`;
    const url = `${this.options.ingestUrl}/v1/config/WorkloadEntry/${encodeURIComponent(entry.namespace)}/${encodeURIComponent(entry.name)}`;
    await this.#retry("delete", entry, "removing a WorkloadEntry failed; retrying", async () => {
      // Unless the workload came back meanwhile.
      if (this.#closed || !this.options.isLeader() || this.#registered.has(key)) return;
      const response = await fetch(url, {
        method: "DELETE",
        headers: await ingestAuthorization(this.options.ingestTokenFile),
      });
      await response.arrayBuffer();
      // 404: already gone (removed by a user, or by a previous leader).
      if (!response.ok && response.status !== 404) throw new Error(`ingest answered ${response.status}`);
      this.#calls?.inc({ op: "delete", result: "ok" });
      this.options.logger.info(
        { namespace: entry.namespace, name: entry.name },
        "WorkloadEntry unregistered",
      );
    });
  }

  /** Calls ingest until call succeeds or stops itself, counting and logging each failure; close() ends it. */
  #retry(
    op: "apply" | "delete",
    entry: Registered,
    message: string,
    call: () => Promise<void>,
  ): Promise<void> {
    return retry(call, {
      backoff: RETRY,
      signal: this.#lifetime.signal,
      onFailure: (error) => {
        this.#calls?.inc({ op, result: "error" });
        this.options.logger.warn({ name: entry.name, err: error }, message);
      },
    });
  }
}
