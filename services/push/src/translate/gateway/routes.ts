import { type ConfigRef, packAny } from "@sextant/proto";
import { RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import { VirtualHost_TlsRequirementType as TlsRequirement } from "@sextant/proto/gen/envoy/config/route/v3/route_components";
import { labelsKey } from "../../cache/selection.js";
import { cacheKey } from "../../cache/xds-cache.js";
import { intersectHosts, mergedGatewayFor, virtualServicesForGateway } from "../../model/gateway.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import { type GenerationContext, generateByName } from "../generator.js";
import { buildHttpRoutes, MAX_DIRECT_RESPONSE_BODY_SIZE_BYTES } from "../sidecar/routes.js";

type Plain = Record<string, unknown>;

/**
 * Route configurations for routers (RDS), one per name their listeners give:
 * `http.<port>` (every plaintext HTTP server of the port) and
 * `https.<port>.<port name>.<gateway>.<namespace>` (one HTTPS server).
 * Cached by the router's namespace and labels (which Gateways select it).
 */
export function generateGatewayRoutes(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  const { push, proxy } = context;
  const labels = labelsKey(proxy.labels);
  return generateByName(
    context,
    watched,
    (name) => cacheKey("rds-gateway", proxy.namespace, labels, name, push.configVersion),
    (name) => buildGatewayRouteConfiguration(push, proxy, name),
  );
}

/** A virtual host being built, with what decides whether another host's may join it (Istio's route collapse). */
interface HostDraft {
  hostname: string;
  port: number;
  routes: Plain[];
  /** The VirtualServices (per gateway) whose routes it holds, in order: equal keys mean equal routes. */
  routeKey: string;
  requireTls: boolean;
}

/**
 * Istio's buildGatewayHTTPRouteConfig. For each server of the route name, the
 * VirtualServices bound to its Gateway (visible to the router's namespace),
 * whose hosts intersect the server's: each host of the intersection becomes a
 * virtual host `<host>:<server port>` with domain `<host>`, holding that
 * VirtualService's routes for the gateway (a host two VirtualServices give
 * gets both's routes, in order); `httpsRedirect` makes the server's hosts
 * `require_tls: ALL` (a host without routes gets a virtual host of its own
 * for the redirect). Virtual hosts with the very same routes collapse into
 * one (Istio's PILOT_ENABLE_ROUTE_COLLAPSE_OPTIMIZATION, on by default), the
 * most specific hostname naming it; catch-all routes go last in each; virtual hosts
 * sorted by name. No virtual host at all: one `blackhole:<port>` for `*`
 * without routes (404). A name no server has: an empty configuration.
 */
function buildGatewayRouteConfiguration(
  push: PushContext,
  proxy: MeshProxy,
  name: string,
): GeneratedResource | null {
  if (!/^https?\./.test(name)) return null;
  const merged = mergedGatewayFor(push, proxy);
  const servers = merged?.serversByRouteName.get(name) ?? [];
  const sources: ConfigRef[] = [];
  const addSource = (ref: ConfigRef) => {
    if (!sources.some((s) => s.kind === ref.kind && s.namespace === ref.namespace && s.name === ref.name))
      sources.push(ref);
  };
  const hosts = new Map<string, HostDraft>();
  const routesByVs = new Map<string, Plain[]>();
  for (const entry of servers) {
    addSource(entry.gateway);
    const port = entry.server.port?.number ?? 0;
    const redirect = entry.server.tls?.httpsRedirect === true;
    for (const config of virtualServicesForGateway(push, proxy.namespace, entry.gatewayName)) {
      const intersection = intersectHosts(entry.hosts, config.ref.namespace, config.hosts);
      if (intersection.length === 0) continue;
      // A server with tls (Istio's IsTLS, httpsRedirect included) makes redirects default to https.
      const isTls = entry.server.tls !== undefined;
      const vsKey = `${entry.gatewayName}\u0000${config.ref.namespace}/${config.ref.name}\u0000${isTls}`;
      let routes = routesByVs.get(vsKey);
      if (!routes) {
        addSource(config.ref);
        for (const delegate of config.delegates) addSource(delegate);
        routes = buildHttpRoutes(push, proxy, config, port, addSource, entry.gatewayName, isTls);
        routesByVs.set(vsKey, routes);
      }
      for (const raw of intersection) {
        const hostname = raw.toLowerCase();
        const existing = hosts.get(hostname);
        if (existing) {
          existing.routes.push(...routes);
          existing.routeKey += `\u0001${vsKey}`;
          if (redirect) existing.requireTls = true;
        } else {
          hosts.set(hostname, { hostname, port, routes: [...routes], routeKey: vsKey, requireTls: redirect });
        }
      }
    }
    if (!redirect) continue;
    for (const raw of entry.hosts) {
      const hostname = raw.toLowerCase();
      const existing = hosts.get(hostname);
      if (existing) existing.requireTls = true;
      else
        hosts.set(hostname, { hostname, port, routes: [], routeKey: `\u0002${hostname}`, requireTls: true });
    }
  }

  let virtualHosts: Plain[];
  if (hosts.size === 0) {
    const port = servers[0]?.server.port?.number ?? 0;
    virtualHosts = servers.length === 0 ? [] : [{ name: `blackhole:${port}`, domains: ["*"], routes: [] }];
  } else {
    // Route collapse: hosts visited most specific first; a host joins the first one with the same routes.
    const collapsed: Array<{ draft: HostDraft; domains: string[] }> = [];
    for (const draft of [...hosts.values()].sort((a, b) => moreSpecificFirst(a.hostname, b.hostname))) {
      const same = collapsed.find(
        (c) => c.draft.routeKey === draft.routeKey && c.draft.requireTls === draft.requireTls,
      );
      if (same) same.domains.push(draft.hostname);
      else collapsed.push({ draft, domains: [draft.hostname] });
    }
    virtualHosts = collapsed
      .map(({ draft, domains }) => ({
        name: `${draft.hostname}:${draft.port}`,
        domains,
        routes: catchAllLast(draft.routes),
        includeRequestAttemptCount: true,
        ...(draft.requireTls ? { requireTls: TlsRequirement.ALL } : {}),
      }))
      .sort((a, b) => compare(a.name, b.name));
  }
  const configuration = RouteConfiguration.fromPartial({
    name,
    virtualHosts: virtualHosts as never,
    validateClusters: false,
    maxDirectResponseBodySizeBytes: MAX_DIRECT_RESPONSE_BODY_SIZE_BYTES,
    ignorePortInHostMatching: true,
  });
  return { name, resource: packAny(TypeUrl.RouteConfiguration, RouteConfiguration, configuration), sources };
}

/** Istio's host.Names order (MoreSpecific): names before wildcards, longer first, then alphabetically. */
function moreSpecificFirst(a: string, b: string): number {
  const [wildA, wildB] = [a.startsWith("*"), b.startsWith("*")];
  if (wildA !== wildB) return wildA ? 1 : -1;
  if (a.length !== b.length) return b.length - a.length;
  return compare(a, b);
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Istio's SortVHostRoutes: catch-all routes (prefix `/` or regex `.*`, no header or query match) last, order kept. */
function catchAllLast(routes: readonly Plain[]): Plain[] {
  const isCatchAll = (route: Plain) => {
    const match = (route.match ?? {}) as Plain;
    const all =
      match.prefix === "/" ||
      match.pathSeparatedPrefix === "/" ||
      (match.safeRegex as { regex?: string } | undefined)?.regex === ".*";
    const headers = (match.headers as unknown[] | undefined) ?? [];
    const query = (match.queryParameters as unknown[] | undefined) ?? [];
    return all && headers.length === 0 && query.length === 0;
  };
  return [...routes.filter((r) => !isCatchAll(r)), ...routes.filter(isCatchAll)];
}
