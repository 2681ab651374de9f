import {
  CoreV1Api,
  DiscoveryV1Api,
  type Informer,
  type KubeConfig,
  type KubernetesObject,
  makeInformer,
} from "@kubernetes/client-node";
import {
  Counter,
  type Logger,
  type Registry as MetricsRegistry,
  type ReadinessGate,
} from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import type { Registry } from "../registry/registry.js";

/** Options of {@link KubeSource}. */
export interface KubeSourceOptions {
  readonly kubeConfig: KubeConfig;
  readonly registry: Registry;
  readonly logger: Logger;
  readonly readiness: ReadinessGate;
  readonly metrics?: MetricsRegistry;
}

/** How long an informer waits before restarting after an error (doubling up to the maximum). */
const RESTART_DELAY_MS = 200;
const MAX_RESTART_DELAY_MS = 5_000;

type Handler = (object: KubernetesObject, deleted: boolean) => void;

/**
 * KubeSource follows Namespaces, Nodes, Pods, Services and EndpointSlices
 * (discovery.k8s.io/v1, never the legacy Endpoints) with client-node
 * informers, and feeds every change to the registry. Informers that stop on
 * an error (a reset connection, an API server restart) are restarted: they
 * resume from their last resourceVersion, and after a 410 Gone they relist,
 * reporting what vanished meanwhile as deletes. The registry keys its inputs
 * by namespace/name, so a replayed object replaces itself, never doubles.
 */
export class KubeSource implements Runner {
  readonly name = "kubernetes";
  readonly #informers: Array<{ resource: string; informer: Informer<KubernetesObject> }> = [];
  readonly #timers = new Set<NodeJS.Timeout>();
  #closed = false;
  readonly #events: Counter<"resource" | "type"> | undefined;
  readonly #restarts: Counter<"resource"> | undefined;

  constructor(private readonly options: KubeSourceOptions) {
    if (options.metrics) {
      this.#events = new Counter({
        name: "sextant_discovery_kube_events_total",
        help: "Kubernetes informer events, by resource and type (add, update, delete)",
        labelNames: ["resource", "type"],
        registers: [options.metrics],
      });
      this.#restarts = new Counter({
        name: "sextant_discovery_kube_watch_restarts_total",
        help: "informers restarted after a watch error",
        labelNames: ["resource"],
        registers: [options.metrics],
      });
    }
  }

  async start(): Promise<void> {
    this.options.readiness.require("kubernetes sync");
    const kc = this.options.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const registry = this.options.registry;
    // Namespaces, Nodes and Pods first: when Services and slices arrive, what
    // their endpoints need is already there.
    const specs: Array<[string, string, () => Promise<{ items: KubernetesObject[] }>, Handler]> = [
      ["namespaces", "/api/v1/namespaces", () => core.listNamespace(), (o, d) => registry.setNamespace(o, d)],
      ["nodes", "/api/v1/nodes", () => core.listNode(), (o, d) => registry.setNode(o, d)],
      ["pods", "/api/v1/pods", () => core.listPodForAllNamespaces(), (o, d) => registry.setPod(o, d)],
      [
        "services",
        "/api/v1/services",
        () => core.listServiceForAllNamespaces(),
        (o, d) => registry.setKubeService(o, d),
      ],
      [
        "endpointslices",
        "/apis/discovery.k8s.io/v1/endpointslices",
        () => discovery.listEndpointSliceForAllNamespaces(),
        (o, d) => registry.setEndpointSlice(o as never, d),
      ],
    ];
    for (const [resource, path, list, handle] of specs) {
      const informer = makeInformer(kc, path, list);
      informer.on("add", (object) => this.#handle(resource, "add", handle, object));
      informer.on("update", (object) => this.#handle(resource, "update", handle, object));
      informer.on("delete", (object) => this.#handle(resource, "delete", handle, object));
      this.#informers.push({ resource, informer });
      await this.#startWithRetry(resource, informer);
      this.#restartOnError(resource, informer);
    }
    this.options.readiness.done("kubernetes sync");
    this.options.logger.info(registry.inputCounts(), "Kubernetes informers synced");
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    await Promise.all(this.#informers.map(({ informer }) => informer.stop()));
  }

  #handle(resource: string, type: string, handle: Handler, object: KubernetesObject): void {
    this.#events?.inc({ resource, type });
    handle(object, type === "delete");
  }

  /** The first list must succeed before the service is ready; an unreachable API server is retried. */
  async #startWithRetry(resource: string, informer: Informer<KubernetesObject>): Promise<void> {
    let failure: unknown;
    const onError = (error: unknown) => {
      failure = error;
    };
    informer.on("error", onError);
    for (let delay = RESTART_DELAY_MS; !this.#closed; delay = Math.min(delay * 2, MAX_RESTART_DELAY_MS)) {
      failure = undefined;
      await informer.start();
      if (failure === undefined) break;
      this.options.logger.warn({ resource, err: failure }, "initial list failed; retrying");
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    informer.off("error", onError);
  }

  /**
   * client-node's ListWatch stops after an error other than 410 (a reset
   * connection is one) and must be started again, as its documentation says;
   * it then resumes from its last resourceVersion.
   */
  #restartOnError(resource: string, informer: Informer<KubernetesObject>): void {
    let delay = RESTART_DELAY_MS;
    let pending = false;
    let errors = 0;
    informer.on("error", (error) => {
      errors += 1;
      if (this.#closed || pending) return;
      pending = true;
      this.options.logger.warn({ resource, err: error }, "watch failed; restarting the informer");
      this.#restarts?.inc({ resource });
      const timer = setTimeout(async () => {
        this.#timers.delete(timer);
        pending = false;
        if (this.#closed) return;
        const before = errors;
        try {
          await informer.start();
        } catch (startError) {
          this.options.logger.warn({ resource, err: startError }, "informer restart failed");
        }
        // A restart that went through resets the back-off; one that failed has already rescheduled.
        if (errors === before) delay = RESTART_DELAY_MS;
      }, delay);
      this.#timers.add(timer);
      delay = Math.min(delay * 2, MAX_RESTART_DELAY_MS);
    });
  }
}
