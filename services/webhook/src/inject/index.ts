/**
 * Sidecar injection as a library: the same pure functions the /inject
 * webhook uses, for offline injection (a later `kube-inject`).
 */
export { AnnotationError, Annotations } from "./annotations.js";
export {
  DEFAULT_PROXY_IMAGE,
  DEFAULT_PROXY_RESOURCES,
  defaultInjectionConfig,
  type InjectionConfig,
  type InjectionResult,
  type InjectionTarget,
  injectPod,
  type PodJson,
  SIDECAR_INBOUND_PORTS,
} from "./inject.js";
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
