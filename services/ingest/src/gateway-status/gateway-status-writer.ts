import { convertGatewayApi, type GatewayApiOutput } from "@sextant/gateway-api";
import { configKey } from "@sextant/model";
import type { Logger } from "@sextant/observability";
import type { ConfigResource, CredentialPresence, Service } from "@sextant/proto";
import type { ConfigStore } from "../store/config-store.js";
import { isGatewayApiKind, plainStatus } from "./status-object.js";

/** One snapshot of what the statuses are computed from (the analysis runner's mirrors). */
export interface GatewayStatusSnapshot {
  readonly resources: readonly ConfigResource[];
  /** The registry's services by their `sextant-services` key. */
  readonly services: ReadonlyMap<string, Service>;
  /** `sextant-credential-index`: the Secrets config names that exist, and what they hold; none: not checked. */
  readonly credentials?: ReadonlyMap<string, CredentialPresence>;
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
 * A listener's certificateRefs are checked against discovery's
 * `sextant-credential-index` (which lists every Secret a certificateRef
 * names, once it exists, with whether its pair can serve: names and
 * booleans, never key material), as istiod checks the Secrets themselves.
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
        ...(snapshot.credentials ? secretsOf(snapshot.credentials) : {}),
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

/**
 * The conversion's Secret inputs from the credential index: each indexed
 * Secret exists; one without a complete pair, or whose pair does not parse
 * or match, cannot serve (istiod's ExtractCertInfo and X509KeyPair checks).
 */
function secretsOf(credentials: ReadonlyMap<string, CredentialPresence>): {
  secrets: ReadonlySet<string>;
  secretProblems: ReadonlyMap<string, string>;
} {
  const secrets = new Set<string>();
  const secretProblems = new Map<string, string>();
  for (const presence of credentials.values()) {
    const key = `${presence.namespace}/${presence.name}`;
    secrets.add(key);
    if (!presence.hasCertificate)
      secretProblems.set(
        key,
        "the Secret holds no certificate and key (tls.crt and tls.key, or cert and key)",
      );
    else if (presence.certificateProblem) secretProblems.set(key, presence.certificateProblem);
  }
  return { secrets, secretProblems };
}
