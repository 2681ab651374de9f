import { type ConfigSpecs, decodeSpec, validateResource } from "@sextant/validation";
import type { ProxyConfigJson } from "./proxy-config.js";

/** A stored ProxyConfig resource (networking.istio.io/v1beta1): where it lives and its spec. */
export interface ProxyConfigResource {
  readonly namespace: string;
  readonly name: string;
  readonly spec: ConfigSpecs["ProxyConfig"];
}

/** The ProxyConfig resources the injector merges, and the mesh's root namespace (Istio: meshConfig.rootNamespace). */
export interface ProxyConfigScope {
  readonly rootNamespace: string;
  readonly resources: readonly ProxyConfigResource[];
}

/** Istio's default root namespace, where a ProxyConfig without a selector covers the whole mesh. */
export const DEFAULT_ROOT_NAMESPACE = "istio-system";

/**
 * The effective ProxyConfig of a pod, as istiod's EffectiveProxyConfig builds
 * it for the injector, lowest precedence first: the mesh defaults; the root
 * namespace's ProxyConfig without a selector; the pod's namespace's without a
 * selector; the pod's proxy.istio.io/config annotation; the pod's namespace's
 * ProxyConfig whose selector matches the pod's labels. (A workload-selecting
 * resource beats the annotation: Istio merges the annotation under it.)
 *
 * Where several resources qualify at one level, Istio takes the oldest; ingest
 * keeps no creation time, so the first by name is taken (as push does for
 * Sidecars). A selector without labels selects nothing.
 */
export function effectiveProxyConfig(
  defaults: ProxyConfigJson,
  scope: ProxyConfigScope | undefined,
  pod: { namespace: string; labels: Readonly<Record<string, string>> },
  annotation: ProxyConfigJson | undefined,
): ProxyConfigJson {
  const inNamespace = (namespace: string) =>
    (scope?.resources ?? [])
      .filter((r) => r.namespace === namespace)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const namespaceWide = (namespace: string) =>
    inNamespace(namespace).find((r) => r.spec.selector === undefined);
  const workload = inNamespace(pod.namespace).find((r) => {
    const labels = Object.entries(r.spec.selector?.matchLabels ?? {});
    return labels.length > 0 && labels.every(([k, v]) => pod.labels[k] === v);
  });
  const root = scope ? namespaceWide(scope.rootNamespace) : undefined;
  const namespace = pod.namespace !== scope?.rootNamespace ? namespaceWide(pod.namespace) : undefined;
  return [root, namespace]
    .map((r) => r && asProxyConfig(r))
    .concat(annotation, workload && asProxyConfig(workload))
    .reduce<ProxyConfigJson>((merged, over) => (over ? mergeProxyConfig(merged, over) : merged), defaults);
}

/** A ProxyConfig resource's fields as mesh ProxyConfig fields (environmentVariables are proxyMetadata). */
function asProxyConfig(resource: ProxyConfigResource): ProxyConfigJson {
  const { concurrency, environmentVariables, image } = resource.spec;
  return {
    ...(concurrency !== undefined ? { concurrency } : {}),
    ...(Object.keys(environmentVariables).length > 0 ? { proxyMetadata: { ...environmentVariables } } : {}),
    ...(image ? { image: image.imageType ? { imageType: image.imageType } : {} } : {}),
  };
}

/**
 * `over` merged onto `base` as Istio's MergeProxyConfig: each field set in
 * `over` replaces the base's, except proxyMetadata, merged key by key.
 */
export function mergeProxyConfig(base: ProxyConfigJson, over: ProxyConfigJson): ProxyConfigJson {
  const merged = { ...base, ...over };
  if (base.proxyMetadata !== undefined && over.proxyMetadata !== undefined)
    merged.proxyMetadata = {
      ...(base.proxyMetadata as Record<string, string>),
      ...(over.proxyMetadata as Record<string, string>),
    };
  return merged;
}

/** Istio's image types whose suffix a tag may already carry ("default" is the type without one). */
const KNOWN_IMAGE_TYPES = ["distroless", "debug"] as const;

/**
 * The proxy image for an image type, as Istio's ProxyImage: the tag gets
 * `-<type>` (a known type's suffix already on it replaced), "default" or ""
 * leave the plain tag. An image without a tag, or pinned by digest, is kept
 * as it is: there is no tag to suffix.
 */
export function imageOfType(image: string, imageType: string | undefined): string {
  if (!imageType || image.includes("@")) return image;
  const colon = image.lastIndexOf(":");
  if (colon < 0 || colon < image.lastIndexOf("/")) return image;
  let tag = image.slice(colon + 1);
  const known = KNOWN_IMAGE_TYPES.find((t) => tag.endsWith(`-${t}`));
  if (known) tag = tag.slice(0, -(known.length + 1));
  return `${image.slice(0, colon + 1)}${imageType === "default" ? tag : `${tag}-${imageType}`}`;
}

/**
 * The ProxyConfig resources among Kubernetes documents (an offline
 * kube-inject's input files), validated as ingest validates them; other
 * kinds are passed over. A document without a namespace is in
 * `defaultNamespace`. Throws with every problem of an invalid ProxyConfig.
 */
export function proxyConfigsOf(
  documents: readonly unknown[],
  defaultNamespace: string,
): ProxyConfigResource[] {
  const resources: ProxyConfigResource[] = [];
  for (const document of documents) {
    const doc = document as {
      kind?: unknown;
      metadata?: { name?: string; namespace?: string };
      spec?: unknown;
    };
    if (doc?.kind !== "ProxyConfig") continue;
    const where = `ProxyConfig ${doc.metadata?.namespace ?? defaultNamespace}/${doc.metadata?.name ?? ""}`;
    const { errors } = validateResource(doc);
    if (errors.length > 0)
      throw new Error(`${where} is invalid: ${errors.map((e) => `${e.path}: ${e.message}`).join("; ")}`);
    const decoded = decodeSpec<ConfigSpecs["ProxyConfig"]>("ProxyConfig", doc.spec ?? {});
    resources.push({
      namespace: doc.metadata?.namespace ?? defaultNamespace,
      name: doc.metadata?.name ?? "",
      spec: decoded.value as ConfigSpecs["ProxyConfig"],
    });
  }
  return resources;
}
