import type { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";

/**
 * Which generators serve a proxy: Envoy sidecars, Envoy gateways (node type
 * "router", the agent's `proxy router`), or proxyless gRPC (metadata
 * GENERATOR=grpc, whatever the node type).
 */
export type ProxyKind = "sidecar" | "router" | "grpc";

/** A connected proxy, as its node announced it (Istio's id format and metadata keys). */
export interface MeshProxy {
  /** The node id, e.g. "sidecar~10.0.0.1~reviews-v1-xyz.default~default.svc.cluster.local". */
  readonly id: string;
  readonly kind: ProxyKind;
  /** The first part of the id: "sidecar" or "router". */
  readonly type: string;
  readonly ip: string;
  readonly podName: string;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly instanceIps: readonly string[];
  readonly clusterId: string;
  readonly network: string;
  /**
   * The Kubernetes node the proxy's pod runs on (metadata NODE_NAME, which
   * the injector sets from spec.nodeName; Istio's Proxy.GetNodeName); empty
   * for a VM. EDS of a node-local service keeps only endpoints on this node.
   */
  readonly nodeName: string;
  /** The WorkloadGroup named for auto-registration (Istio's AUTO_REGISTER_GROUP). */
  readonly workloadGroup: string | undefined;
  readonly locality: { region: string; zone: string; subzone: string };
  /** The raw node metadata. */
  readonly metadata: Readonly<Record<string, unknown>>;
}

/** Thrown for a node that cannot be served; the message says what is wrong. */
export class InvalidNodeError extends Error {}

/**
 * Reads a proxy from the node of its first request. The id has four parts
 * separated by "~": type, IP, "<pod>.<namespace>" and the DNS domain; the
 * metadata's NAMESPACE wins over the id's when both are present.
 */
export function parseProxy(node: Node | undefined): MeshProxy {
  if (!node?.id) throw new InvalidNodeError("the first request of a stream must carry node.id");
  const parts = node.id.split("~");
  if (parts.length !== 4) {
    throw new InvalidNodeError(
      `node id "${node.id}" is not of the form <type>~<ip>~<pod>.<namespace>~<domain>`,
    );
  }
  const [type, ip, podAndNamespace, domain] = parts as [string, string, string, string];
  const metadata = (node.metadata ?? {}) as Record<string, unknown>;
  const dot = podAndNamespace.indexOf(".");
  const podName = dot < 0 ? podAndNamespace : podAndNamespace.slice(0, dot);
  const idNamespace = dot < 0 ? (domain.split(".")[0] ?? "") : podAndNamespace.slice(dot + 1);
  const namespace = stringOf(metadata.NAMESPACE) || idNamespace;
  if (!namespace)
    throw new InvalidNodeError(`node "${node.id}" names no namespace (id or metadata NAMESPACE)`);
  const instanceIps = stringOf(metadata.INSTANCE_IPS)
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    id: node.id,
    kind: stringOf(metadata.GENERATOR) === "grpc" ? "grpc" : type === "router" ? "router" : "sidecar",
    type,
    ip: instanceIps[0] ?? ip,
    podName,
    namespace,
    serviceAccount: stringOf(metadata.SERVICE_ACCOUNT),
    labels: stringMap(metadata.LABELS),
    instanceIps: instanceIps.length > 0 ? instanceIps : [ip],
    clusterId: stringOf(metadata.CLUSTER_ID),
    network: stringOf(metadata.NETWORK),
    nodeName: stringOf(metadata.NODE_NAME),
    workloadGroup: stringOf(metadata.AUTO_REGISTER_GROUP) || undefined,
    locality: {
      region: node.locality?.region ?? "",
      zone: node.locality?.zone ?? "",
      subzone: node.locality?.subZone ?? "",
    },
    metadata,
  };
}

function stringOf(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function stringMap(value: unknown): Record<string, string> {
  if (typeof value !== "object" || value === null) return {};
  return Object.fromEntries(
    Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
  );
}
