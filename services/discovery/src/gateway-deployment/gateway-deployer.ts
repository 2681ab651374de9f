import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { type BackoffPolicy, customResourceServed, Informer, WorkQueue } from "@sextant/kube";
import {
  Counter,
  type Logger,
  type Registry as MetricsRegistry,
  type ReadinessGate,
} from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import {
  BUILTIN_GATEWAY_CLASSES,
  DEPLOYING_CONTROLLERS,
  FIELD_MANAGER,
  type GatewayDeploymentSettings,
  isManaged,
  type KubeGateway,
  type KubeManifest,
  MANAGED_LABEL,
  renderGatewayDeployment,
} from "./render.js";

/** Options of {@link GatewayDeployer}. */
export interface GatewayDeployerOptions {
  readonly kubeConfig: KubeConfig;
  readonly settings: GatewayDeploymentSettings;
  /** True while this replica holds the discovery lease: only the leader applies. */
  readonly isLeader: () => boolean;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
  readonly metrics?: MetricsRegistry;
  /** Retry delays of the served check, the informers and a failed Gateway. */
  readonly backoff?: BackoffPolicy;
}

type GatewayClass = KubernetesObject & { spec?: { controllerName?: string } };
type Gateway = KubeGateway & KubernetesObject;

const GROUP = "gateway.networking.k8s.io";
const VERSION = "v1";
const SYNC_CONDITION = "gateway deployment sync";
/**
 * istiod's ControllerVersion: a Gateway annotated `gateway.istio.io/controller-version` with a larger
 * number (or one that is not a number) belongs to a newer controller, which this one leaves alone.
 */
const CONTROLLER_VERSION_ANNOTATION = "gateway.istio.io/controller-version";
const CONTROLLER_VERSION = 5;

/** What of a Gateway its deployment depends on: a status update (attached routes, addresses) changes none of it. */
function fingerprint(gateway: Gateway): string {
  const { generation, labels, annotations } = gateway.metadata ?? {};
  return JSON.stringify([generation, labels ?? {}, annotations ?? {}]);
}

/** The label istiod before 1.24 selected gateway pods with, and still keeps where a Deployment has it. */
const LEGACY_GATEWAY_NAME_LABEL = "istio.io/gateway-name";

type DeploymentShape = {
  spec?: {
    selector?: { matchLabels?: Record<string, string> };
    template?: { metadata?: { labels?: Record<string, string> } };
  };
};

/**
 * A Deployment's selector cannot change. One that istiod made before 1.24
 * selects `istio.io/gateway-name` too: as istiod does, keep that selector and
 * the pods' label, so that taking it over is an apply, not an error forever.
 */
export function keepLegacySelector(manifest: KubeManifest, existing: KubernetesObject): KubeManifest {
  const current = (existing as DeploymentShape).spec;
  const legacy = current?.selector?.matchLabels?.[LEGACY_GATEWAY_NAME_LABEL];
  if (legacy === undefined || !current?.selector) return manifest;
  const spec = manifest.spec as Required<DeploymentShape>["spec"];
  const podLabels = current.template?.metadata?.labels?.[LEGACY_GATEWAY_NAME_LABEL] ?? legacy;
  return {
    ...manifest,
    spec: {
      ...spec,
      selector: current.selector,
      template: {
        ...spec.template,
        metadata: {
          ...spec.template?.metadata,
          labels: { ...spec.template?.metadata?.labels, [LEGACY_GATEWAY_NAME_LABEL]: podLabels },
        },
      },
    },
  };
}

/** What of a deployed object someone may edit: everything but its status and server-kept metadata. */
function childFingerprint(child: KubernetesObject): string {
  const { status: _status, metadata, ...rest } = child as KubernetesObject & { status?: unknown };
  const { labels, annotations, ownerReferences } = metadata ?? {};
  return JSON.stringify([labels ?? {}, annotations ?? {}, ownerReferences ?? [], rest]);
}

const keyOf = (object: KubernetesObject) =>
  `${object.metadata?.namespace ?? ""}/${object.metadata?.name ?? ""}`;

/**
 * GatewayDeployer is istiod's gateway deployment controller: for each
 * Gateway API Gateway of a class whose controllerName is Istio's or
 * Sextant's, and that names no address of its own (isManaged), it
 * server-side applies a ServiceAccount, a Deployment of the proxy image in
 * router mode and a Service (render.ts), owned by the Gateway so that
 * Kubernetes' garbage collector deletes them with it. It never deletes.
 *
 * It follows Gateways and GatewayClasses, only if the API server serves the
 * Gateway API (asked once, at start: a CRD installed later is followed after
 * a restart, as ingest does). Every replica follows them; only the leader
 * applies, and a new leader applies every Gateway again (idempotent: an
 * unchanged apply changes nothing). It follows the objects it made too (by
 * that label), and applies a Gateway again when one of its objects is
 * edited or deleted. An object of that name that exists without the
 * `gateway.istio.io/managed` label is someone else's, and is left alone, as
 * istiod does.
 */
export class GatewayDeployer implements Runner {
  readonly name = "gateway-deployment";
  readonly #core: CoreV1Api;
  readonly #apps: AppsV1Api;
  readonly #backoff: BackoffPolicy;
  readonly #queue: WorkQueue<string>;
  readonly #abort = new AbortController();
  readonly #fingerprints = new Map<string, string>();
  readonly #childFingerprints = new Map<string, string>();
  readonly #informers: Array<Informer<KubernetesObject>> = [];
  #gateways: Informer<Gateway> | undefined;
  #classes: Informer<GatewayClass> | undefined;
  #synced = false;
  readonly #applies: Counter<"kind" | "result"> | undefined;

  constructor(private readonly options: GatewayDeployerOptions) {
    this.#core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#apps = options.kubeConfig.makeApiClient(AppsV1Api);
    this.#backoff = options.backoff ?? { initialMs: 200, maxMs: 30_000, jitter: "fifth" };
    this.#queue = new WorkQueue<string>({
      process: (key) => this.reconcile(key),
      retry: this.#backoff,
      paused: true,
      onError: (key, error, retryInMs) =>
        options.logger.warn({ gateway: key, err: error, retryInMs }, "cannot deploy a Gateway; retrying"),
    });
    if (options.metrics) {
      this.#applies = new Counter({
        name: "sextant_discovery_gateway_applies_total",
        help: "Server-side applies of the objects of deployed Gateways, by kind and result (applied, skipped, failed)",
        labelNames: ["kind", "result"],
        registers: [options.metrics],
      });
    }
  }

  async start(): Promise<void> {
    this.options.readiness.require(SYNC_CONDITION);
    // Not awaited: an unreachable API server must not hold up the other runners; /ready says it.
    void this.#startInformers().catch((error: unknown) =>
      this.options.logger.error({ err: error }, "gateway deployment did not start"),
    );
  }

  async #startInformers(): Promise<void> {
    const served = await customResourceServed(
      this.options.kubeConfig,
      { group: GROUP, version: VERSION, plural: "gateways" },
      {
        backoff: this.#backoff,
        signal: this.#abort.signal,
        onRetry: (error) =>
          this.options.logger.warn({ err: error }, "cannot ask whether Gateways are served"),
      },
    );
    if (this.#abort.signal.aborted) return;
    if (!served) {
      this.options.logger.info("the Gateway API is not served (CRDs not installed); no Gateway is deployed");
      this.options.readiness.done(SYNC_CONDITION);
      return;
    }
    const custom = this.options.kubeConfig.makeApiClient(CustomObjectsApi);
    const informer = <T extends KubernetesObject>(plural: string) =>
      new Informer<T>({
        kubeConfig: this.options.kubeConfig,
        path: `/apis/${GROUP}/${VERSION}/${plural}`,
        list: async () =>
          (await custom.listClusterCustomObject({
            group: GROUP,
            version: VERSION,
            plural,
          })) as KubernetesListObject<T>,
        logger: this.options.logger,
        logFields: { resource: plural },
        backoff: this.#backoff,
      });
    const classes = informer<GatewayClass>("gatewayclasses");
    const gateways = informer<Gateway>("gateways");
    // A class change (its controllerName) may start or stop the deployment of every Gateway of it.
    const classChanged = (gatewayClass: GatewayClass) => {
      for (const gateway of gateways.list())
        if (gateway.spec?.gatewayClassName === gatewayClass.metadata?.name) this.#queue.add(keyOf(gateway));
    };
    for (const event of ["add", "update", "delete"] as const) classes.on(event, classChanged);
    const gatewayChanged = (gateway: Gateway) => {
      const key = keyOf(gateway);
      const print = fingerprint(gateway);
      if (this.#fingerprints.get(key) === print) return;
      this.#fingerprints.set(key, print);
      this.#queue.add(key);
    };
    gateways.on("add", gatewayChanged);
    gateways.on("update", gatewayChanged);
    // The owner references let Kubernetes delete the objects; istiod deletes nothing either.
    gateways.on("delete", (gateway) => this.#fingerprints.delete(keyOf(gateway)));
    this.#classes = classes;
    this.#gateways = gateways;
    const children = this.#childInformers();
    const all: Array<Informer<KubernetesObject>> = [classes, gateways, ...children];
    this.#informers.push(...all);
    for (const each of all) each.start();
    for (const each of all) if (!(await each.synced())) return;
    this.#synced = true;
    this.leaderChanged(this.options.isLeader());
    this.options.readiness.done(SYNC_CONDITION);
  }

  /**
   * Informers of the ServiceAccounts, Services and Deployments this controller
   * made (label `gateway.istio.io/managed`), as istiod's: one edited or
   * deleted by someone else sends its Gateway back to the queue, and the
   * apply puts it right. Their status changes (a Deployment's replicas) are
   * not edits.
   */
  #childInformers(): Array<Informer<KubernetesObject>> {
    const labelSelector = MANAGED_LABEL;
    const children: Array<[string, string, () => Promise<KubernetesListObject<KubernetesObject>>]> = [
      [
        "serviceaccounts",
        "/api/v1/serviceaccounts",
        () => this.#core.listServiceAccountForAllNamespaces({ labelSelector }),
      ],
      ["services", "/api/v1/services", () => this.#core.listServiceForAllNamespaces({ labelSelector })],
      [
        "deployments",
        "/apis/apps/v1/deployments",
        () => this.#apps.listDeploymentForAllNamespaces({ labelSelector }),
      ],
    ];
    return children.map(([resource, path, list]) => {
      const informer = new Informer<KubernetesObject>({
        kubeConfig: this.options.kubeConfig,
        path,
        labelSelector,
        list,
        logger: this.options.logger,
        logFields: { resource },
        backoff: this.#backoff,
      });
      const changed = (child: KubernetesObject, deleted: boolean) => {
        const key = `${resource}/${keyOf(child)}`;
        const print = deleted ? undefined : childFingerprint(child);
        if (this.#childFingerprints.get(key) === print) return;
        if (print === undefined) this.#childFingerprints.delete(key);
        else this.#childFingerprints.set(key, print);
        const owner = child.metadata?.ownerReferences?.find(
          (ref) => ref.kind === "Gateway" && ref.apiVersion.startsWith(`${GROUP}/`),
        );
        if (owner) this.#queue.add(`${child.metadata?.namespace ?? ""}/${owner.name}`);
      };
      informer.on("add", (child) => changed(child, false));
      informer.on("update", (child) => changed(child, false));
      informer.on("delete", (child) => changed(child, true));
      return informer;
    });
  }

  /** Told of each leadership change: a new leader applies every Gateway again, a former one stops. */
  leaderChanged(leader: boolean): void {
    if (!this.#synced) return;
    if (!leader) {
      this.#queue.pause();
      return;
    }
    this.#queue.resume();
    for (const gateway of this.#gateways?.list() ?? []) this.#queue.add(keyOf(gateway));
  }

  /** Resolves once no Gateway is waiting or being applied (for tests). */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  async close(): Promise<void> {
    this.#abort.abort();
    await this.#queue.close();
    await Promise.all(this.#informers.map((informer) => informer.stop()));
  }

  /** The controllerName of a class: its GatewayClass's, else the built-in class's (istio, sextant). */
  #controllerOf(className: string): string | undefined {
    const gatewayClass = this.#classes?.get(className);
    if (gatewayClass) return gatewayClass.spec?.controllerName;
    return BUILTIN_GATEWAY_CLASSES[className];
  }

  /** Applies one Gateway's objects, if it is one to deploy. Public for tests. */
  async reconcile(key: string): Promise<void> {
    if (!this.options.isLeader()) return;
    const slash = key.indexOf("/");
    const gateway = this.#gateways?.get(key.slice(slash + 1), key.slice(0, slash));
    if (!gateway) return;
    const controller = this.#controllerOf(gateway.spec?.gatewayClassName ?? "");
    if (!controller || !DEPLOYING_CONTROLLERS.has(controller) || !isManaged(gateway)) return;
    const version = gateway.metadata?.annotations?.[CONTROLLER_VERSION_ANNOTATION];
    if (version !== undefined && !(/^\d+$/.test(version) && Number(version) <= CONTROLLER_VERSION)) {
      this.options.logger.debug({ gateway: key, version }, "Gateway managed by a newer controller; skipped");
      return;
    }
    for (const manifest of renderGatewayDeployment(gateway, this.options.settings, controller)) {
      if (!this.options.isLeader()) return;
      await this.#apply(manifest);
    }
  }

  /**
   * Server-side applies one object with force, unless an object of that name
   * exists that is not ours (no `gateway.istio.io/managed` label): a Service
   * or Deployment the user made is never taken over.
   */
  async #apply(manifest: KubeManifest): Promise<void> {
    const { name, namespace } = manifest.metadata;
    const kind = manifest.kind;
    const existing = await this.#read(kind, name, namespace);
    if (existing && existing.metadata?.labels?.[MANAGED_LABEL] === undefined) {
      this.#applies?.inc({ kind, result: "skipped" });
      this.options.logger.warn(
        { kind, namespace, name },
        "an object of this name exists that the gateway controller did not create; left alone",
      );
      return;
    }
    const body = kind === "Deployment" && existing ? keepLegacySelector(manifest, existing) : manifest;
    const request = { name, namespace, body, fieldManager: FIELD_MANAGER, force: true };
    const apply = setHeaderOptions("Content-Type", PatchStrategy.ServerSideApply);
    try {
      if (kind === "ServiceAccount") await this.#core.patchNamespacedServiceAccount(request, apply);
      else if (kind === "Service") await this.#core.patchNamespacedService(request, apply);
      else await this.#apps.patchNamespacedDeployment(request, apply);
      this.#applies?.inc({ kind, result: "applied" });
    } catch (error) {
      this.#applies?.inc({ kind, result: "failed" });
      throw error;
    }
  }

  async #read(kind: string, name: string, namespace: string): Promise<KubernetesObject | undefined> {
    try {
      if (kind === "ServiceAccount")
        return await this.#core.readNamespacedServiceAccount({ name, namespace });
      if (kind === "Service") return await this.#core.readNamespacedService({ name, namespace });
      return await this.#apps.readNamespacedDeployment({ name, namespace });
    } catch (error) {
      if ((error as { code?: number }).code === 404) return undefined;
      throw error;
    }
  }
}
