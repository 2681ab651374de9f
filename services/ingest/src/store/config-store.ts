import { isDeepStrictEqual } from "node:util";
import { Buckets, type Bus, type Entry, RevisionConflictError, type TypedBucket } from "@sextant/bus";
import { type ConfigRefLike, configKey, configKindFilter } from "@sextant/model";
import type { ConfigMessage, ConfigResource, ConfigStatus } from "@sextant/proto";
import { type StatusObject, withTransitionTimes } from "../gateway-status/status-object.js";
import { ChangeTraces } from "../trace/change-traces.js";

/** What an apply did to the stored resource, as kubectl reports it. */
export type ApplyResult = "created" | "configured" | "unchanged";

/** The outcome of storing one resource. */
export interface StoredResource {
  readonly ref: ConfigRefLike;
  readonly result: ApplyResult;
  readonly revision: number;
  readonly generation: number;
}

/** The origin of messages recorded from proxies' NACKs. */
export const PROXY_ORIGIN = "proxy";

/** How often an apply retries after losing a race with another writer of the same key. */
const MAX_APPLY_ATTEMPTS = 20;

/**
 * ConfigStore is the only writer of the `sextant-config` bucket. Writes of one
 * key are serialised through the KV revision, so concurrent applies never
 * lose an update; an unchanged resource is not rewritten and sends no event.
 */
export class ConfigStore {
  /** Every change stored gets a trace (`sextantctl trace`). */
  readonly traces: ChangeTraces;

  /** bus is read on first use: the store is built before the bus runner connects. */
  constructor(private readonly bus: () => Bus) {
    this.traces = new ChangeTraces(bus);
  }

  private get config(): Promise<TypedBucket<ConfigResource>> {
    return this.bus().bucket(Buckets.config);
  }

  private get status(): Promise<TypedBucket<ConfigStatus>> {
    return this.bus().bucket(Buckets.configStatus);
  }

  /**
   * Stores a resource. `generation` is the stored one, plus one when the spec
   * changed (labels and annotations do not count, as in Kubernetes).
   */
  async apply(resource: ConfigResource, source: string, changedBy = ""): Promise<StoredResource> {
    const ref = { kind: resource.kind, namespace: resource.namespace, name: resource.name };
    const key = configKey(ref);
    for (let attempt = 1; ; attempt++) {
      const current = await (await this.config).get(key);
      const generation = !current
        ? 1
        : isDeepStrictEqual(current.value.spec ?? {}, resource.spec ?? {})
          ? current.value.generation
          : current.value.generation + 1;
      try {
        const put = await (await this.config).putOver(key, { ...resource, generation, revision: 0 }, current);
        const result: ApplyResult = !current ? "created" : put.changed ? "configured" : "unchanged";
        await this.recordSource(key, ref, source, generation, result === "unchanged" ? undefined : changedBy);
        if (result !== "unchanged") await this.traces.record(ref, { generation, deleted: false, changedBy });
        return { ref, result, revision: put.revision, generation };
      } catch (error) {
        if (!(error instanceof RevisionConflictError) || attempt >= MAX_APPLY_ATTEMPTS) throw error;
      }
    }
  }

  /** Deletes a resource and its status; false if it did not exist. */
  async delete(ref: ConfigRefLike): Promise<boolean> {
    const key = configKey(ref);
    const stored = await (await this.config).get(key);
    const deleted = await (await this.config).delete(key);
    await (await this.status).delete(key);
    if (deleted)
      await this.traces.record(ref, {
        generation: stored?.value.generation ?? 0,
        deleted: true,
        changedBy: "",
      });
    return deleted;
  }

  /**
   * Deletes a resource only if it was last applied from source, so that a
   * file losing a resource does not delete one that another file or the API
   * has since taken over.
   */
  async deleteIfOwned(ref: ConfigRefLike, source: string): Promise<boolean> {
    const status = await (await this.status).get(configKey(ref));
    if (status && status.value.source !== source) return false;
    return this.delete(ref);
  }

  /** Reads one resource, with the revision it is stored at. */
  async get(ref: ConfigRefLike): Promise<ConfigResource | undefined> {
    const entry = await (await this.config).get(configKey(ref));
    return entry && withRevision(entry);
  }

  /** Lists resources, optionally of one kind and namespace. */
  async list(filter: { kind?: string; namespace?: string } = {}): Promise<ConfigResource[]> {
    const entries = await (await this.config).list(
      filter.kind ? configKindFilter(filter.kind, filter.namespace) : ">",
    );
    return entries
      .map(withRevision)
      .filter((resource) => filter.namespace === undefined || resource.namespace === filter.namespace);
  }

  /** The status of every resource that has one. */
  async statuses(): Promise<ConfigStatus[]> {
    return (await (await this.status).list()).map((entry) => entry.value);
  }

  /** Resources whose recorded source satisfies the predicate (a source finding what it owns). */
  async ownedByWithSource(
    predicate: (source: string) => boolean,
  ): Promise<Array<{ ref: ConfigRefLike; source: string }>> {
    return (await (await this.status).list())
      .filter((entry) => predicate(entry.value.source))
      .map(({ value }) => ({
        ref: { kind: value.kind, namespace: value.namespace, name: value.name },
        source: value.source,
      }));
  }

  /**
   * Replaces the messages of one origin ("analysis", "proxy") on a resource,
   * leaving the other origins' messages alone. Writes nothing if nothing
   * changed, and creates no status for a resource that has none and gets no
   * message. A new observedGeneration also clears the proxies' messages: a
   * NACK is about the generation the proxy was sent, not the next one.
   */
  async setMessages(
    ref: ConfigRefLike,
    origin: string,
    messages: ConfigMessage[] | ((current: ConfigMessage[]) => ConfigMessage[]),
    observedGeneration?: number,
  ): Promise<void> {
    await (await this.status).update(configKey(ref), (current) => {
      const next =
        typeof messages === "function"
          ? messages((current?.messages ?? []).filter((message) => message.origin === origin))
          : messages;
      if (!current && next.length === 0) return undefined;
      const newGeneration =
        observedGeneration !== undefined &&
        current !== undefined &&
        current.observedGeneration !== 0 &&
        current.observedGeneration !== observedGeneration;
      const kept = (current?.messages ?? []).filter(
        (message) => message.origin !== origin && !(newGeneration && message.origin === PROXY_ORIGIN),
      );
      return {
        source: "",
        lastChangedBy: "",
        gatewayStatus: undefined,
        ...current,
        ...ref,
        observedGeneration: observedGeneration ?? current?.observedGeneration ?? 0,
        messages: [...kept, ...next],
      };
    });
  }

  /** The status of one resource, if it has one. */
  async getStatus(ref: ConfigRefLike): Promise<ConfigStatus | undefined> {
    return (await (await this.status).get(configKey(ref)))?.value;
  }

  /**
   * Sets the Kubernetes status of a Gateway API resource (undefined: it has
   * none). Each condition keeps its stored lastTransitionTime while its
   * status stays, else gets `now`; a status equal to the stored one is not
   * written, so replicas computing the same status write it once. Nothing is
   * written for a resource without a status record (not stored, or deleted
   * meanwhile): every stored resource has one from its apply.
   *
   * A route that had parents of Sextant's and now has none keeps an empty
   * `parents` rather than no status, so that its Kubernetes object loses
   * Sextant's entries (the Kubernetes source writes only stored statuses).
   */
  async setGatewayStatus(ref: ConfigRefLike, desired: StatusObject | undefined, now: string): Promise<void> {
    await (await this.status).update(configKey(ref), (current) => {
      if (!current) return undefined;
      const hadParents = Array.isArray(current.gatewayStatus?.parents);
      const next = desired
        ? withTransitionTimes(desired, current.gatewayStatus, now)
        : hadParents
          ? { parents: [] }
          : undefined;
      return isDeepStrictEqual(next, current.gatewayStatus) ? current : { ...current, gatewayStatus: next };
    });
  }

  /**
   * Records where a resource came from and, when it changed, who changed it
   * (changedBy undefined: it did not change). A new status starts at the
   * stored generation: analysis may have run before it existed (and written
   * nothing), and a NACK recorded next must still be cleared when the
   * generation moves on.
   */
  private async recordSource(
    key: string,
    ref: ConfigRefLike,
    source: string,
    generation: number,
    changedBy: string | undefined,
  ): Promise<void> {
    await (await this.status).update(key, (current) => {
      const lastChangedBy = changedBy ?? current?.lastChangedBy ?? "";
      return current?.source === source && current.lastChangedBy === lastChangedBy
        ? current
        : {
            observedGeneration: generation,
            messages: [],
            gatewayStatus: undefined,
            ...current,
            ...ref,
            source,
            lastChangedBy,
          };
    });
  }
}

function withRevision(entry: Entry<ConfigResource>): ConfigResource {
  return { ...entry.value, revision: entry.revision };
}
