import {
  ApiException,
  CoreV1Api,
  type KubeConfig,
  type KubernetesListObject,
  type V1ConfigMap,
  type V1Namespace,
} from "@kubernetes/client-node";
import { type BackoffPolicy, Informer, WorkQueue } from "@sextant/kube";
import type { Logger } from "@sextant/observability";
import type { TrustBundle } from "@sextant/proto";
import type { Runner } from "@sextant/runtime";
import type { TrustBundleFeed } from "../trust/trust-bundle-feed.js";

/** The ConfigMap every namespace gets (Istio's CACertNamespaceConfigMap), which injected pods mount. */
export const CA_ROOT_CERT_CONFIGMAP = "istio-ca-root-cert";
/** Its one key: the mesh's root certificates, PEM. */
export const ROOT_CERT_KEY = "root-cert.pem";
/** The label Istio puts on the ConfigMaps it creates. */
export const CONFIGMAP_LABELS: Readonly<Record<string, string>> = { "istio.io/config": "true" };
/**
 * Namespaces that get no ConfigMap: Istio's injection-ignored namespaces but
 * kube-system, which istiod serves (ztunnel may run there).
 */
export const IGNORED_NAMESPACES: ReadonlySet<string> = new Set([
  "kube-public",
  "kube-node-lease",
  "local-path-storage",
]);

/** The ConfigMap's `root-cert.pem`: every anchor of the bundle, the signing root first, so that during a rotation both roots verify. */
export function rootCertPem(bundle: TrustBundle): string {
  return bundle.anchors
    .map(({ certificatePem }) => (certificatePem.endsWith("\n") ? certificatePem : `${certificatePem}\n`))
    .join("");
}

/** Options of {@link namespaceController}. */
export interface NamespaceControllerOptions {
  kubeConfig: KubeConfig;
  /** The trust bundle as `sextant-trust` holds it; the controller follows its changes. */
  trustBundle: TrustBundleFeed;
  logger: Logger;
  /** Restart delays of the informers and of a namespace whose write failed. */
  backoff?: BackoffPolicy;
}

/**
 * istiod's namespace controller: keeps `istio-ca-root-cert` in every
 * namespace (but the ignored ones and terminating ones) holding the trust
 * bundle's roots. Two informers, namespaces and the ConfigMaps of that name,
 * feed a work queue of namespace names; each pass compares the cached
 * ConfigMap with the bundle and creates or replaces it only when it differs.
 * So a new namespace gets it, a deleted or edited one is put back, and a
 * changed bundle (a root rotation) rewrites every namespace's. Like Istio it
 * changes only its key: other keys someone added stay.
 *
 * It does not hold up the CA: an unreachable API server is retried with the
 * backoff, and the queue starts once both informers have listed.
 */
export function namespaceController(options: NamespaceControllerOptions): Runner {
  const { logger } = options;
  const backoff = options.backoff ?? { initialMs: 200, maxMs: 30_000, jitter: "fifth" };
  const api = options.kubeConfig.makeApiClient(CoreV1Api);
  let pem: string | undefined;
  let unfollow: (() => void) | undefined;

  const queue = new WorkQueue<string>({
    process: (namespace) => reconcile(namespace),
    retry: backoff,
    paused: true,
    onError: (namespace, error, retryInMs) =>
      logger.warn({ namespace, err: error, retryInMs }, `cannot write ${CA_ROOT_CERT_CONFIGMAP}; retrying`),
  });
  const namespaces = new Informer<V1Namespace>({
    kubeConfig: options.kubeConfig,
    path: "/api/v1/namespaces",
    list: () => api.listNamespace() as Promise<KubernetesListObject<V1Namespace>>,
    logger,
    logFields: { kind: "Namespace" },
    backoff,
  });
  const fieldSelector = `metadata.name=${CA_ROOT_CERT_CONFIGMAP}`;
  const configMaps = new Informer<V1ConfigMap>({
    kubeConfig: options.kubeConfig,
    path: "/api/v1/configmaps",
    fieldSelector,
    list: () =>
      api.listConfigMapForAllNamespaces({ fieldSelector }) as Promise<KubernetesListObject<V1ConfigMap>>,
    logger,
    logFields: { kind: "ConfigMap" },
    backoff,
  });

  const enqueue = (namespace: string | undefined) => {
    if (namespace && !IGNORED_NAMESPACES.has(namespace)) queue.add(namespace);
  };
  const enqueueAll = () => {
    for (const namespace of namespaces.list()) enqueue(namespace.metadata?.name);
  };
  for (const event of ["add", "update"] as const)
    namespaces.on(event, (namespace) => enqueue(namespace.metadata?.name));
  // A deleted or edited ConfigMap is put back.
  for (const event of ["add", "update", "delete"] as const)
    configMaps.on(event, (configMap) => enqueue(configMap.metadata?.namespace));

  async function reconcile(name: string): Promise<void> {
    const namespace = namespaces.get(name);
    // Gone, or being deleted: a create would be refused, and an update is of no use.
    if (!pem || !namespace || namespace.status?.phase === "Terminating") return;
    const current = configMaps.get(CA_ROOT_CERT_CONFIGMAP, name);
    try {
      if (!current) {
        await api.createNamespacedConfigMap({
          namespace: name,
          body: {
            metadata: { name: CA_ROOT_CERT_CONFIGMAP, namespace: name, labels: { ...CONFIGMAP_LABELS } },
            data: { [ROOT_CERT_KEY]: pem },
          },
        });
        logger.info({ namespace: name }, `created ${CA_ROOT_CERT_CONFIGMAP}`);
      } else if (current.data?.[ROOT_CERT_KEY] !== pem) {
        // The cached resourceVersion: a newer write in between is a conflict, retried with the cache it brings.
        await api.replaceNamespacedConfigMap({
          name: CA_ROOT_CERT_CONFIGMAP,
          namespace: name,
          body: { ...current, data: { ...current.data, [ROOT_CERT_KEY]: pem } },
        });
        logger.info({ namespace: name }, `updated ${CA_ROOT_CERT_CONFIGMAP}`);
      }
    } catch (error) {
      // The namespace went away meanwhile: nothing to write into.
      if (error instanceof ApiException && error.code === 404 && !current) return;
      throw error;
    }
  }

  return {
    name: "namespace-controller",
    async start() {
      unfollow = options.trustBundle.follow({
        send(bundle) {
          const next = rootCertPem(bundle);
          if (next === pem) return;
          pem = next;
          enqueueAll();
        },
        end() {},
      });
      namespaces.start();
      configMaps.start();
      // Not awaited: an unreachable API server must not hold up the CA, which signs without it.
      void Promise.all([namespaces.synced(), configMaps.synced()]).then(([a, b]) => {
        if (!a || !b) return;
        logger.info({ namespaces: namespaces.list().length }, "namespace controller synced");
        queue.resume();
      });
    },
    async close() {
      unfollow?.();
      await Promise.all([namespaces.stop(), configMaps.stop()]);
      await queue.close();
    },
  };
}
