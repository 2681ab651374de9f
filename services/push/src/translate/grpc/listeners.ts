import { packAny } from "@sextant/proto";
import { HttpConnectionManager, Listener, Router, TypeUrl } from "@sextant/proto/envoy";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import { HTTPFault } from "@sextant/proto/gen/envoy/extensions/filters/http/fault/v3/fault";
import { cacheKey } from "../../cache/xds-cache.js";
import type { GeneratedResource, GenerationContext, WatchedNames } from "../generator.js";
import { parseHostPort, resolveClientHost } from "../names.js";

/** The fault filter's name in the HCM; routes override its config under this key. */
export const FAULT_FILTER_NAME = "envoy.filters.http.fault";

/**
 * Client listeners for proxyless gRPC (what @grpc/grpc-js-xds accepts): one
 * per requested `<host>:<port>`, named exactly as requested, holding an
 * api_listener HCM that fetches its routes over ADS from the route config of
 * the same name, with the fault filter (configured per route) and the router
 * last. A name that matches no service port gets no listener, and the client
 * reports the target as not found.
 */
export function generateGrpcListeners(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  if (watched === "*") return []; // gRPC clients always subscribe by name
  const { push, proxy, cache } = context;
  const resources: GeneratedResource[] = [];
  for (const name of [...watched].sort()) {
    const resource = cache.get(cacheKey("lds-grpc", proxy.namespace, name, push.configVersion), () => {
      const target = parseHostPort(name);
      if (!target) return null;
      const host = resolveClientHost(target.host, proxy.namespace, push.domainSuffix);
      const service = push.serviceFor(host, proxy.namespace);
      if (!service?.ports.some((port) => port.number === target.port)) return null;
      const manager = HttpConnectionManager.fromPartial({
        rds: {
          configSource: { ads: {}, resourceApiVersion: ApiVersion.V3 },
          routeConfigName: name,
        },
        httpFilters: [
          {
            name: FAULT_FILTER_NAME,
            typedConfig: packAny(TypeUrl.HTTPFault, HTTPFault, HTTPFault.fromPartial({})),
          },
          {
            name: "envoy.filters.http.router",
            typedConfig: packAny(TypeUrl.Router, Router, Router.fromPartial({})),
          },
        ],
      });
      const listener = Listener.fromPartial({
        name,
        apiListener: { apiListener: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager) },
      });
      return { name, resource: packAny(TypeUrl.Listener, Listener, listener), sources: [] };
    });
    if (resource) resources.push(resource);
  }
  return resources;
}
