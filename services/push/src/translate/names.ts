/** Istio's outbound cluster name: `outbound|<port>|<subset>|<fqdn>`. */
export function outboundClusterName(port: number, subset: string, host: string): string {
  return `outbound|${port}|${subset}|${host}`;
}

/** The parts of an outbound cluster name, or undefined for any other name. */
export function parseOutboundClusterName(
  name: string,
): { port: number; subset: string; host: string } | undefined {
  const parts = name.split("|");
  if (parts.length !== 4 || parts[0] !== "outbound") return undefined;
  const port = Number(parts[1]);
  if (!Number.isInteger(port) || port <= 0 || port > 65535 || !parts[3]) return undefined;
  return { port, subset: parts[2] ?? "", host: parts[3] };
}

/** A proxyless gRPC listener or route name: `<host>:<port>`, exactly the client's `xds:///<host>:<port>` target. */
export function parseHostPort(name: string): { host: string; port: number } | undefined {
  const colon = name.lastIndexOf(":");
  if (colon <= 0) return undefined;
  const port = Number(name.slice(colon + 1));
  if (!Number.isInteger(port) || port <= 0 || port > 65535) return undefined;
  return { host: name.slice(0, colon), port };
}

/**
 * Resolves the host a gRPC client wrote, relative to its namespace, as
 * istiod's gRPC generator does: "reviews" and "reviews.<ns>" become
 * "reviews.<ns>.svc.<suffix>"; "reviews.<ns>.svc" gets the suffix; anything
 * else is taken as a full name.
 */
export function resolveClientHost(host: string, namespace: string, domainSuffix: string): string {
  const labels = host.split(".");
  if (labels.length === 1) return `${host}.${namespace}.svc.${domainSuffix}`;
  if (labels.length === 2) return `${host}.svc.${domainSuffix}`;
  if (labels.length === 3 && labels[2] === "svc") return `${host}.${domainSuffix}`;
  return host;
}

/**
 * The prefix of the Listener names gRPC servers ask for: with Istio's
 * bootstrap (`server_listener_resource_name_template`
 * "xds.istio.io/grpc/lds/inbound/%s"), an XdsServer bound to 10.1.0.1:9080
 * asks for `xds.istio.io/grpc/lds/inbound/10.1.0.1:9080` (istio-agent's
 * grpcxds.ServerListenerNamePrefix).
 */
export const INBOUND_LISTENER_PREFIX = "xds.istio.io/grpc/lds/inbound/";

/**
 * The address and port of an inbound listener name, as Go's
 * net.SplitHostPort reads `<ip>:<port>` and `[<ipv6>]:<port>`; undefined
 * for any other name.
 */
export function parseInboundListenerName(name: string): { host: string; port: number } | undefined {
  if (!name.startsWith(INBOUND_LISTENER_PREFIX)) return undefined;
  const address = name.slice(INBOUND_LISTENER_PREFIX.length);
  let host: string;
  let portText: string;
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    if (close < 0 || address[close + 1] !== ":") return undefined;
    host = address.slice(1, close);
    portText = address.slice(close + 2);
  } else {
    const colon = address.lastIndexOf(":");
    if (colon < 0 || address.indexOf(":") !== colon) return undefined;
    host = address.slice(0, colon);
    portText = address.slice(colon + 1);
  }
  if (!/^\d+$/.test(portText)) return undefined;
  const port = Number(portText);
  if (port <= 0 || port > 65535) return undefined;
  return { host, port };
}
