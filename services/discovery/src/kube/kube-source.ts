import {
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { type BackoffPolicy, Informer } from "@sextant/kube";
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
const RESTART_BACKOFF: BackoffPolicy = { initialMs: 200, maxMs: 5_000 };

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
  readonly #informers: Array<Informer<KubernetesObject>> = [];
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
    const specs: Array<[string, string, () => Promise<KubernetesListObject<KubernetesObject>>, Handler]> = [
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
      if (this.#closed) return;
      const informer = new Informer<KubernetesObject>({
        kubeConfig: kc,
        path,
        list,
        logger: this.options.logger,
        logFields: { resource },
        backoff: RESTART_BACKOFF,
        // Failures of the first list are not restarts: the service is not ready yet.
        onFailure: (_error, synced) => {
          if (synced) this.#restarts?.inc({ resource });
        },
      });
      informer.on("add", (object) => this.#handle(resource, "add", handle, object));
      informer.on("update", (object) => this.#handle(resource, "update", handle, object));
      informer.on("delete", (object) => this.#handle(resource, "delete", handle, object));
      this.#informers.push(informer);
      informer.start();
      // The first list must succeed before the service is ready; the informer retries it.
      if (!(await informer.synced())) return;
    }
    this.options.readiness.done("kubernetes sync");
    this.options.logger.info(registry.inputCounts(), "Kubernetes informers synced");
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#informers.map((informer) => informer.stop()));
  }

  #handle(resource: string, type: string, handle: Handler, object: KubernetesObject): void {
    this.#events?.inc({ resource, type });
    handle(object, type === "delete");
  }
}
