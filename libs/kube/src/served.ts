import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import { type BackoffPolicy, retry } from "./backoff.js";

/** A custom resource's collection: `/apis/<group>/<version>/<plural>`. */
export interface CustomResource {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
}

/** Options of {@link customResourceServed}. */
export interface ServedOptions {
  /** The delays between attempts that fail for another reason than a 404. */
  readonly backoff: BackoffPolicy;
  /** Stops retrying; the answer is then false. */
  readonly signal?: AbortSignal;
  /** Told of every failed attempt that is retried (for metrics and logs). */
  readonly onRetry?: (error: unknown) => void;
}

const notFound = (error: unknown) => (error as { code?: number }).code === 404;

/**
 * Whether the API server serves a custom resource (its CRD is installed), as
 * istiod asks before it watches an optional kind such as the Gateway API's:
 * a cluster-wide list of at most one object answers; a 404 means not served.
 * Any other failure (the API server unreachable, a 503 while it starts) is
 * retried after the backoff, since it says nothing about the CRD.
 */
export async function customResourceServed(
  kubeConfig: KubeConfig,
  resource: CustomResource,
  options: ServedOptions,
): Promise<boolean> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const { group, version, plural } = resource;
  try {
    const listed = await retry(() => api.listClusterCustomObject({ group, version, plural, limit: 1 }), {
      backoff: options.backoff,
      ...(options.signal ? { signal: options.signal } : {}),
      retryable: (error) => !notFound(error),
      onFailure: (error) => options.onRetry?.(error),
    });
    return listed !== undefined;
  } catch (error) {
    if (notFound(error)) return false;
    throw error;
  }
}
