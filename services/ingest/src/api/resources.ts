import type { ConfigResource, ConfigStatus } from "@sextant/proto";
import { apiKindOf, findKind, KINDS } from "@sextant/validation";

/**
 * A stored resource as users read it: the Kubernetes object shape they
 * wrote, and for a Gateway API resource of a class Sextant implements the
 * `status` written back to it (conditions, listeners, parents, addresses).
 */
export function toObject(
  resource: ConfigResource,
  status?: ConfigStatus | undefined,
): Record<string, unknown> {
  return {
    apiVersion: resource.apiVersion,
    // As it was written: Gateway for a stored KubernetesGateway.
    kind: apiKindOfStored(resource.kind),
    metadata: {
      name: resource.name,
      // A cluster-scoped kind (GatewayClass) has none, as the API server shows it.
      ...(findKind(resource.kind)?.clusterScoped ? {} : { namespace: resource.namespace }),
      ...(Object.keys(resource.labels).length > 0 ? { labels: resource.labels } : {}),
      ...(Object.keys(resource.annotations).length > 0 ? { annotations: resource.annotations } : {}),
      generation: resource.generation,
      resourceVersion: String(resource.revision),
    },
    spec: resource.spec ?? {},
    ...(status?.gatewayStatus ? { status: status.gatewayStatus } : {}),
  };
}

function apiKindOfStored(kind: string): string {
  const info = findKind(kind);
  return info ? apiKindOf(info) : kind;
}

// The registry's plural, not kind + "s": telemetries, serviceentries, authorizationpolicies.
// Each also with its group (gateways.gateway.networking.k8s.io), which tells
// Istio's Gateway from the Gateway API's; the bare names "gateway" and
// "gateways" stay Istio's, as they were before the Gateway API kinds.
const kindsByLowerName = new Map<string, string>();
for (const info of KINDS.values()) {
  for (const name of [info.kind.toLowerCase(), info.plural, apiKindOf(info).toLowerCase()]) {
    if (!kindsByLowerName.has(name)) kindsByLowerName.set(name, info.kind);
    kindsByLowerName.set(`${name}.${info.group}`, info.kind);
  }
}

/**
 * The kind a URL or query names: "VirtualService", "virtualservice" or
 * "virtualservices" all mean VirtualService, as kubectl accepts them;
 * "gateways.gateway.networking.k8s.io" and "kubernetesgateway" mean the
 * Gateway API's Gateway.
 */
export function resolveKindName(name: string): string | undefined {
  return kindsByLowerName.get(name.toLowerCase());
}
