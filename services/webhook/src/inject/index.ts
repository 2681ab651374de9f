/**
 * Sidecar injection as a library: the same pure functions the /inject
 * webhook uses, for offline injection (a later `kube-inject`).
 */
export { AnnotationError, Annotations, REFUSED_ANNOTATIONS } from "./annotations.js";
export {
  DEFAULT_PROXY_IMAGE,
  DEFAULT_PROXY_RESOURCES,
  defaultInjectionConfig,
  type InjectionConfig,
  type InjectionResult,
  type InjectionTarget,
  injectPod,
  type PodJson,
} from "./inject.js";
export { type NativeSidecarMode, type NodeVersion, nativeSidecarDefault } from "./native.js";
export {
  DEFAULT_ROOT_NAMESPACE,
  effectiveProxyConfig,
  type ProxyConfigResource,
  type ProxyConfigScope,
  proxyConfigsOf,
} from "./proxy-configs.js";
export {
  IGNORED_NAMESPACES,
  INJECT_KEY,
  injectionRequired,
  NAMESPACE_INJECTION_LABEL,
  REVISION_LABEL,
  type SelectionContext,
  type SelectionDecision,
  type SelectionPod,
  STATUS_ANNOTATION,
} from "./selection.js";
export {
  defaultTemplatePath,
  type InjectionTemplate,
  loadTemplate,
  parseTemplate,
  render,
} from "./template.js";
