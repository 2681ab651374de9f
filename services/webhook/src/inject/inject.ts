import type { Operation } from "fast-json-patch";
import jsonPatch from "fast-json-patch";
import { AnnotationError, AnnotationReader, Annotations, REFUSED_ANNOTATIONS } from "./annotations.js";
import { type NativeSidecarMode, type NodeVersion, nativeSidecarDefault } from "./native.js";
import { mergeContainer } from "./overrides.js";
import { APP_PROBERS_ENV, rewriteAppProbes } from "./probes.js";
import { mergePrometheus, PROMETHEUS_ENV } from "./prometheus.js";
import { defaultProxyConfig, type ProxyConfigJson, parseProxyConfig } from "./proxy-config.js";
import {
  DEFAULT_ROOT_NAMESPACE,
  effectiveProxyConfig,
  imageOfType,
  type ProxyConfigResource,
} from "./proxy-configs.js";
import { compareQuantities } from "./quantity.js";
import { injectionRequired, type SelectionDecision, STATUS_ANNOTATION } from "./selection.js";
import { type InjectionTemplate, loadTemplate, render, type TemplateValue } from "./template.js";
import { workloadValues } from "./workload.js";

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
  /** Native-sidecar mode (Istio: ENABLE_NATIVE_SIDECARS, default auto); a pod can override it by annotation. */
  nativeSidecars: NativeSidecarMode;
  /** Rewrite app probes to the agent (Istio: sidecarInjectorWebhook.rewriteAppHTTPProbe, default true). */
  rewriteAppProbes: boolean;
  /** Point Prometheus at the agent's merged metrics (Istio: meshConfig.enablePrometheusMerge, default true). */
  prometheusMerge: boolean;
  /** The mesh's root namespace (Istio: meshConfig.rootNamespace): its ProxyConfig without a selector covers every pod. */
  rootNamespace: string;
}

/** Istio's proxy resource defaults (global.proxy.resources). */
export const DEFAULT_PROXY_RESOURCES = {
  requests: { cpu: "100m", memory: "128Mi" },
  limits: { cpu: "2000m", memory: "1024Mi" },
} as const;

/** Envoy's stats and health ports, which inbound capture always leaves alone (with the status port). */
const PROXY_INBOUND_PORTS = ["15090", "15021"] as const;

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
    nativeSidecars: "auto",
    rewriteAppProbes: true,
    prometheusMerge: true,
    rootNamespace: DEFAULT_ROOT_NAMESPACE,
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
    nodeName?: string;
    containers?: Array<{ name?: string; ports?: unknown[]; [key: string]: unknown }>;
    initContainers?: Array<{ name?: string; ports?: unknown[]; [key: string]: unknown }>;
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
  /** The cluster's nodes, when known: native-sidecar `auto` mode needs them (see nativeSidecarDefault). */
  nodes?: readonly NodeVersion[] | undefined;
  /** The stored ProxyConfig resources (every namespace's); none when unset. */
  proxyConfigs?: readonly ProxyConfigResource[] | undefined;
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
  const injected = buildInjectedPod(pod, target, config);
  return { decision, pod: injected, patch: jsonPatch.compare(pod, injected) };
}

type Container = { name?: string; ports?: unknown[]; [key: string]: unknown };

/** The injection templates a pod can ask for with inject.istio.io/templates. */
const TEMPLATES = ["sidecar", "gateway"] as const;

function buildInjectedPod(original: PodJson, target: InjectionTarget, config: InjectionConfig): PodJson {
  const { namespace } = target;
  const pod = structuredClone(original);
  pod.metadata ??= {};
  pod.spec ??= {};
  const { metadata, spec } = pod;
  const podAnnotations = metadata.annotations ?? {};
  const read = new AnnotationReader(podAnnotations);

  for (const [name, reason] of Object.entries(REFUSED_ANNOTATIONS))
    if (read.raw(name) !== undefined) read.refuse(`${name} is refused: ${reason}`);

  const templateNames = (read.raw(Annotations.templates) ?? "sidecar").split(",").map((t) => t.trim());
  const unknown = templateNames.filter((t) => !(TEMPLATES as readonly string[]).includes(t));
  if (unknown.length > 0)
    read.refuse(
      `${Annotations.templates}: unknown template ${unknown.join(", ")}; known: ${TEMPLATES.join(", ")}`,
    );
  else if (templateNames.length > 1)
    read.refuse(
      `${Annotations.templates}=${JSON.stringify(read.raw(Annotations.templates))}: one template only`,
    );
  const gateway = templateNames[0] === "gateway";

  let annotatedProxyConfig: ProxyConfigJson | undefined;
  const proxyConfigText = read.raw(Annotations.proxyConfig);
  if (proxyConfigText !== undefined) {
    const parsed = parseProxyConfig(proxyConfigText);
    if ("problems" in parsed)
      for (const p of parsed.problems) read.refuse(`${Annotations.proxyConfig}: ${p}`);
    else annotatedProxyConfig = parsed.config;
  }
  const proxyConfig = effectiveProxyConfig(
    defaultProxyConfig(config.discoveryAddress),
    { rootNamespace: config.rootNamespace, resources: target.proxyConfigs ?? [] },
    { namespace, labels: metadata.labels ?? {} },
    annotatedProxyConfig,
  );
  const proxyMetadata = (proxyConfig.proxyMetadata ?? {}) as Record<string, string>;

  const interceptionMode =
    read.oneOf(Annotations.interceptionMode, ["REDIRECT", "TPROXY", "NONE"]) ??
    (proxyConfig.interceptionMode as string | undefined) ??
    "REDIRECT";
  const statusPort = read.port(Annotations.statusPort) ?? (proxyConfig.statusPort as number);
  // Istio's 0 turns the agent's status server off; Sextant's agent always serves it (health, probes, metrics).
  if (statusPort === 0)
    read.refuse(
      `${Annotations.statusPort}=0 is refused: the agent always serves Envoy's readiness, app probes and metrics on its status port`,
    );
  // The agent reads its status port from PROXY_CONFIG; the annotation is Istio's per-pod override of it.
  proxyConfig.statusPort = statusPort;
  const native =
    !gateway &&
    (read.boolean(Annotations.nativeSidecar) ??
      nativeSidecarDefault(config.nativeSidecars, target.nodes, spec.nodeName));
  if (proxyConfig.holdApplicationUntilProxyStarts === true && !native)
    read.refuse(
      `${Annotations.proxyConfig}: holdApplicationUntilProxyStarts is not supported; native sidecars (${Annotations.nativeSidecar}: "true") start the proxy before the app`,
    );

  const resources = proxyResources(read);
  const excludeInbound = read.ports(Annotations.excludeInboundPorts) ?? [];
  const inboundExclusions = [...PROXY_INBOUND_PORTS, String(statusPort)];
  const userVolumes = read.jsonObjects(Annotations.userVolume) ?? {};
  const userMounts = read.jsonObjects(Annotations.userVolumeMount) ?? {};
  const values: Record<string, TemplateValue> = {
    // The image type (the annotation's, else the proxy config's) suffixes the configured image's tag; an
    // annotated image is taken as it is (as Istio).
    proxyImage:
      read.word(Annotations.proxyImage) ??
      imageOfType(
        config.proxyImage,
        read.word(Annotations.proxyImageType) ??
          (proxyConfig.image as { imageType?: string } | undefined)?.imageType,
      ),
    namespace,
    domainSuffix: config.domainSuffix,
    trustDomain: config.trustDomain,
    clusterId: config.clusterId,
    meshId: config.meshId,
    caAddress: config.caAddress,
    revision: config.revision,
    proxyLogLevel: read.logLevel(Annotations.logLevel) ?? "warning",
    proxyComponentLogLevel: read.word(Annotations.componentLogLevel) ?? "misc:error",
    agentLogLevel: read.word(Annotations.agentLogLevel) ?? "default:info",
    interceptionMode,
    includeOutboundIPRanges: (read.cidrs(Annotations.includeOutboundIPRanges, true) ?? ["*"]).join(","),
    excludeOutboundIPRanges: (read.cidrs(Annotations.excludeOutboundIPRanges) ?? []).join(","),
    includeInboundPorts: (read.ports(Annotations.includeInboundPorts, true) ?? ["*"]).join(","),
    // The proxy's own ports are always excluded, whatever the annotation says.
    excludeInboundPorts: [...new Set([...inboundExclusions, ...excludeInbound])].join(","),
    excludeOutboundPorts: (read.ports(Annotations.excludeOutboundPorts) ?? []).join(","),
    includeOutboundPorts: (read.ports(Annotations.includeOutboundPorts) ?? []).join(","),
    excludeInterfaces: (read.interfaces(Annotations.excludeInterfaces) ?? []).join(","),
    statusPort,
    readinessInitialDelaySeconds: read.uint32(Annotations.readinessInitialDelaySeconds) ?? 0,
    readinessPeriodSeconds: read.uint32(Annotations.readinessPeriodSeconds) ?? 15,
    readinessFailureThreshold: read.uint32(Annotations.readinessFailureThreshold) ?? 4,
    resources,
    tlsMode: metadata.labels?.["security.istio.io/tlsMode"] || "istio",
    proxyConfigJson: JSON.stringify(proxyConfig),
    ...workloadValues(pod, namespace),
  };
  const rewriteProbes = read.boolean(Annotations.rewriteAppHTTPProbers) ?? config.rewriteAppProbes;
  const mergeMetrics = read.boolean(Annotations.mergeMetrics) ?? config.prometheusMerge;

  const template = config.template;
  const volumes = render(template.volumes, values);
  checkUserVolumes(read, userVolumes, userMounts, [...(spec.volumes ?? []), ...volumes]);
  read.check();

  // The pod's own istio-proxy / istio-init are overrides of the injected ones (Istio's
  // customisation and gateway `image: auto`), taken out here and merged below.
  const takeOverride = (name: string): Container | undefined => {
    const found = [...(spec.containers ?? []), ...(spec.initContainers ?? [])].find((c) => c.name === name);
    spec.containers = spec.containers?.filter((c) => c.name !== name);
    spec.initContainers = spec.initContainers?.filter((c) => c.name !== name);
    return found;
  };
  const proxyOverride = takeOverride("istio-proxy");
  const initOverride = takeOverride("istio-init");

  let proxy = render(
    gateway ? template.gateway.proxyContainer : template.proxyContainer,
    values,
  ) as Container;
  if (!gateway) {
    if (interceptionMode === "TPROXY") proxy.securityContext = render(template.tproxySecurityContext, values);
    if (native) proxy = { ...proxy, ...render(template.nativeSidecar, values) };
  }
  withProxyMetadataEnv(proxy, proxyMetadata);
  proxy.volumeMounts = [
    ...((proxy.volumeMounts as unknown[]) ?? []),
    ...Object.entries(userMounts).map(([name, mount]) => ({ name, ...mount })),
  ];
  if (proxyOverride) proxy = mergeContainer(proxy, proxyOverride) as Container;

  const captures = !gateway && interceptionMode !== "NONE";
  let init = captures ? (render(template.initContainer, values) as Container) : undefined;
  if (init) withProxyMetadataEnv(init, proxyMetadata);
  if (init && initOverride) init = mergeContainer(init, initOverride) as Container;
  const overrideUser = (proxyOverride?.securityContext as { runAsUser?: unknown } | undefined)?.runAsUser;
  if (typeof overrideUser === "number") {
    if (interceptionMode === "TPROXY") {
      // TPROXY needs the proxy to be root; the override cannot change that (as Istio).
      proxy.securityContext = { ...(proxy.securityContext as object), runAsUser: 0 };
    } else if (init && overrideUser !== 0) {
      // Capture must exempt the uid the proxy really runs as, or its own traffic loops back to it.
      const args = [...(init.args as string[])];
      args[args.indexOf("-u") + 1] = String(overrideUser);
      init.args = args;
    }
  }

  const userInit = spec.initContainers ?? [];
  if (native) {
    // istio-init, then the proxy, then the pod's own: its init containers are in the mesh.
    spec.initContainers = [...(init ? [init] : []), proxy, ...userInit];
  } else {
    // istio-init last, so that the pod's init containers run before capture starts (as Istio).
    spec.initContainers = [...userInit, ...(init ? [init] : [])];
    spec.containers = [...(spec.containers ?? []), proxy];
  }
  if (spec.initContainers.length === 0) delete spec.initContainers;

  const allVolumes = [
    ...volumes,
    ...Object.entries(userVolumes).map(([name, volume]) => ({ name, ...volume })),
  ];
  const injectedNames = new Set(allVolumes.map((v) => v.name));
  spec.volumes = [...(spec.volumes ?? []).filter((v) => !injectedNames.has(v.name)), ...allVolumes];
  if (gateway)
    spec.securityContext = mergePodSecurityContext(
      spec.securityContext,
      render(template.gateway.podSecurityContext, values),
    );

  const proxyEnv = (proxy.env as Array<{ name: string; value?: string }>) ?? [];
  let annotations = { ...stringMap(render(template.annotations, values)), ...podAnnotations };
  const prometheus = mergePrometheus(annotations, statusPort, mergeMetrics);
  if ("problem" in prometheus) throw new AnnotationError([prometheus.problem]);
  if (prometheus.merged) {
    annotations = prometheus.annotations;
    if (prometheus.env !== undefined) proxyEnv.push({ name: PROMETHEUS_ENV, value: prometheus.env });
  }
  if (rewriteProbes) {
    const probers = rewriteAppProbes(
      [...(spec.initContainers ?? []), ...(spec.containers ?? [])],
      statusPort,
    );
    if (probers !== undefined) proxyEnv.push({ name: APP_PROBERS_ENV, value: probers });
  }
  proxy.env = proxyEnv;

  // The template's labels are computed from the pod's own, so they replace them (as Istio's overlay does).
  metadata.labels = {
    ...(metadata.labels ?? {}),
    ...stringMap(render(gateway ? template.gateway.labels : template.labels, values)),
  };
  annotations[STATUS_ANNOTATION] = JSON.stringify({
    initContainers: [init, native ? proxy : undefined]
      .filter((c) => c !== undefined)
      .map((c) => String(c.name)),
    containers: native ? [] : [String(proxy.name)],
    volumes: allVolumes.map((v) => String(v.name)),
    imagePullSecrets: null,
    revision: config.revision,
    templateVersion: template.version,
  });
  metadata.annotations = annotations;
  return pod;
}

/**
 * The proxy's resources by Istio's rule: when any of the four resource
 * annotations is set, exactly the annotated values (no defaults mixed in, which
 * could put a request above a default limit); otherwise the defaults. A request
 * above its limit is refused: the API server would refuse the pod.
 */
function proxyResources(read: AnnotationReader): Record<string, Record<string, string>> {
  const names = {
    requests: { cpu: Annotations.proxyCPU, memory: Annotations.proxyMemory },
    limits: { cpu: Annotations.proxyCPULimit, memory: Annotations.proxyMemoryLimit },
  } as const;
  const anySet = Object.values(names).some((r) => Object.values(r).some((n) => read.raw(n) !== undefined));
  if (!anySet)
    return structuredClone(DEFAULT_PROXY_RESOURCES) as unknown as Record<string, Record<string, string>>;
  const out: Record<string, Record<string, string>> = {};
  for (const [section, resources] of Object.entries(names))
    for (const [resource, name] of Object.entries(resources)) {
      const value = read.quantity(name);
      if (value !== undefined) out[section] = { ...out[section], [resource]: value };
    }
  for (const resource of ["cpu", "memory"] as const) {
    const request = out.requests?.[resource];
    const limit = out.limits?.[resource];
    if (request !== undefined && limit !== undefined && compareQuantities(request, limit) > 0)
      read.refuse(
        `${names.requests[resource]}=${request} is more than ${names.limits[resource]}=${limit}: a request above its limit is refused by the API server`,
      );
  }
  return out;
}

/**
 * The effective ProxyConfig's proxyMetadata (a ProxyConfig's
 * environmentVariables) as environment variables of the container, in key
 * order, after the template's, as Istio's template adds them to istio-proxy
 * and istio-init. One the template already sets is replaced rather than
 * repeated (Kubernetes would take the later of the two anyway).
 */
function withProxyMetadataEnv(container: Container, proxyMetadata: Record<string, string>): void {
  const names = Object.keys(proxyMetadata).sort();
  if (names.length === 0) return;
  const env = ((container.env as Array<{ name: string }> | undefined) ?? []).filter(
    (e) => !Object.hasOwn(proxyMetadata, e.name),
  );
  container.env = [...env, ...names.map((name) => ({ name, value: proxyMetadata[name] }))];
}

/** userVolumeMount must name a volume the pod will have, and userVolume must not reuse a volume's name. */
function checkUserVolumes(
  read: AnnotationReader,
  volumes: Record<string, Record<string, unknown>>,
  mounts: Record<string, Record<string, unknown>>,
  existing: Array<{ name?: unknown }>,
): void {
  const taken = new Set(existing.map((v) => v.name));
  for (const name of Object.keys(volumes))
    if (taken.has(name)) read.refuse(`${Annotations.userVolume}: volume ${name} already exists in the pod`);
  for (const [name, mount] of Object.entries(mounts)) {
    if (typeof mount.mountPath !== "string" || mount.mountPath === "")
      read.refuse(`${Annotations.userVolumeMount}: ${name} needs a mountPath`);
    if (!taken.has(name) && !Object.hasOwn(volumes, name))
      read.refuse(
        `${Annotations.userVolumeMount}: ${name} is not a volume of the pod or of ${Annotations.userVolume}`,
      );
  }
}

/** The pod's securityContext with the template's merged in (sysctls merged by name, as strategic merge does). */
function mergePodSecurityContext(current: unknown, added: Record<string, unknown>): Record<string, unknown> {
  const base = (current ?? {}) as Record<string, unknown>;
  const addedSysctls = (added.sysctls ?? []) as Array<{ name: string }>;
  const names = new Set(addedSysctls.map((s) => s.name));
  const sysctls = [
    ...((base.sysctls as Array<{ name: string }>) ?? []).filter((s) => !names.has(s.name)),
    ...addedSysctls,
  ];
  return { ...base, ...added, sysctls };
}

function stringMap(value: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => [k, String(v)]),
  );
}
