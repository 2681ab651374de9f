import { Buckets, type Bus, type Mirror } from "@sextant/bus";
import { configKindFilter } from "@sextant/model";
import type { Logger, ReadinessGate } from "@sextant/observability";
import type { ConfigResource } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { decodeStoredSpec } from "@sextant/validation";
import type { ProxyConfigResource } from "../inject/proxy-configs.js";

/** Options of {@link ProxyConfigStore}. */
export interface ProxyConfigStoreOptions {
  readonly bus: () => Bus;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
}

/**
 * The ProxyConfig resources ingest stored in sextant-config (validated
 * there), followed with a mirror of that kind's keys only, for the injector
 * (istiod injects from its own config store in the same way). The webhook is
 * not ready until the first read is in, so that no pod is injected without
 * the ProxyConfigs that apply to it.
 */
export class ProxyConfigStore implements Runner {
  readonly name = "proxy-configs";
  #mirror: Mirror<ConfigResource> | undefined;
  #current: readonly ProxyConfigResource[] = [];

  constructor(private readonly options: ProxyConfigStoreOptions) {}

  /** The ProxyConfigs as last read. */
  current(): readonly ProxyConfigResource[] {
    return this.#current;
  }

  async start(): Promise<void> {
    const { readiness, logger } = this.options;
    readiness.require("proxy configs");
    const config = await this.options.bus().bucket(Buckets.config);
    this.#mirror = await config.mirror({ filter: configKindFilter("ProxyConfig") });
    const subscription = this.#mirror.subscribe(({ state }) => {
      const resources: ProxyConfigResource[] = [];
      for (const resource of state.values()) {
        try {
          resources.push({
            namespace: resource.namespace,
            name: resource.name,
            spec: decodeStoredSpec("ProxyConfig", resource),
          });
        } catch (error) {
          logger.error(
            { namespace: resource.namespace, name: resource.name, err: error },
            "skipping a ProxyConfig that does not decode",
          );
        }
      }
      this.#current = resources;
    });
    await subscription.synced;
    readiness.done("proxy configs");
  }

  async close(): Promise<void> {
    await this.#mirror?.close();
  }
}
