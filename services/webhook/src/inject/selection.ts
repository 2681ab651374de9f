/** Istio's injection label and annotation on pods (the label wins over the annotation). */
export const INJECT_KEY = "sidecar.istio.io/inject";
/** Istio's namespace label: `enabled` selects the default revision, `disabled` opts out. */
export const NAMESPACE_INJECTION_LABEL = "istio-injection";
/** Istio's revision label on namespaces and pods. */
export const REVISION_LABEL = "istio.io/rev";
/** Istio's annotation on injected pods; its presence marks a pod as already injected. */
export const STATUS_ANNOTATION = "sidecar.istio.io/status";

/** Namespaces never injected, as in Istio (plus kind's local-path-storage). */
export const IGNORED_NAMESPACES: readonly string[] = [
  "kube-system",
  "kube-public",
  "kube-node-lease",
  "local-path-storage",
];

/** The parts of a pod that selection looks at. */
export interface SelectionPod {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { hostNetwork?: boolean; containers?: Array<{ name?: string }> };
}

/** What selection needs to know besides the pod. */
export interface SelectionContext {
  /** The pod's namespace (AdmissionReview's request.namespace when the pod has none). */
  namespace: string;
  /**
   * The namespace's labels. Undefined means namespace selection was already
   * done by the webhook configuration's namespaceSelector/objectSelector (as
   * istiod relies on), or that there is no cluster (offline kube-inject).
   */
  namespaceLabels?: Record<string, string> | undefined;
  /** This injector's revision; `default` also answers `istio-injection=enabled`. */
  revision: string;
}

/** The outcome of selection: whether to inject, and why, in words for logs and tests. */
export interface SelectionDecision {
  inject: boolean;
  reason: string;
}

/**
 * Istio's boolean words for sidecar.istio.io/inject: y, yes, true, on inject;
 * anything else set is a refusal. Undefined means "not said".
 */
function podSays(value: string | undefined): boolean | undefined {
  if (value === undefined) return undefined;
  return ["y", "yes", "true", "on"].includes(value.toLowerCase());
}

/**
 * Decides whether a pod gets a sidecar, with Istio's rules in Istio's order:
 * hostNetwork pods and system namespaces never; an injected pod not twice;
 * the pod's own sidecar.istio.io/inject (label first, then annotation) can
 * refuse; then the namespace label (istio-injection, else istio.io/rev) or,
 * in an unlabelled namespace, the pod's label, selects it.
 */
export function injectionRequired(pod: SelectionPod, context: SelectionContext): SelectionDecision {
  const labels = pod.metadata?.labels ?? {};
  const annotations = pod.metadata?.annotations ?? {};
  if (pod.spec?.hostNetwork === true) return { inject: false, reason: "pod uses the host network" };
  if (IGNORED_NAMESPACES.includes(context.namespace))
    return { inject: false, reason: `namespace ${context.namespace} is never injected` };
  // Only the status annotation marks an injected pod: a pod's own istio-proxy container is
  // an override to merge (Istio's gateway Deployments declare one with `image: auto`).
  if (annotations[STATUS_ANNOTATION] !== undefined)
    return { inject: false, reason: "pod is already injected" };

  // The label is the one the webhook configuration's objectSelector sees, so it wins.
  const fromLabel = podSays(labels[INJECT_KEY]);
  const podChoice = fromLabel ?? podSays(annotations[INJECT_KEY]);
  const source = fromLabel !== undefined ? "label" : "annotation";
  if (podChoice === false) return { inject: false, reason: `pod ${source} ${INJECT_KEY} refuses injection` };

  const ns = context.namespaceLabels;
  if (ns === undefined) return { inject: true, reason: "selected by the webhook configuration" };
  const nsInjection = ns[NAMESPACE_INJECTION_LABEL];
  if (nsInjection !== undefined) {
    // istio-injection takes precedence over istio.io/rev, as in Istio's webhook selectors.
    if (nsInjection !== "enabled")
      return { inject: false, reason: `namespace has istio-injection=${nsInjection}` };
    if (context.revision !== "default")
      return { inject: false, reason: "namespace istio-injection=enabled selects the default revision" };
    return { inject: true, reason: "namespace has istio-injection=enabled" };
  }
  const nsRevision = ns[REVISION_LABEL];
  if (nsRevision !== undefined) {
    if (nsRevision !== context.revision)
      return { inject: false, reason: `namespace selects revision ${nsRevision}, not ${context.revision}` };
    return { inject: true, reason: `namespace has istio.io/rev=${nsRevision}` };
  }
  // Unlabelled namespace: only the pod's labels (not annotations) can opt in.
  const podRevision = labels[REVISION_LABEL];
  if (podRevision !== undefined) {
    if (podRevision !== context.revision)
      return { inject: false, reason: `pod selects revision ${podRevision}, not ${context.revision}` };
    return { inject: true, reason: `pod has istio.io/rev=${podRevision}` };
  }
  if (fromLabel === true) {
    if (context.revision !== "default")
      return { inject: false, reason: `pod label ${INJECT_KEY}=true selects the default revision` };
    return { inject: true, reason: `pod label ${INJECT_KEY} asks for injection` };
  }
  return { inject: false, reason: "namespace is not selected for injection" };
}
