// Inputs for the conversion tests: stored resources and registry services
// as ingest and discovery store them.
import type { ConfigResource, Service } from "@sextant/proto";
import { Service as ServiceMessage } from "@sextant/proto/gen/sextant/mesh/v1/service";
import { convertGatewayApi, type GatewayApiInput, type GatewayApiOutput } from "../src/index.js";

/**
 * A stored resource: kind as ingest stores it (a Gateway API Gateway is
 * KubernetesGateway), a GatewayClass in namespace "default".
 */
export function resource(
  kind: string,
  namespace: string,
  name: string,
  spec: object,
  meta: { generation?: number; annotations?: Record<string, string> } = {},
): ConfigResource {
  return {
    kind,
    apiVersion: "gateway.networking.k8s.io/v1",
    namespace,
    name,
    labels: {},
    annotations: meta.annotations ?? {},
    generation: meta.generation ?? 1,
    revision: 0,
    spec: spec as ConfigResource["spec"],
  };
}

/** GatewayClass `name` of `controllerName`. */
export const gatewayClass = (name: string, controllerName: string) =>
  resource("GatewayClass", "default", name, { controllerName });

/** A Gateway of class istio. */
export const gateway = (namespace: string, name: string, spec: object, meta = {}) =>
  resource("KubernetesGateway", namespace, name, { gatewayClassName: "istio", ...spec }, meta);

/** A Kubernetes Service of the registry with the given ports. */
export function service(name: string, namespace: string, ports: number[]): Service {
  return ServiceMessage.fromPartial({
    hostname: `${name}.${namespace}.svc.cluster.local`,
    namespace,
    name,
    addresses: ["10.96.0.1"],
    ports: ports.map((number) => ({ name: `port-${number}`, number, targetPort: number })),
    registry: "kubernetes",
  });
}

export function convert(
  stored: ConfigResource[],
  services: Service[] = [],
  extra: Partial<GatewayApiInput> = {},
): GatewayApiOutput {
  const key = (r: ConfigResource) => `${r.kind}.${r.namespace}.${r.name}`;
  return convertGatewayApi({
    resources: [...stored].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0)),
    services: new Map(services.map((s) => [s.hostname, s])),
    domainSuffix: "cluster.local",
    ...extra,
  });
}

/** A condition as `type=status reason: message`, for compact assertions. */
export function conditions(
  list: ReadonlyArray<{ type: string; status: string; reason: string; message: string }>,
): string[] {
  return list.map((c) => `${c.type}=${c.status} ${c.reason}: ${c.message}`);
}
