import { isIPv6 } from "node:net";
import { AGENT_PORTS } from "../settings.js";
import { byName } from "../util/by-name.js";

/** Which client a bootstrap is for: an Envoy sidecar, or a proxyless gRPC app. */
export type ProxyKind = "envoy" | "grpc";

/** Envoy's core.v3.Locality in proto JSON (snake_case); empty parts are left out. */
export interface LocalityJson {
  region?: string;
  zone?: string;
  sub_zone?: string;
}

/** The node a bootstrap announces, as Istio builds it: what push reads to know who is asking. */
export interface ProxyNode {
  /** `sidecar~<ip>~<pod>.<ns>~<ns>.svc.<domain>`. */
  id: string;
  /** `<app label, workload name or pod>.<ns>`: Envoy's service cluster (stats, tracing). */
  cluster: string;
  locality: LocalityJson;
  /** Istio's node metadata keys, sorted. */
  metadata: Record<string, unknown>;
}

/** What the node is built from: the agent's settings, or a test's. */
export interface ProxyNodeInputs {
  podName: string;
  namespace: string;
  serviceAccount: string;
  instanceIp: string;
  trustDomain: string;
  domainSuffix: string;
  labels: Readonly<Record<string, string>>;
  /** The pod's annotations (downward API); sent only when there are some, as Istio omits an empty map. */
  annotations?: Readonly<Record<string, string>>;
  /** Istio's ProxyConfig as JSON (the node's PROXY_CONFIG), when the agent has one. */
  proxyConfig?: Readonly<Record<string, unknown>>;
  /** ISTIO_META_* / ISTIO_METAJSON_* metadata, as read from the environment. */
  envMetadata: Readonly<Record<string, unknown>>;
}

/**
 * The version the node reports. istiod reads ISTIO_VERSION as a semantic
 * version and treats one it cannot parse as the newest; that is right for
 * Sextant's own push, and claiming an Istio release would be wrong.
 * ISTIO_META_ISTIO_VERSION overrides it.
 */
export const AGENT_ISTIO_VERSION = "sextant";

/** Istio's cluster id when none is configured (the injector's default clusterName). */
const DEFAULT_CLUSTER_ID = "Kubernetes";

/** The labels that carry a locality, newest first (Istio's GetLocalityLabel). */
const LOCALITY_LABELS = ["topology.istio.io/locality", "istio-locality"] as const;

/**
 * Istio's locality label value, "/"-separated. Kubernetes label values cannot
 * hold "/", so a label written `region.zone.subzone` is read with "." as the
 * separator; a value that already has "/" is taken as written.
 */
export function sanitizeLocality(label: string): string {
  return label.includes("/") ? label : label.replaceAll(".", "/");
}

/** A "region/zone/subzone" string as Envoy's Locality; missing parts are left out. */
export function parseLocality(value: string): LocalityJson {
  const [region, zone, subZone] = value.split("/");
  return {
    ...(region ? { region } : {}),
    ...(zone ? { zone } : {}),
    ...(subZone ? { sub_zone: subZone } : {}),
  };
}

/**
 * The node of a bootstrap, as istio-agent builds it (pkg/bootstrap
 * GetNodeMetaData and ConvertNodeToXDSNode): the environment's metadata
 * first, then the typed keys over it. The locality comes from the workload's
 * `topology.istio.io/locality` (or legacy `istio-locality`) label, as in
 * Istio; Istio also asks the cloud platform, which the agent does not.
 */
export function proxyNode(inputs: ProxyNodeInputs, kind: ProxyKind): ProxyNode {
  const env = inputs.envMetadata;
  const labels: Record<string, string> = { ...inputs.labels };
  const localityLabel = LOCALITY_LABELS.map((name) => [name, labels[name]] as const).find(([, v]) => v);
  let locality: LocalityJson = {};
  if (localityLabel) {
    const [name, value] = localityLabel;
    // Istio rewrites the label to its "/" form, which is what push compares.
    labels[name] = sanitizeLocality(value!);
    locality = parseLocality(labels[name]);
  }
  const stringOr = (value: unknown, fallback: string) =>
    typeof value === "string" && value !== "" ? value : fallback;
  const metadata: Record<string, unknown> = {
    ...env,
    NAME: inputs.podName,
    NAMESPACE: inputs.namespace,
    SERVICE_ACCOUNT: inputs.serviceAccount,
    // Istio joins every instance IP with commas; push reads it that way.
    INSTANCE_IPS: inputs.instanceIp,
    LABELS: labels,
    ...(inputs.annotations && Object.keys(inputs.annotations).length > 0
      ? { ANNOTATIONS: { ...inputs.annotations } }
      : {}),
    ...(inputs.proxyConfig ? { PROXY_CONFIG: inputs.proxyConfig } : {}),
    CLUSTER_ID: stringOr(env.CLUSTER_ID, DEFAULT_CLUSTER_ID),
    // The injector's default mesh id is the trust domain.
    MESH_ID: stringOr(env.MESH_ID, inputs.trustDomain),
    ISTIO_VERSION: stringOr(env.ISTIO_VERSION, AGENT_ISTIO_VERSION),
    ...(kind === "envoy"
      ? { ENVOY_STATUS_PORT: AGENT_PORTS.envoyStatus, ENVOY_PROMETHEUS_PORT: AGENT_PORTS.envoyPrometheus }
      : // push serves a node with GENERATOR=grpc the proxyless generators.
        { GENERATOR: "grpc" }),
  };
  const workloadName = stringOr(env.WORKLOAD_NAME, "");
  return {
    id: `sidecar~${inputs.instanceIp}~${inputs.podName}.${inputs.namespace}~${inputs.namespace}.svc.${inputs.domainSuffix}`,
    // Istio's serviceClusterOrDefault: the app label, else the workload name, else the pod.
    cluster: `${labels.app || workloadName || inputs.podName}.${inputs.namespace}`,
    locality,
    metadata: Object.fromEntries(Object.entries(metadata).sort(byName)),
  };
}

/** The loopback and wildcard addresses of the workload's IP family, as Istio's bootstrap picks them. */
export function localAddresses(instanceIp: string): { localhost: string; wildcard: string } {
  return isIPv6(instanceIp)
    ? { localhost: "::1", wildcard: "::" }
    : { localhost: "127.0.0.1", wildcard: "0.0.0.0" };
}
