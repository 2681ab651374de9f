import type { Operation } from "fast-json-patch";
import jsonPatch from "fast-json-patch";
import { AnnotationReader, Annotations } from "./annotations.js";
import { injectionRequired, type SelectionDecision, STATUS_ANNOTATION } from "./selection.js";
import { type InjectionTemplate, loadTemplate, render, type TemplateValue } from "./template.js";

/** The mesh-wide injection settings (Istio: the sidecar injector's values and mesh config). */
export interface InjectionConfig {
  /** The injection template; the bundled one when unset. */
  template: InjectionTemplate;
  /** The proxy image (Istio: global.hub/global.proxy.image:tag). */
  proxyImage: string;
  /** This injector's revision (Istio: revision; `default` answers istio-injection=enabled). */
  revision: string;
  /** The cluster's DNS suffix (Istio: domainSuffix). */
  domainSuffix: string;
  /** The SPIFFE trust domain. */
  trustDomain: string;
  /** Istio's cluster id (Istio: global.multiCluster.clusterName, default Kubernetes). */
  clusterId: string;
  /** The mesh id (Istio: meshID, default the trust domain). */
  meshId: string;
  /** Where the agent asks for certificates (Istio: CA_ADDR). */
  caAddress: string;
  /** Where the agent gets xDS (Istio: proxyConfig.discoveryAddress). */
  discoveryAddress: string;
  /** Native-sidecar mode (Istio: ENABLE_NATIVE_SIDECARS); a pod can override it by annotation. */
  nativeSidecars: boolean;
}

/** Istio's proxy resource defaults (global.proxy.resources). */
export const DEFAULT_PROXY_RESOURCES = {
  requests: { cpu: "100m", memory: "128Mi" },
  limits: { cpu: "2000m", memory: "1024Mi" },
} as const;

/** Ports of the sidecar itself that inbound capture always leaves alone: Envoy's stats, health and the agent. */
export const SIDECAR_INBOUND_PORTS = ["15090", "15021", "15020"] as const;

/**
 * The sidecar image (the Dockerfile's `proxy` target) at this release's
 * version, the tag deploy/ gives every Sextant image (deploy/test checks
 * both): never `latest`, so a pod runs the proxy its control plane expects.
 */
export const DEFAULT_PROXY_IMAGE = "sextant/proxy:0.0.0";

/** The default injection config, with Sextant's service names where Istio has istiod's. */
export function defaultInjectionConfig(overrides: Partial<InjectionConfig> = {}): InjectionConfig {
  const trustDomain = overrides.trustDomain ?? "cluster.local";
  return {
    template: overrides.template ?? loadTemplate(),
    proxyImage: DEFAULT_PROXY_IMAGE,
    revision: "default",
    domainSuffix: "cluster.local",
    trustDomain,
    clusterId: "Kubernetes",
    meshId: trustDomain,
    caAddress: "sextant-ca.istio-system.svc:8060",
    discoveryAddress: "sextant-push.istio-system.svc:15012",
    nativeSidecars: false,
    ...overrides,
  };
}

/** A pod as JSON (the AdmissionReview's object); only the fields the injector reads are typed. */
export interface PodJson {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    generateName?: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ apiVersion?: string; kind?: string; name?: string; controller?: boolean }>;
    [key: string]: unknown;
  };
  spec?: {
    hostNetwork?: boolean;
    containers?: Array<{ name?: string; ports?: unknown[]; [key: string]: unknown }>;
    initContainers?: Array<{ name?: string; [key: string]: unknown }>;
    volumes?: Array<{ name?: string; [key: string]: unknown }>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** Where the pod is being created. */
export interface InjectionTarget {
  /** The pod's namespace: AdmissionReview's request.namespace (pods being created often carry none). */
  namespace: string;
  /** The namespace's labels, when known; see {@link SelectionContext.namespaceLabels}. */
  namespaceLabels?: Record<string, string> | undefined;
}

/** The outcome of {@link injectPod}: the decision and, when injected, the new pod and the patch to it. */
export interface InjectionResult {
  decision: SelectionDecision;
  /** The injected pod (the input pod when not injected). */
  pod: PodJson;
  /** The RFC 6902 JSONPatch from the input pod to the injected one; empty when not injected. */
  patch: Operation[];
}

/**
 * Injects the sidecar into a pod: a pure function of the pod, where it runs
 * and the config, shared by the /inject webhook and offline kube-inject.
 * Throws {@link AnnotationError} when the pod's injection annotations are invalid.
 */
export function injectPod(pod: PodJson, target: InjectionTarget, config: InjectionConfig): InjectionResult {
  const decision = injectionRequired(pod, { ...target, revision: config.revision });
  if (!decision.inject) return { decision, pod, patch: [] };
  const injected = buildInjectedPod(pod, target.namespace, config);
  return { decision, pod: injected, patch: jsonPatch.compare(pod, injected) };
}

function buildInjectedPod(original: PodJson, namespace: string, config: InjectionConfig): PodJson {
  const pod = structuredClone(original);
  pod.metadata ??= {};
  pod.spec ??= {};
  const { metadata, spec } = pod;
  const labels = metadata.labels ?? {};
  const read = new AnnotationReader(metadata.annotations ?? {});

  const requests = {
    cpu: read.quantity(Annotations.proxyCPU) ?? DEFAULT_PROXY_RESOURCES.requests.cpu,
    memory: read.quantity(Annotations.proxyMemory) ?? DEFAULT_PROXY_RESOURCES.requests.memory,
  };
  const limits = {
    cpu: read.quantity(Annotations.proxyCPULimit) ?? DEFAULT_PROXY_RESOURCES.limits.cpu,
    memory: read.quantity(Annotations.proxyMemoryLimit) ?? DEFAULT_PROXY_RESOURCES.limits.memory,
  };
  const excludeInbound = read.ports(Annotations.excludeInboundPorts) ?? [];
  const values: Record<string, TemplateValue> = {
    proxyImage: read.word(Annotations.proxyImage) ?? config.proxyImage,
    namespace,
    domainSuffix: config.domainSuffix,
    trustDomain: config.trustDomain,
    clusterId: config.clusterId,
    meshId: config.meshId,
    caAddress: config.caAddress,
    // The agent's PROXY_CONFIG (Istio's ProxyConfig JSON); discoveryAddress is where it finds push.
    proxyConfigJson: JSON.stringify({ discoveryAddress: config.discoveryAddress }),
    proxyLogLevel: read.logLevel(Annotations.logLevel) ?? "warning",
    proxyComponentLogLevel: read.word(Annotations.componentLogLevel) ?? "misc:error",
    agentLogLevel: read.word(Annotations.agentLogLevel) ?? "default:info",
    interceptionMode: read.oneOf(Annotations.interceptionMode, ["REDIRECT", "TPROXY"]) ?? "REDIRECT",
    includeOutboundIPRanges: (read.cidrs(Annotations.includeOutboundIPRanges, true) ?? ["*"]).join(","),
    excludeOutboundIPRanges: (read.cidrs(Annotations.excludeOutboundIPRanges) ?? []).join(","),
    includeInboundPorts: (read.ports(Annotations.includeInboundPorts, true) ?? ["*"]).join(","),
    // The sidecar's own ports are always excluded, whatever the annotation says.
    excludeInboundPorts: [...new Set([...SIDECAR_INBOUND_PORTS, ...excludeInbound])].join(","),
    excludeOutboundPorts: (read.ports(Annotations.excludeOutboundPorts) ?? []).join(","),
    resources: { requests, limits },
    ...workloadValues(pod, namespace),
  };
  const native = read.boolean(Annotations.nativeSidecar) ?? config.nativeSidecars;
  read.check();

  const template = config.template;
  const init = render(template.initContainer, values);
  const proxy = render(template.proxyContainer, values);
  const appContainers = spec.containers ?? [];
  if (native) {
    spec.initContainers = [
      init,
      { ...proxy, ...render(template.nativeSidecar, values) },
      ...(spec.initContainers ?? []),
    ];
  } else {
    // istio-init runs first so that every later container's traffic is captured.
    spec.initContainers = [init, ...(spec.initContainers ?? [])];
    spec.containers = [...appContainers, proxy];
  }
  const volumes = render(template.volumes, values);
  const injectedNames = new Set(volumes.map((v) => v.name));
  spec.volumes = [...(spec.volumes ?? []).filter((v) => !injectedNames.has(v.name)), ...volumes];

  // Existing labels and annotations win: users may set the canonical name themselves.
  metadata.labels = { ...stringMap(render(template.labels, values)), ...labels };
  const annotations = { ...stringMap(render(template.annotations, values)), ...(metadata.annotations ?? {}) };
  annotations[STATUS_ANNOTATION] = JSON.stringify({
    initContainers: native ? [String(init.name), String(proxy.name)] : [String(init.name)],
    containers: native ? [] : [String(proxy.name)],
    volumes: volumes.map((v) => String(v.name)),
    imagePullSecrets: null,
    revision: config.revision,
    templateVersion: template.version,
  });
  metadata.annotations = annotations;
  return pod;
}

function stringMap(value: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, String(v)]));
}

/**
 * The values that describe the workload: its app containers and ports, its
 * controller (a Deployment is recognised through its ReplicaSet's
 * pod-template-hash, as Istio does) and its canonical service labels.
 */
function workloadValues(pod: PodJson, namespace: string): Record<string, TemplateValue> {
  const labels = pod.metadata?.labels ?? {};
  const containers = pod.spec?.containers ?? [];
  const ports = containers.flatMap((c) => c.ports ?? []);
  const controller =
    pod.metadata?.ownerReferences?.find((o) => o.controller) ?? pod.metadata?.ownerReferences?.[0];
  const podName = pod.metadata?.name || pod.metadata?.generateName?.replace(/-$/, "") || "";
  let workloadName = podName;
  let owner = `kubernetes://apis/v1/namespaces/${namespace}/pods/${podName}`;
  if (controller?.name && controller.kind) {
    const hash = labels["pod-template-hash"];
    if (controller.kind === "ReplicaSet" && hash && controller.name.endsWith(`-${hash}`)) {
      workloadName = controller.name.slice(0, -hash.length - 1);
      owner = `kubernetes://apis/apps/v1/namespaces/${namespace}/deployments/${workloadName}`;
    } else {
      workloadName = controller.name;
      const plural = `${controller.kind.toLowerCase()}s`;
      owner = `kubernetes://apis/${controller.apiVersion ?? "v1"}/namespaces/${namespace}/${plural}/${workloadName}`;
    }
  }
  return {
    appContainers: containers.map((c) => c.name ?? "").join(","),
    podPortsJson: JSON.stringify(ports),
    workloadName,
    owner,
    canonicalName:
      labels["service.istio.io/canonical-name"] ??
      labels["app.kubernetes.io/name"] ??
      labels.app ??
      workloadName,
    canonicalRevision:
      labels["service.istio.io/canonical-revision"] ??
      labels["app.kubernetes.io/version"] ??
      labels.version ??
      "latest",
    defaultContainer: containers[0]?.name,
  };
}
