// The entry point of the conversion: a snapshot's Gateway API resources in,
// Istio's internal config and each resource's status out (istiod's
// pilot/pkg/config/kube/gateway does the same inside istiod).
import { configKey } from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import type { HTTPRoute, VirtualService } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import {
  gatewayParentStatuses,
  httpVirtualServices,
  type KeyedVirtualService,
  listenerAttachments,
  parentRefKey,
  type RouteKindName,
  statusParentRef,
  tcpVirtualServices,
  tlsVirtualServices,
} from "./attach.js";
import { convertGateways, ISTIO_CONTROLLER, SEXTANT_CONTROLLER } from "./gateways.js";
import { convertMeshParent, isMeshParent } from "./mesh.js";
import { type ParentRef, ReferenceGrants } from "./references.js";
import {
  convertGrpcRoute,
  convertHttpRoute,
  convertTcpRoute,
  convertTlsRoute,
  ROUTE_SEMANTICS_ANNOTATION,
  type RuleContext,
  type RuleConversion,
  sortHttpRoutes,
} from "./rules/index.js";
import type {
  ConvertedConfig,
  GatewayApiInput,
  GatewayApiOutput,
  GatewayApiStatus,
  RouteParentStatus,
} from "./types.js";

export { ISTIO_CONTROLLER, SEXTANT_CONTROLLER };

const ROUTE_KINDS: readonly RouteKindName[] = ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"];

/** Converts a snapshot. Pure and deterministic: equal inputs give equal outputs. */
export function convertGatewayApi(input: GatewayApiInput): GatewayApiOutput {
  const grants = new ReferenceGrants(input.resources);
  const namespaces = [
    ...new Set([
      ...input.resources.map((resource) => resource.namespace),
      ...[...input.services.values()].map((service) => service.namespace),
    ]),
  ].sort();
  const { classStatuses, gateways, owned } = convertGateways({ ...input, grants, namespaces });
  const statuses = new Map<string, GatewayApiStatus>();
  for (const [name, status] of classStatuses)
    statuses.set(configKey({ kind: "GatewayClass", namespace: "default", name }), {
      kind: "GatewayClass",
      status,
    });

  const ctx: RuleContext = {
    domainSuffix: input.domainSuffix,
    services: input.services,
    grants,
    serviceEntries: input.resources.filter((resource) => resource.kind === "ServiceEntry"),
  };
  const httpVirtualServicesByKey = new Map<string, KeyedVirtualService[]>();
  const virtualServices: ConvertedConfig<VirtualService>[] = [];
  /** Routes attached to each listener: `gateway namespace/name` -> listener -> route keys. */
  const attached = new Map<string, Map<string, Set<string>>>();

  for (const route of input.resources) {
    const kind = route.kind as RouteKindName;
    if (!ROUTE_KINDS.includes(kind)) continue;
    const attachments = listenerAttachments(route, kind, owned);
    const meshRefs = ((route.spec as { parentRefs?: ParentRef[] } | undefined)?.parentRefs ?? []).filter(
      isMeshParent,
    );
    if (attachments.length === 0 && meshRefs.length === 0) continue;

    const parents: Array<{ key: string; status: RouteParentStatus }> = [];
    // Istio numbers a route's TCP and TLS VirtualServices across all its parents.
    const count = { value: 0 };
    if (attachments.length > 0) {
      const rules = convertRules(kind, route, ctx);
      parents.push(
        ...gatewayParentStatuses(
          route,
          attachments,
          (attachment) => attachment.gateway.controller,
          rules.resolvedRefs,
        ),
      );
      for (const attachment of attachments) {
        if (attachment.denied) continue;
        const gatewayKey = `${attachment.gateway.resource.namespace}/${attachment.gateway.resource.name}`;
        const listeners = attached.get(gatewayKey) ?? new Map<string, Set<string>>();
        attached.set(gatewayKey, listeners);
        const routes = listeners.get(attachment.listener.sectionName) ?? new Set<string>();
        listeners.set(attachment.listener.sectionName, routes);
        routes.add(configKey(route));
      }
      if (kind === "HTTPRoute" || kind === "GRPCRoute") {
        for (const vs of httpVirtualServices(route, attachments, rules.routes as HTTPRoute[]))
          httpVirtualServicesByKey.set(vs.key, [...(httpVirtualServicesByKey.get(vs.key) ?? []), vs]);
      } else if (kind === "TCPRoute") {
        virtualServices.push(
          ...tcpVirtualServices(route, attachments, rules.routes as never, count).map(toConverted),
        );
      } else {
        virtualServices.push(
          ...tlsVirtualServices(route, attachments, rules.routes as never, count).map(toConverted),
        );
      }
    }
    for (const parentRef of meshRefs) {
      const mesh = convertMeshParent(route, parentRef, ctx, count.value);
      parents.push({
        key: parentRefKey(parentRef, route.namespace),
        status: {
          parentRef: statusParentRef(parentRef),
          controllerName: ISTIO_CONTROLLER,
          conditions: mesh.conditions,
        },
      });
      for (const { key, config } of mesh.virtualServices) {
        if (key === undefined) {
          // TCP and TLS: never merged.
          count.value++;
          virtualServices.push(config);
          continue;
        }
        const keyed: KeyedVirtualService = {
          key,
          namespace: config.ref.namespace,
          name: config.ref.name,
          source: config.source,
          generation: config.generation,
          spec: config.spec,
        };
        httpVirtualServicesByKey.set(key, [...(httpVirtualServicesByKey.get(key) ?? []), keyed]);
      }
    }
    // Istio orders a route's own parent entries by parentRef, descending.
    parents.sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    statuses.set(configKey(route), { kind, status: { parents: parents.map((p) => p.status) } });
  }

  for (const group of httpVirtualServicesByKey.values()) virtualServices.push(toConverted(mergeHttp(group)));

  for (const [key, gateway] of owned) {
    const counts = attached.get(key);
    statuses.set(configKey(gateway.resource), {
      kind: "KubernetesGateway",
      status: {
        ...gateway.status,
        listeners: gateway.status.listeners.map((listener) => ({
          ...listener,
          attachedRoutes: counts?.get(listener.name)?.size ?? 0,
        })),
      },
    });
  }
  virtualServices.sort((a, b) => {
    const x = `${a.ref.namespace}/${a.ref.name}`;
    const y = `${b.ref.namespace}/${b.ref.name}`;
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return { gateways, virtualServices, destinationRules: [], statuses };
}

function convertRules(kind: RouteKindName, route: ConfigResource, ctx: RuleContext): RuleConversion<unknown> {
  switch (kind) {
    case "HTTPRoute":
      return convertHttpRoute(route, ctx);
    case "GRPCRoute":
      return convertGrpcRoute(route, ctx);
    case "TCPRoute":
      return convertTcpRoute(route, ctx);
    case "TLSRoute":
      return convertTlsRoute(route, ctx);
  }
}

/**
 * The HTTP VirtualServices of one key merged into one (Istio's
 * mergeHTTPRoutes): routes of every HTTPRoute and GRPCRoute for one
 * listener and host, in route order (istiod's is creation time, which the
 * store does not keep: namespace/name), then sorted by the Gateway API's
 * precedence; the first route's namespace; named by the key.
 */
function mergeHttp(group: readonly KeyedVirtualService[]): KeyedVirtualService {
  const ordered = [...group].sort((a, b) => {
    const x = `${a.source.namespace}/${a.source.name}`;
    const y = `${b.source.namespace}/${b.source.name}`;
    return x < y ? -1 : x > y ? 1 : 0;
  });
  const first = ordered[0] as KeyedVirtualService;
  const http = ordered.flatMap((vs) => vs.spec.http);
  sortHttpRoutes(http);
  return { ...first, name: first.key.replaceAll("/", "~"), spec: { ...first.spec, http } };
}

function toConverted(vs: KeyedVirtualService): ConvertedConfig<VirtualService> {
  return {
    ref: { kind: "VirtualService", namespace: vs.namespace, name: vs.name },
    source: vs.source,
    generation: vs.generation,
    // Every VirtualService made from a route gets the Gateway API's semantics in the proxies, as istiod marks it.
    annotations: { [ROUTE_SEMANTICS_ANNOTATION]: "gateway" },
    spec: vs.spec,
  };
}
