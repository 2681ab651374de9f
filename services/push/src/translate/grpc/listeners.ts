import { packAny } from "@sextant/proto";
import { HttpConnectionManager, Listener, Router, TypeUrl } from "@sextant/proto/envoy";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import { HTTPFault } from "@sextant/proto/gen/envoy/extensions/filters/http/fault/v3/fault";
import { cacheKey } from "../../cache/xds-cache.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import { FAULT_FILTER_NAME } from "../common/routes.js";
import { type GenerationContext, generateByName } from "../generator.js";
import { INBOUND_LISTENER_PREFIX, parseHostPort, resolveClientHost } from "../names.js";
import { buildInboundListener, ROUTER_FILTER_NAME } from "./inbound.js";

/** The fault filter's name in the HCM (now shared with the sidecar generators). */
export { FAULT_FILTER_NAME };

/**
 * Listeners for proxyless gRPC (what @grpc/grpc-js-xds accepts), one per
 * requested name. A name with Istio's inbound prefix
 * (`xds.istio.io/grpc/lds/inbound/<ip>:<port>`) is a server's: it gets the
 * server listener of {@link buildInboundListener}, which depends on the
 * proxy's namespace and labels (the policies that select it). Any other is
 * a client's `<host>:<port>`: an api_listener HCM that fetches its routes
 * over ADS from the route config of the same name, with the fault filter
 * (configured per route) and the router last. A client name that matches no
 * service port gets no listener, and the client reports the target as not
 * found.
 */
export function generateGrpcListeners(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy } = context;
  const labels = JSON.stringify(
    Object.entries(proxy.labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  );
  return generateByName(
    context,
    watched,
    (name) =>
      name.startsWith(INBOUND_LISTENER_PREFIX)
        ? cacheKey("lds-grpc-inbound", proxy.namespace, labels, name, push.configVersion)
        : cacheKey("lds-grpc", proxy.namespace, name, push.configVersion),
    (name) =>
      name.startsWith(INBOUND_LISTENER_PREFIX)
        ? buildInboundListener(push, proxy, name)
        : buildListener(push, proxy.namespace, name),
  );
}

/** The client listener `name` (`<host>:<port>`) as seen from namespace; null if no such service port. */
export function buildListener(push: PushContext, namespace: string, name: string): GeneratedResource | null {
  const target = parseHostPort(name);
  if (!target) return null;
  const host = resolveClientHost(target.host, namespace, push.domainSuffix);
  const service = push.serviceFor(host, namespace);
  if (!service?.ports.some((port) => port.number === target.port)) return null;
  const manager = HttpConnectionManager.fromPartial({
    // Unused by gRPC; Envoy's rules require one.
    statPrefix: "outbound",
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
        name: ROUTER_FILTER_NAME,
        typedConfig: packAny(TypeUrl.Router, Router, Router.fromPartial({})),
      },
    ],
  });
  const listener = Listener.fromPartial({
    name,
    apiListener: { apiListener: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager) },
  });
  return { name, resource: packAny(TypeUrl.Listener, Listener, listener), sources: [] };
}
