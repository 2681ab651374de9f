import type { ConfigResource } from "@sextant/proto";
import { KINDS } from "@sextant/validation";

/** A stored resource as users read it: the Kubernetes object shape they wrote. */
export function toObject(resource: ConfigResource): Record<string, unknown> {
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    metadata: {
      name: resource.name,
      namespace: resource.namespace,
      ...(Object.keys(resource.labels).length > 0 ? { labels: resource.labels } : {}),
      ...(Object.keys(resource.annotations).length > 0 ? { annotations: resource.annotations } : {}),
      generation: resource.generation,
      resourceVersion: String(resource.revision),
    },
    spec: resource.spec ?? {},
  };
}

// The registry's plural, not kind + "s": telemetries, serviceentries, authorizationpolicies.
const kindsByLowerName = new Map(
  [...KINDS.values()].flatMap((info) => [
    [info.kind.toLowerCase(), info.kind],
    [info.plural, info.kind],
  ]),
);

/**
 * The kind a URL or query names: "VirtualService", "virtualservice" or
 * "virtualservices" all mean VirtualService, as kubectl accepts them.
 */
export function resolveKindName(name: string): string | undefined {
  return kindsByLowerName.get(name.toLowerCase());
}
