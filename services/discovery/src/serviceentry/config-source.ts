import { Buckets, type Bus, type Mirror, type MirrorSubscription } from "@sextant/bus";
import { configKindFilter, parseConfigKey } from "@sextant/model";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { type ConfigSpecs, decodeStoredSpec } from "@sextant/validation";
import type { Registry } from "../registry/registry.js";
import type { Named } from "./translate.js";

/** Options of {@link ConfigSource}. */
export interface ConfigSourceOptions {
  readonly bus: () => Bus;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
}

/** The config kinds the registry is built from. */
type RegistryKind = "ServiceEntry" | "WorkloadEntry" | "WorkloadGroup";

/** A config resource's metadata with its spec decoded into the kind's type. */
function named<K extends RegistryKind>(kind: K, resource: ConfigResource): Named<ConfigSpecs[K]> {
  return {
    namespace: resource.namespace,
    name: resource.name,
    labels: { ...resource.labels },
    spec: decodeStoredSpec(kind, resource),
  };
}

/**
 * ConfigSource mirrors ServiceEntries, WorkloadEntries and WorkloadGroups in
 * `sextant-config` (which ingest alone writes, already validated) and feeds
 * them to the registry. One mirror per kind: nats-server 2.9 has no
 * multi-filter consumers, and the other kinds are none of discovery's
 * business.
 */
export class ConfigSource implements Runner {
  readonly name = "config";
  readonly #mirrors: Array<Pick<Mirror<unknown>, "close">> = [];

  constructor(private readonly options: ConfigSourceOptions) {}

  async start(): Promise<void> {
    this.options.readiness.require("config sync");
    const config = await this.options.bus().bucket(Buckets.config);
    const registry = this.options.registry;
    const follow = async <K extends RegistryKind>(
      kind: K,
      set: (namespace: string, name: string, value: Named<ConfigSpecs[K]> | undefined) => void,
    ): Promise<MirrorSubscription> => {
      const mirror = await config.mirror({ filter: configKindFilter(kind) });
      this.#mirrors.push(mirror);
      return mirror.subscribe(({ changes }) => {
        for (const { key, value } of changes) {
          try {
            const ref = parseConfigKey(key);
            set(ref.namespace, ref.name, value && named(kind, value));
          } catch (error) {
            this.options.logger.error({ kind, key, err: error }, "skipping a resource that does not decode");
          }
        }
      });
    };
    const subscriptions = [
      await follow("WorkloadGroup", (ns, name, value) => registry.setWorkloadGroup(ns, name, value)),
      await follow("WorkloadEntry", (ns, name, value) => registry.setWorkloadEntry(ns, name, value)),
      await follow("ServiceEntry", (ns, name, value) => registry.setServiceEntry(ns, name, value)),
    ];
    await Promise.all(subscriptions.map((subscription) => subscription.synced));
    this.options.readiness.done("config sync");
  }

  async close(): Promise<void> {
    await Promise.all(this.#mirrors.map((mirror) => mirror.close()));
  }
}
