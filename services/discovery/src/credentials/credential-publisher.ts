import {
  CoreV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type V1Secret,
} from "@kubernetes/client-node";
import { type BucketSpec, Buckets, type Bus, type Mirror, type MirrorSubscription } from "@sextant/bus";
import { GATEWAY_GROUP, ReferenceGrants } from "@sextant/gateway-api";
import { type BackoffPolicy, Informer, WorkQueue } from "@sextant/kube";
import {
  configKindFilter,
  credentialKey,
  destinationRuleCredentialNames,
  gatewayCredentialNames,
} from "@sextant/model";
import {
  Gauge,
  type Logger,
  type Registry as MetricsRegistry,
  type ReadinessGate,
} from "@sextant/observability";
import type { ConfigResource, Credential } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { decodeStoredSpec } from "@sextant/validation";
import { credentialOf, presenceOf } from "./credential.js";
import { CredentialReferences } from "./references.js";

/** Options of {@link CredentialPublisher}. */
export interface CredentialPublisherOptions {
  readonly bus: () => Bus;
  /** Where Secrets are read; without it none are known, and the leader keeps the bucket empty. */
  readonly kubeConfig: KubeConfig | undefined;
  /** True while this replica holds the discovery lease: only the leader writes. */
  readonly isLeader: () => boolean;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
  readonly metrics?: MetricsRegistry;
}

const BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 5_000 };
// Helm releases and service-account tokens are large and never TLS material:
// istiod's credentials informer leaves them out the same way.
const SECRET_FIELD_SELECTOR = "type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token";
const RECONCILE = "credentials";

/**
 * CredentialPublisher keeps `sextant-credentials` equal to the Secrets that
 * config names by `credentialName` (Gateway servers' TLS, DestinationRules'
 * client TLS): it follows Gateways and DestinationRules in `sextant-config`
 * and Secrets in Kubernetes, and, while this replica leads, writes what is
 * named and deletes what no longer is (an unreferenced or deleted Secret).
 * Every change reconciles the whole bucket, which stays small: only named
 * Secrets are in it. Without Kubernetes no Secret is known, so the leader
 * empties it. Push serves them over SDS and decides who gets which.
 * `sextant-credential-index` mirrors the same keys with names and booleans
 * only (key pair present, CA present), for ingest's analysis, which must
 * never see key material.
 */
export class CredentialPublisher implements Runner {
  readonly name = "credentials";
  readonly #mirrors: Array<Pick<Mirror<unknown>, "close">> = [];
  readonly #secrets: Informer<V1Secret> | undefined;
  readonly #queue: WorkQueue<string>;
  #gateways: ReadonlyMap<string, ConfigResource> = new Map();
  #kubernetesGateways: ReadonlyMap<string, ConfigResource> = new Map();
  #referenceGrants: ReadonlyMap<string, ConfigResource> = new Map();
  #rules: ReadonlyMap<string, ConfigResource> = new Map();
  #synced = false;
  readonly #published: Gauge | undefined;

  constructor(private readonly options: CredentialPublisherOptions) {
    if (options.kubeConfig) {
      const core = options.kubeConfig.makeApiClient(CoreV1Api);
      const secrets = new Informer<V1Secret>({
        kubeConfig: options.kubeConfig,
        path: "/api/v1/secrets",
        fieldSelector: SECRET_FIELD_SELECTOR,
        list: () =>
          core.listSecretForAllNamespaces({ fieldSelector: SECRET_FIELD_SELECTOR }) as Promise<
            KubernetesListObject<V1Secret>
          >,
        logger: options.logger,
        logFields: { resource: "secrets" },
        backoff: BACKOFF,
      });
      for (const event of ["add", "update", "delete"] as const) secrets.on(event, () => this.#changed());
      this.#secrets = secrets;
    }
    this.#queue = new WorkQueue<string>({
      process: () => this.#reconcile(),
      retry: BACKOFF,
      paused: true,
      onError: (_key, error, retryInMs) =>
        options.logger.warn({ err: error, retryInMs }, "cannot write sextant-credentials; retrying"),
    });
    if (options.metrics) {
      this.#published = new Gauge({
        name: "sextant_discovery_credentials",
        help: "Secrets named by a credentialName and published to sextant-credentials",
        registers: [options.metrics],
      });
    }
  }

  async start(): Promise<void> {
    this.options.readiness.require("credentials sync");
    const config = await this.options.bus().bucket(Buckets.config);
    const follow = async (kind: string, set: (state: ReadonlyMap<string, ConfigResource>) => void) => {
      const mirror = await config.mirror({ filter: configKindFilter(kind) });
      this.#mirrors.push(mirror);
      return mirror.subscribe(({ state }) => {
        set(state);
        this.#changed();
      });
    };
    const subscriptions: MirrorSubscription[] = [
      await follow("Gateway", (state) => {
        this.#gateways = state;
      }),
      await follow("DestinationRule", (state) => {
        this.#rules = state;
      }),
      await follow("KubernetesGateway", (state) => {
        this.#kubernetesGateways = state;
      }),
      await follow("ReferenceGrant", (state) => {
        this.#referenceGrants = state;
      }),
    ];
    this.#secrets?.start();
    // Opened (created if need be) before any write: the buckets exist for push and ingest from the start.
    await this.options.bus().bucket(Buckets.credentials);
    await this.options.bus().bucket(Buckets.credentialIndex);
    await Promise.all(subscriptions.map((subscription) => subscription.synced));
    if (this.#secrets && !(await this.#secrets.synced())) return;
    this.#synced = true;
    this.leaderChanged(this.options.isLeader());
    this.options.readiness.done("credentials sync");
  }

  /** Told of each leadership change: a new leader reconciles the bucket, a former one stops writing. */
  leaderChanged(leader: boolean): void {
    if (!this.#synced) return;
    if (leader) {
      this.#queue.resume();
      this.#queue.add(RECONCILE);
    } else {
      this.#queue.pause();
    }
  }

  /** Resolves once no reconcile is waiting or running (for tests). */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  async close(): Promise<void> {
    await this.#queue.close();
    await this.#secrets?.stop();
    await Promise.all(this.#mirrors.map((mirror) => mirror.close()));
  }

  #changed(): void {
    if (this.#synced) this.#queue.add(RECONCILE);
  }

  /** The references config makes now: every credentialName of every Gateway and DestinationRule. */
  #references(): CredentialReferences {
    const names: string[] = [];
    const decode = <K extends "Gateway" | "DestinationRule">(kind: K, resource: ConfigResource) => {
      try {
        return decodeStoredSpec(kind, resource);
      } catch (error) {
        this.options.logger.error(
          { kind, name: resource.name, err: error },
          "skipping a resource that does not decode",
        );
        return undefined;
      }
    };
    for (const resource of this.#gateways.values()) {
      const spec = decode("Gateway", resource);
      if (spec) names.push(...gatewayCredentialNames(spec));
    }
    for (const resource of this.#rules.values()) {
      const spec = decode("DestinationRule", resource);
      if (spec) names.push(...destinationRuleCredentialNames(spec));
    }
    const grants = new ReferenceGrants([...this.#referenceGrants.values()]);
    for (const resource of this.#kubernetesGateways.values())
      names.push(...certificateRefNames(resource, grants));
    return new CredentialReferences(names);
  }

  async #reconcile(): Promise<void> {
    if (!this.options.isLeader()) return;
    const references = this.#references();
    const desired = new Map<string, Credential>();
    for (const secret of this.#secrets?.list() ?? []) {
      const namespace = secret.metadata?.namespace ?? "";
      const name = secret.metadata?.name ?? "";
      if (references.covers(namespace, name))
        desired.set(credentialKey({ namespace, name }), credentialOf(secret));
    }
    await this.#replace(Buckets.credentials, desired);
    await this.#replace(
      Buckets.credentialIndex,
      new Map([...desired].map(([key, credential]) => [key, presenceOf(credential)])),
    );
    this.#published?.set(desired.size);
  }

  /** Makes a bucket hold exactly `desired`: writes what changed, deletes what is no longer there. */
  async #replace<T>(spec: BucketSpec<T>, desired: ReadonlyMap<string, T>): Promise<void> {
    const bucket = await this.options.bus().bucket(spec);
    const current = new Map((await bucket.list()).map((entry) => [entry.key, entry]));
    for (const [key, value] of desired) await bucket.putOver(key, value, current.get(key));
    for (const key of current.keys()) if (!desired.has(key)) await bucket.delete(key);
  }
}

/**
 * The Secrets a Gateway API Gateway's listeners name (tls.certificateRefs),
 * as the credential names @sextant/gateway-api gives its internal Gateways:
 * `kubernetes://<namespace>/<name>`. Another namespace's only if a
 * ReferenceGrant there allows it, as the conversion requires (push then
 * serves it to the Gateway's routers).
 */
function certificateRefNames(resource: ConfigResource, grants: ReferenceGrants): string[] {
  const spec = resource.spec as
    | {
        listeners?: Array<{
          tls?: {
            certificateRefs?: Array<{ group?: string; kind?: string; namespace?: string; name?: string }>;
          };
        }>;
      }
    | undefined;
  return (spec?.listeners ?? [])
    .flatMap((listener) => listener.tls?.certificateRefs ?? [])
    .filter(
      (ref) =>
        ref.name &&
        (ref.group ?? "") === "" &&
        (ref.kind ?? "Secret") === "Secret" &&
        grants.allows({
          from: { group: GATEWAY_GROUP, kind: "Gateway", namespace: resource.namespace },
          to: { group: "", kind: "Secret", namespace: ref.namespace ?? resource.namespace, name: ref.name },
        }),
    )
    .map((ref) => `kubernetes://${ref.namespace ?? resource.namespace}/${ref.name}`);
}
