import { Buckets, type Bus, type Watch } from "@sextant/bus";
import { configKindFilter, parseConfigKey } from "@sextant/model";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource } from "@sextant/proto";
import { ServiceEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/service_entry";
import { WorkloadEntry } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_entry";
import { WorkloadGroup } from "@sextant/proto/gen/istio/networking/v1alpha3/workload_group";
import type { Runner } from "@sextant/runtime";
import type { Registry } from "../registry/registry.js";
import type { Named } from "./translate.js";

/** Options of {@link ConfigSource}. */
export interface ConfigSourceOptions {
  readonly bus: () => Bus;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
}

/** A config resource's metadata with its spec decoded by the generated type's fromJSON. */
export function decodeResource<T>(resource: ConfigResource, fromJSON: (json: unknown) => T): Named<T> {
  return {
    namespace: resource.namespace,
    name: resource.name,
    labels: { ...resource.labels },
    spec: fromJSON(resource.spec ?? {}),
  };
}

/**
 * ConfigSource follows ServiceEntries, WorkloadEntries and WorkloadGroups in
 * `sextant-config` (which ingest alone writes, already validated) and feeds
 * them to the registry. One watch per kind: nats-server 2.9 has no
 * multi-filter consumers, and the other kinds are none of discovery's
 * business.
 */
export class ConfigSource implements Runner {
  readonly name = "config";
  readonly #watches: Watch[] = [];

  constructor(private readonly options: ConfigSourceOptions) {}

  async start(): Promise<void> {
    this.options.readiness.require("config sync");
    const config = await this.options.bus().bucket(Buckets.config);
    const registry = this.options.registry;
    const follow = async <T>(
      kind: string,
      fromJSON: (json: unknown) => T,
      set: (namespace: string, name: string, value: Named<T> | undefined) => void,
    ) => {
      this.#watches.push(
        await config.watch(
          (event) => {
            const ref = parseConfigKey(event.key);
            if (event.type === "delete") return set(ref.namespace, ref.name, undefined);
            try {
              set(ref.namespace, ref.name, decodeResource(event.value, fromJSON));
            } catch (error) {
              this.options.logger.error(
                { kind, key: event.key, err: error },
                "skipping a resource that does not decode",
              );
            }
          },
          { filter: configKindFilter(kind) },
        ),
      );
    };
    await follow("WorkloadGroup", WorkloadGroup.fromJSON, (ns, name, value) =>
      registry.setWorkloadGroup(ns, name, value),
    );
    await follow("WorkloadEntry", WorkloadEntry.fromJSON, (ns, name, value) =>
      registry.setWorkloadEntry(ns, name, value),
    );
    await follow("ServiceEntry", ServiceEntry.fromJSON, (ns, name, value) =>
      registry.setServiceEntry(ns, name, value),
    );
    await Promise.all(this.#watches.map((watch) => watch.ready));
    this.options.readiness.done("config sync");
  }

  async close(): Promise<void> {
    await Promise.all(this.#watches.map((watch) => watch.stop()));
  }
}
