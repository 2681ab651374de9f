import {
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { Buckets, type Watch as BucketWatch, type Bus, type WatchEvent } from "@sextant/bus";
import { type BackoffPolicy, customResourceServed, Informer, WorkQueue } from "@sextant/kube";
import { type ConfigRefLike, configKey, describeRef, parseConfigKey } from "@sextant/model";
import { Counter, type Logger, type ReadinessGate, type Registry } from "@sextant/observability";
import type { ConfigStatus } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import { GATEWAY_API_GROUP } from "@sextant/validation";
import type { Applier } from "../apply/applier.js";
import { DEFAULT_NAMESPACE, type DocumentError } from "../apply/prepare.js";
import {
  mergedRouteParents,
  type StatusObject,
  statusFieldsUpToDate,
  statusForGeneration,
} from "../gateway-status/status-object.js";
import type { ConfigStore } from "../store/config-store.js";
import type { SourceErrors } from "./file-source.js";
import { configDocument, type WatchedKind, watchedKinds } from "./kube-objects.js";
import {
  analysisStatus,
  type IstioStatus,
  statusPatch,
  statusUpToDate,
  validationErrorStatus,
} from "./kube-status.js";

/** The Gateway API's route kinds: their `status.parents` is shared by the controllers of their parents. */
const ROUTE_KINDS: ReadonlySet<string> = new Set(["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"]);

/** The status source of every resource the Kubernetes source stores. */
export const KUBERNETES_SOURCE = "kubernetes";

const SYNC_CONDITION = "kubernetes initial sync";

/** An Istio custom resource as the API server returns it. */
type IstioObject = KubernetesObject & { spec?: unknown; status?: unknown };

/** The namespace ingest stores an object under: a cluster-scoped one's is `default` (see prepare.ts). */
function storedNamespace(kind: WatchedKind, object: IstioObject): string | undefined {
  return kind.clusterScoped ? DEFAULT_NAMESPACE : object.metadata?.namespace;
}

/** The namespace the informer's cache knows an object by: none for a cluster-scoped one. */
function informerNamespace(kind: WatchedKind, namespace: string): string | undefined {
  return kind.clusterScoped ? undefined : namespace;
}

/** Options of {@link KubeSource}. */
export interface KubeSourceOptions {
  /** Where the API server is and how to authenticate; tests pass one pointing at a fake server. */
  kubeConfig: KubeConfig;
  applier: Applier;
  store: ConfigStore;
  /** Read on start: the bus runner connects first. */
  bus: () => Bus;
  logger: Logger;
  readiness: ReadinessGate;
  metrics: Registry;
  /** Retry delays after an informer or an object fails: the first, doubled up to the most. */
  backoff?: { initialMs: number; maxMs: number };
}

/** One kind's informer. */
interface KindInformer {
  readonly kind: WatchedKind;
  readonly informer: Informer<IstioObject>;
}

/** What the source last did with one object. */
interface ObjectState {
  /** The applied document as JSON: an object whose document did not change is not applied again. */
  readonly document: string;
  /** The object's metadata.generation, which its status's observedGeneration reports. */
  readonly kubeGeneration: number;
  /** Sextant's generation of the stored value; undefined if the object is invalid. */
  readonly storedGeneration?: number;
  readonly errors: DocumentError[];
}

/**
 * KubeSource keeps the config store in step with the Istio custom resources
 * of a Kubernetes cluster. An informer per kind (cluster-wide, at one served
 * version) feeds a work queue of object keys; each key is reconciled against
 * the informer's cache, so bursts, relists and retries all converge on the
 * cluster's current state:
 *
 * - an object that exists is applied through the Applier with source
 *   `kubernetes` (server-managed metadata stripped, so it is the same value as
 *   from a file or HTTP); an invalid one is not stored, and its errors go to
 *   its status subresource (`status.validationMessages`, as Istio writes it);
 * - an object that is gone is deleted from the store if `kubernetes` still
 *   owns it;
 * - a stored object's analysis and proxy messages (sextant-config-status)
 *   are written to its status too. A status is only written when it differs,
 *   since each write comes back as a MODIFIED event.
 *
 * Ready once every kind is listed and applied and what was deleted from the
 * cluster while ingest was down is deleted from the store. An informer that
 * fails (the API server went away, a reset watch) restarts with a backoff; a
 * 410 Gone makes it relist.
 */
export class KubeSource implements Runner {
  readonly name = "kubernetes-source";
  readonly #api: CustomObjectsApi;
  readonly #informers = new Map<string, KindInformer>();
  readonly #objects = new Map<string, ObjectState>();
  readonly #statuses = new Map<string, ConfigStatus>();
  /** Jitter, so replicas that lost the API server together do not come back in step. */
  readonly #backoff: BackoffPolicy;
  /** Reconciles and orphan collection run one at a time, in order. */
  readonly #queue: WorkQueue<string>;
  readonly #watchFailures: Counter<"kind">;
  #statusWatch: BucketWatch | undefined;
  #closed = false;
  /** Aborts the served checks' retries on close. */
  readonly #stop = new AbortController();

  constructor(private readonly options: KubeSourceOptions) {
    this.#api = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.#backoff = { ...(options.backoff ?? { initialMs: 200, maxMs: 30_000 }), jitter: "fifth" };
    this.#queue = new WorkQueue({
      process: (key) => this.reconcile(key),
      retry: this.#backoff,
      onError: (key, error, retryInMs) =>
        this.options.logger.warn(
          { resource: describeRef(parseConfigKey(key)), err: error, retryInMs },
          "cannot sync a kubernetes object; retrying",
        ),
    });
    this.#watchFailures = new Counter({
      name: "sextant_ingest_kubernetes_watch_failures_total",
      help: "Failed lists or watches of Istio custom resources, by kind; each is retried after a backoff.",
      labelNames: ["kind"],
      registers: [options.metrics],
    });
  }

  async start(): Promise<void> {
    this.options.readiness.require(SYNC_CONDITION);
    const statuses = await this.options.bus().bucket(Buckets.configStatus);
    this.#statusWatch = await statuses.watch((event) => this.onStatusEvent(event));
    for (const kind of watchedKinds())
      if (!kind.optional) this.#informers.set(kind.kind, this.makeInformer(kind));
    for (const { informer } of this.#informers.values()) informer.start();
    // Not awaited: an unreachable API server must not hold up the other runners; /ready says it.
    void this.initialSync();
  }

  /**
   * Starts an informer for each optional kind (the Gateway API's) that the
   * API server serves. Asked once, at start: a kind whose CRD is installed
   * later is watched after the next restart.
   */
  private async watchServedOptionalKinds(): Promise<void> {
    for (const kind of watchedKinds()) {
      if (!kind.optional || this.#closed) continue;
      if (!(await this.served(kind))) {
        this.options.logger.info(
          { kind: kind.kind, path: kind.path },
          "not served by the API server (CRD not installed); not watched",
        );
        continue;
      }
      if (this.#closed) return;
      const state = this.makeInformer(kind);
      this.#informers.set(kind.kind, state);
      state.informer.start();
    }
  }

  /** Whether the API server serves a kind: a 404 says its CRD is not installed; other failures are retried. */
  private served(kind: WatchedKind): Promise<boolean> {
    return customResourceServed(this.options.kubeConfig, kind, {
      backoff: this.#backoff,
      signal: this.#stop.signal,
      onRetry: () => this.#watchFailures.inc({ kind: kind.kind }),
    });
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#stop.abort();
    for (const { informer } of this.#informers.values()) await informer.stop();
    await this.#statusWatch?.stop();
    await this.#queue.close();
  }

  /** Objects in the cluster that failed validation, for GET /v1/analyze. */
  errors(): SourceErrors[] {
    return [...this.#objects]
      .filter(([, state]) => state.errors.length > 0)
      .map(([key, state]) => ({
        source: `${KUBERNETES_SOURCE}:${describeRef(parseConfigKey(key))}`,
        errors: state.errors,
      }));
  }

  private makeInformer(kind: WatchedKind): KindInformer {
    const informer = new Informer<IstioObject>({
      kubeConfig: this.options.kubeConfig,
      path: kind.path,
      list: async () =>
        (await this.#api.listClusterCustomObject({
          group: kind.group,
          version: kind.version,
          plural: kind.plural,
        })) as KubernetesListObject<IstioObject>,
      logger: this.options.logger,
      logFields: { kind: kind.kind },
      backoff: this.#backoff,
      onFailure: () => this.#watchFailures.inc({ kind: kind.kind }),
    });
    const enqueue = (object: IstioObject) => {
      const name = object.metadata?.name;
      const namespace = storedNamespace(kind, object);
      if (name && namespace) this.#queue.add(configKey({ kind: kind.kind, namespace, name }));
    };
    informer.on("add", enqueue);
    informer.on("update", enqueue);
    informer.on("delete", enqueue);
    return { kind, informer };
  }

  private async initialSync(): Promise<void> {
    await this.watchServedOptionalKinds();
    const informers = [...this.#informers.values()];
    const synced = await Promise.all(informers.map((state) => state.informer.synced()));
    if (this.#closed || !synced.every(Boolean)) return;
    for (const state of informers) {
      for (const object of state.informer.list()) {
        const name = object.metadata?.name;
        const namespace = storedNamespace(state.kind, object);
        if (name && namespace) this.#queue.add(configKey({ kind: state.kind.kind, namespace, name }));
      }
    }
    await this.#queue.run(async () => {
      try {
        await this.collectOrphans();
      } catch (error) {
        this.options.logger.error({ err: error }, "kubernetes source task failed");
      }
    });
    if (this.#closed) return;
    this.options.readiness.done(SYNC_CONDITION);
    this.options.logger.info(
      { objects: informers.reduce((sum, state) => sum + state.informer.list().length, 0) },
      "kubernetes initial sync done",
    );
  }

  /** After the first lists: delete what the cluster lost while ingest was down. */
  private async collectOrphans(): Promise<void> {
    const owned = await this.options.store.ownedByWithSource((source) => source === KUBERNETES_SOURCE);
    for (const { ref } of owned) {
      const state = this.#informers.get(ref.kind);
      if (!state || state.informer.get(ref.name, informerNamespace(state.kind, ref.namespace))) continue;
      await this.options.store.deleteIfOwned(ref, KUBERNETES_SOURCE);
      this.options.logger.info({ resource: describeRef(ref) }, "deleted a resource no longer in the cluster");
    }
  }

  private onStatusEvent(event: WatchEvent<ConfigStatus>): void {
    // Only what this source stored gets its messages written to the cluster.
    if (event.type === "delete" || event.value.source !== KUBERNETES_SOURCE) {
      this.#statuses.delete(event.key);
      return;
    }
    this.#statuses.set(event.key, event.value);
    // New analysis or proxy messages for an object of the cluster: bring its status up to date.
    if (this.#objects.has(event.key)) this.#queue.add(event.key);
  }

  /** Makes the store, and the object's status, agree with the informer's cache for one key. */
  private async reconcile(key: string): Promise<void> {
    const ref = parseConfigKey(key);
    const state = this.#informers.get(ref.kind);
    if (!state?.informer.hasSynced) return; // the initial sync enqueues everything once listed
    const object = state.informer.get(ref.name, informerNamespace(state.kind, ref.namespace));
    if (!object) {
      this.#objects.delete(key);
      if (await this.options.store.deleteIfOwned(ref, KUBERNETES_SOURCE)) {
        this.options.logger.info({ resource: describeRef(ref) }, "deleted: gone from the cluster");
      }
      return;
    }
    const document = JSON.stringify(configDocument(object));
    const kubeGeneration = object.metadata?.generation ?? 0;
    let current = this.#objects.get(key);
    if (current?.document === document) {
      current = { ...current, kubeGeneration };
    } else {
      // JSON is YAML: the object goes through the same parse and validation as a file or a POST.
      const outcome = await this.options.applier.apply(document, KUBERNETES_SOURCE);
      if (outcome.ok) {
        current = { document, kubeGeneration, storedGeneration: outcome.applied[0]?.generation, errors: [] };
      } else if (outcome.reason === "invalid") {
        // What was stored from an earlier valid version stays, as a broken file keeps its resources.
        current = { document, kubeGeneration, errors: outcome.errors };
        this.options.logger.warn(
          { resource: describeRef(ref), errors: outcome.errors.length, first: outcome.errors[0]?.message },
          "kubernetes object rejected by validation; not stored",
        );
      } else {
        throw new Error(outcome.message);
      }
    }
    this.#objects.set(key, current);
    await this.syncStatus(key, ref, state.kind, object, current);
  }

  private async syncStatus(
    key: string,
    ref: ConfigRefLike,
    kind: WatchedKind,
    object: IstioObject,
    state: ObjectState,
  ): Promise<void> {
    if (kind.group === GATEWAY_API_GROUP) return this.syncGatewayStatus(ref, kind, object, state);
    let desired: IstioStatus;
    if (state.errors.length > 0) {
      desired = validationErrorStatus(state.errors, state.kubeGeneration);
    } else {
      const status = this.#statuses.get(key);
      // Only for what this source stored, and once analysis has seen the stored generation:
      // the status watch re-enqueues the key when it has.
      if (status?.source !== KUBERNETES_SOURCE || status.observedGeneration !== state.storedGeneration)
        return;
      desired = analysisStatus(status.messages, state.kubeGeneration);
    }
    if (statusUpToDate(object.status, desired)) return;
    await this.patchStatus(ref, kind, statusPatch(desired));
  }

  /**
   * Writes a Gateway API object's status as ingest stored it
   * (sextant-config-status's gatewayStatus), once it is about the stored
   * generation, and only the fields that differ from the object's. A
   * GatewayClass, Gateway or BackendTLSPolicy of Sextant's classes is
   * Sextant's alone; a route's `status.parents` is shared with the
   * controllers of its other parents, whose entries are kept (a route
   * detached from Sextant's Gateways has `parents: []` stored, which
   * removes Sextant's entries). Nothing is
   * written for an invalid object (not stored) or one of another
   * controller's class (no status stored).
   */
  private async syncGatewayStatus(
    ref: ConfigRefLike,
    kind: WatchedKind,
    object: IstioObject,
    state: ObjectState,
  ): Promise<void> {
    if (state.errors.length > 0 || state.storedGeneration === undefined) return;
    const stored = this.#statuses.get(configKey(ref))?.gatewayStatus;
    if (!stored) return;
    const desired = statusForGeneration(stored, state.storedGeneration, state.kubeGeneration);
    // About an older generation: the status event of the current one re-enqueues the key.
    if (!desired) return;
    const fields: StatusObject = ROUTE_KINDS.has(kind.kind)
      ? {
          parents: mergedRouteParents(
            (object.status as { parents?: unknown } | undefined)?.parents,
            Array.isArray(desired.parents) ? desired.parents : [],
          ),
        }
      : desired;
    if (statusFieldsUpToDate(object.status, fields)) return;
    await this.patchStatus(ref, kind, { status: fields });
  }

  /** A JSON merge patch of an object's status subresource; a refusal that a retry cannot fix is logged, not thrown. */
  private async patchStatus(ref: ConfigRefLike, kind: WatchedKind, body: object): Promise<void> {
    const target = { group: kind.group, version: kind.version, plural: kind.plural, name: ref.name, body };
    const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
    try {
      if (kind.clusterScoped) await this.#api.patchClusterCustomObjectStatus(target, mergePatch);
      else
        await this.#api.patchNamespacedCustomObjectStatus(
          { ...target, namespace: ref.namespace },
          mergePatch,
        );
    } catch (error) {
      const code = (error as { code?: number }).code;
      // Deleted meanwhile: its DELETED event follows.
      if (code === 404) return;
      // Forbidden, invalid: retrying will not help; say so once per attempt.
      if (code !== undefined && code >= 400 && code < 500 && code !== 409 && code !== 429) {
        this.options.logger.warn({ resource: describeRef(ref), code, err: error }, "cannot write status");
        return;
      }
      throw error;
    }
  }
}
