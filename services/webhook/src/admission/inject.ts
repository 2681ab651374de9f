import { AnnotationError } from "../inject/annotations.js";
import { type InjectionConfig, injectPod, type PodJson } from "../inject/inject.js";
import type { NodeVersion } from "../inject/native.js";
import type { ProxyConfigResource } from "../inject/proxy-configs.js";
import type { WebhookMetrics } from "./metrics.js";
import { type AdmissionRequest, type AdmissionResponse, deny } from "./review.js";

/** Looks up a namespace's labels; undefined leaves namespace selection to the webhook configuration. */
export type NamespaceLabels = (namespace: string) => Record<string, string> | undefined;

/**
 * Answers an injection request: Pod CREATE gets the sidecar as a JSONPatch
 * when the selection rules say so. Other operations on pods are allowed
 * unchanged; any other kind is refused, since it means a misconfigured webhook.
 */
export function admitInjection(
  request: AdmissionRequest,
  config: InjectionConfig,
  options: {
    metrics?: WebhookMetrics | undefined;
    namespaceLabels?: NamespaceLabels | undefined;
    /** The cluster's nodes for native-sidecar `auto` mode; undefined when unknown. */
    nodes?: (() => readonly NodeVersion[] | undefined) | undefined;
    /** The stored ProxyConfig resources, as the webhook last read them. */
    proxyConfigs?: (() => readonly ProxyConfigResource[]) | undefined;
  } = {},
): AdmissionResponse {
  const { uid, kind } = request;
  const metrics = options.metrics;
  metrics?.injectionRequests.inc();
  if (kind.group !== "" || kind.kind !== "Pod") {
    metrics?.injectionFailure.inc({ type: "unexpected_kind" });
    return deny(
      uid,
      `unexpected kind ${kind.group || "core"}/${kind.version} ${kind.kind}: this webhook injects Pods`,
    );
  }
  if (request.operation !== "CREATE") return { uid, allowed: true };
  const pod = request.object;
  if (typeof pod !== "object" || pod === null || Array.isArray(pod)) {
    metrics?.injectionFailure.inc({ type: "no_object" });
    return deny(uid, "request.object must be the pod to inject");
  }
  const namespace = request.namespace || (pod as PodJson).metadata?.namespace || "default";
  try {
    const result = injectPod(
      pod as PodJson,
      {
        namespace,
        namespaceLabels: options.namespaceLabels?.(namespace),
        nodes: options.nodes?.(),
        proxyConfigs: options.proxyConfigs?.(),
      },
      config,
    );
    if (!result.decision.inject) {
      metrics?.injectionSkip.inc();
      return { uid, allowed: true };
    }
    metrics?.injectionSuccess.inc();
    return {
      uid,
      allowed: true,
      patchType: "JSONPatch",
      patch: Buffer.from(JSON.stringify(result.patch)).toString("base64"),
    };
  } catch (error) {
    if (error instanceof AnnotationError) {
      metrics?.injectionFailure.inc({ type: "annotation" });
      return deny(uid, error.message);
    }
    metrics?.injectionFailure.inc({ type: "internal" });
    return deny(uid, `injection failed: ${(error as Error).message}`, [], 500);
  }
}
