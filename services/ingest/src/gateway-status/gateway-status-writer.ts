import { convertGatewayApi, type GatewayApiOutput } from "@sextant/gateway-api";
import { configKey } from "@sextant/model";
import type { Logger } from "@sextant/observability";
import type { ConfigResource, Service } from "@sextant/proto";
import type { ConfigStore } from "../store/config-store.js";
import { isGatewayApiKind, plainStatus } from "./status-object.js";

/** One snapshot of what the statuses are computed from (the analysis runner's mirrors). */
export interface GatewayStatusSnapshot {
  readonly resources: readonly ConfigResource[];
  /** The registry's services by their `sextant-services` key. */
  readonly services: ReadonlyMap<string, Service>;
}

/** Options of {@link GatewayStatusWriter}. */
export interface GatewayStatusWriterOptions {
  readonly store: ConfigStore;
  readonly logger: Logger;
  readonly domainSuffix: string;
  /** The time a condition that changed status is stamped with (RFC 3339, seconds, as Kubernetes writes it). */
  readonly now?: () => string;
  /** The conversion; tests pass one with statuses of their own making. */
  readonly convert?: typeof convertGatewayApi;
}

/**
 * GatewayStatusWriter keeps the Kubernetes status of every Gateway API
 * resource in `sextant-config-status` (ConfigStatus.gatewayStatus): on each
 * snapshot it runs the same conversion push runs (@sextant/gateway-api) and
 * writes each resource's status that changed. A resource of a class another
 * controller implements gets none (the conversion computes none), so its
 * controller's status is never overwritten.
 *
 * Secrets are left out of the conversion's input (every certificateRef
 * counts as present): discovery's `sextant-credential-index`, the only
 * Secret names ingest may read, holds just the Secrets Istio's
 * credentialNames name, not those a listener's certificateRefs name.
 */
export class GatewayStatusWriter {
  /**
   * What was last written per key, and for which value of the resource, so
   * an unchanged status costs no KV round trip. The mirror decodes a new
   * object for every put, so a resource stored again (deleted and
   * re-created between two snapshots: its status record is new, without a
   * gatewayStatus) is written again.
   */
  readonly #written = new Map<string, { readonly resource: ConfigResource; readonly status: string }>();
  readonly #now: () => string;

  constructor(private readonly options: GatewayStatusWriterOptions) {
    this.#now = options.now ?? (() => new Date().toISOString().replace(/\.\d+Z$/, "Z"));
  }

  /** Computes the statuses of a snapshot and writes those that changed. */
  async write(snapshot: GatewayStatusSnapshot): Promise<void> {
    // The conversion's input as push gives it, so both compute the same: resources in key order,
    // services by hostname from the registry in key order (the last of a hostname wins).
    const resources = [...snapshot.resources].sort(byKey);
    const services = new Map<string, Service>();
    for (const [, service] of [...snapshot.services].sort(([a], [b]) => compare(a, b)))
      services.set(service.hostname, service);
    const convert = this.options.convert ?? convertGatewayApi;
    let statuses: GatewayApiOutput["statuses"];
    try {
      ({ statuses } = convert({
        resources,
        services,
        domainSuffix: this.options.domainSuffix,
      }));
    } catch (error) {
      // A conversion bug must not stop analysis: the statuses stay as they were until the next snapshot.
      this.options.logger.error({ err: error }, "cannot compute the Gateway API statuses");
      return;
    }
    const current = new Set<string>();
    const now = this.#now();
    for (const resource of resources) {
      if (!isGatewayApiKind(resource.kind)) continue;
      const key = configKey(resource);
      current.add(key);
      const computed = statuses.get(key);
      const desired = computed ? plainStatus(computed.status) : undefined;
      const fingerprint = JSON.stringify(desired ?? null);
      const written = this.#written.get(key);
      if (written?.resource === resource && written.status === fingerprint) continue;
      await this.options.store.setGatewayStatus(resource, desired, now);
      this.#written.set(key, { resource, status: fingerprint });
    }
    for (const key of this.#written.keys()) if (!current.has(key)) this.#written.delete(key);
    this.options.logger.debug({ statuses: statuses.size }, "gateway api statuses written");
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function byKey(a: ConfigResource, b: ConfigResource): number {
  return compare(configKey(a), configKey(b));
}
