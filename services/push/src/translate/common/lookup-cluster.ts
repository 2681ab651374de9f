import type { PushContext } from "../../model/push-context.js";
import { outboundClusterName } from "../names.js";

/**
 * Istio's LookupCluster, for the services MeshConfig providers name
 * (ext_authz servers, tracing collectors): `<namespace>/<hostname>`, or a
 * hostname the registry has, to its outbound cluster
 * `outbound|<port>||<hostname>`.
 */
export function lookupCluster(
  push: PushContext,
  service: string,
  port: number,
): { hostname: string; cluster: string } | { error: string } {
  if (service === "") return { error: "service must not be empty" };
  const slash = service.indexOf("/");
  const [namespace, hostname] =
    slash < 0 ? [undefined, service] : [service.slice(0, slash), service.slice(slash + 1)];
  const found = push.servicesByHost.get(hostname);
  if (!found || (namespace !== undefined && found.namespace !== namespace))
    return { error: `could not find service ${service} in the registry` };
  return { hostname, cluster: outboundClusterName(port, "", hostname) };
}
