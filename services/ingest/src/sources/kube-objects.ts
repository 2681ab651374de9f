import type { KubernetesObject } from "@kubernetes/client-node";
import {
  EXTENSIONS_GROUP,
  GATEWAY_API_GROUP,
  KINDS,
  NETWORKING_GROUP,
  SECURITY_GROUP,
  TELEMETRY_GROUP,
} from "@sextant/validation";

/**
 * The one served version the Kubernetes source watches in each API group.
 * Istio's CRDs serve every kind under several versions (networking v1,
 * v1beta1, v1alpha3; security v1, v1beta1) of one stored object, and the API
 * server converts between them, so one informer per kind at one version sees
 * every object whatever version it was written with. v1 is the newest in both
 * groups and the one Istio itself reads since 1.22; objects are stored with
 * this apiVersion.
 */
export const WATCHED_VERSIONS: Readonly<Record<string, string>> = {
  [NETWORKING_GROUP]: "v1",
  [SECURITY_GROUP]: "v1",
  // WasmPlugin is served only as v1alpha1.
  [EXTENSIONS_GROUP]: "v1alpha1",
  [TELEMETRY_GROUP]: "v1",
  [GATEWAY_API_GROUP]: "v1",
};

/**
 * Kinds watched at another version than their group's: Istio reads
 * ReferenceGrant at v1beta1, the version every Gateway API release serves it
 * at (v1 only since v1.5).
 */
const WATCHED_KIND_VERSIONS: Readonly<Record<string, string>> = { ReferenceGrant: "v1beta1" };

/**
 * Groups whose CRDs a cluster may not have: the Gateway API is installed
 * apart from Istio's (and Sextant's) CRDs, so a kind of it is watched only if
 * the API server serves it, as istiod does.
 */
const OPTIONAL_GROUPS: ReadonlySet<string> = new Set([GATEWAY_API_GROUP]);

/** One Istio kind as the Kubernetes source watches it. */
export interface WatchedKind {
  readonly kind: string;
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  /** The cluster-wide collection path, e.g. /apis/networking.istio.io/v1/virtualservices. */
  readonly path: string;
  /** Watched only when the API server serves it (the Gateway API's kinds). */
  readonly optional: boolean;
  /** Its objects have no namespace (GatewayClass); ingest stores them under `default`. */
  readonly clusterScoped: boolean;
}

/**
 * Every kind Sextant supports (`KINDS` of @sextant/validation, which names
 * each one's plural), at its group's watched version. Throws if a kind's
 * group has no watched version, so a kind added to validation cannot be
 * silently left unwatched.
 */
export function watchedKinds(): WatchedKind[] {
  return [...KINDS.values()].map(({ kind, group, plural, versions, clusterScoped }) => {
    // A kind its group's version does not serve (ProxyConfig: v1beta1 only) is watched at its newest.
    const groupVersion = WATCHED_KIND_VERSIONS[kind] ?? WATCHED_VERSIONS[group];
    const version = groupVersion && !versions.includes(groupVersion) ? versions[0] : groupVersion;
    if (!version) throw new Error(`the Kubernetes source does not know how to watch ${kind}`);
    return {
      kind,
      group,
      version,
      plural,
      path: `/apis/${group}/${version}/${plural}`,
      optional: OPTIONAL_GROUPS.has(group),
      clusterScoped: clusterScoped === true,
    };
  });
}

/**
 * The annotation kubectl apply writes: a client-side copy of the whole
 * object, which a file or HTTP apply of the same resource does not carry.
 */
const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * The document ingest applies for a Kubernetes object: apiVersion, kind,
 * name, namespace, labels, annotations and spec, and nothing the API server
 * manages (uid, resourceVersion, creationTimestamp, managedFields,
 * generation, finalizers, ownerReferences, status). Fields are kept by
 * allow-list, so the same resource gives the same stored value as when it
 * is applied from a file or over HTTP.
 */
export function configDocument(object: KubernetesObject & { spec?: unknown }): Record<string, unknown> {
  const metadata = object.metadata ?? {};
  const annotations = { ...metadata.annotations };
  delete annotations[LAST_APPLIED_ANNOTATION];
  return {
    apiVersion: object.apiVersion,
    kind: object.kind,
    metadata: {
      name: metadata.name,
      namespace: metadata.namespace,
      ...(metadata.labels && Object.keys(metadata.labels).length > 0 ? { labels: metadata.labels } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    spec: object.spec ?? {},
  };
}
