// ROUTE_CONFIGURATION, VIRTUAL_HOST and HTTP_ROUTE patches on one route
// configuration, as Istio's envoyfilter/rc_patch.go applies them.
import {
  ApplyTo,
  type ConfigPatch,
  type JsonObject,
  Operation,
  PatchContext,
  type ProxyPatches,
} from "../../model/envoy-filter.js";
import {
  type Applied,
  objects,
  patchElement,
  patchesIn,
  patchSiblings,
  replaceFields,
  setList,
} from "./common.js";
import { copy, mergeMessage } from "./merge.js";

const ROUTE_CONFIGURATION = "envoy.config.route.v3.RouteConfiguration";
const VIRTUAL_HOST = "envoy.config.route.v3.VirtualHost";
const ROUTE = "envoy.config.route.v3.Route";

/** Patches a route configuration in place for `context`. */
export function patchRouteConfiguration(
  config: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  applied: Applied,
): void {
  const name = String(config.name ?? "");
  const inConfig = (applyTo: ApplyTo) =>
    patchesIn(patches, applyTo, context).filter((patch) => routeConfigurationMatches(name, context, patch));
  for (const patch of inConfig(ApplyTo.ROUTE_CONFIGURATION)) {
    if (patch.operation !== Operation.MERGE || !patch.value) continue;
    replaceFields(config, mergeMessage(ROUTE_CONFIGURATION, config, patch.value));
    applied.add(patch);
  }
  const hostPatches = inConfig(ApplyTo.VIRTUAL_HOST);
  const routePatches = inConfig(ApplyTo.HTTP_ROUTE);
  const hosts: JsonObject[] = [];
  for (const original of objects(config.virtualHosts)) {
    const host = patchElement(
      original,
      hostPatches,
      virtualHostMatches,
      (current, value) => mergeMessage(VIRTUAL_HOST, current, value),
      applied,
      true,
    );
    if (!host) continue;
    patchRoutes(host, routePatches, applied);
    hosts.push(host);
  }
  for (const patch of hostPatches) {
    if (patch.operation !== Operation.ADD) continue;
    hosts.push(copy(patch.value ?? {}));
    applied.add(patch);
  }
  setList(config, "virtualHosts", hosts);
}

/** The listener port a sidecar route configuration serves: its name, or an inbound one's port. */
function sidecarPort(name: string): number {
  if (name.startsWith("inbound|")) return Number(name.split("|")[1]) || 0;
  return /^\d+$/.test(name) ? Number(name) : 0;
}

/** Istio's ParseGatewayRDSRouteName: `http.<port>` or `https.<port>.<port name>.<gateway>.<namespace>`. */
function gatewayRoute(name: string): { port: number; portName: string; gateway: string } {
  if (name.startsWith("http.")) return { port: Number(name.slice(5)) || 0, portName: "", gateway: "" };
  const parts = name.split(".");
  if (name.startsWith("https.") && parts.length === 5) {
    const [, port, portName, gateway, namespace] = parts as [string, string, string, string, string];
    return { port: Number(port) || 0, portName, gateway: `${namespace}/${gateway}` };
  }
  return { port: 0, portName: "", gateway: "" };
}

/** Istio's routeConfigurationMatch. */
function routeConfigurationMatches(name: string, context: PatchContext, patch: ConfigPatch): boolean {
  const match = patch.match.routeConfiguration;
  if (!match) return true;
  if (match.name && match.name !== name) return false;
  if (context !== PatchContext.GATEWAY) return !match.portNumber || match.portNumber === sidecarPort(name);
  const route = gatewayRoute(name);
  if (match.portName && match.portName !== route.portName) return false;
  if (match.gateway && match.gateway !== route.gateway) return false;
  return !match.portNumber || match.portNumber === route.port;
}

function virtualHostMatches(host: JsonObject, patch: ConfigPatch): boolean {
  const match = patch.match.routeConfiguration?.vhost;
  if (!match) return true;
  const domains = Array.isArray(host.domains) ? (host.domains as unknown[]) : [];
  return (
    (!match.name || match.name === host.name) && (!match.domainName || domains.includes(match.domainName))
  );
}

const ACTIONS: Record<number, string> = { 1: "route", 2: "redirect", 3: "directResponse" };

function routeMatches(route: JsonObject, patch: ConfigPatch): boolean {
  const match = patch.match.routeConfiguration?.vhost?.route;
  if (!match) return true;
  if (match.name && match.name !== route.name) return false;
  const action = ACTIONS[match.action];
  return !action || route[action] !== undefined;
}

/** HTTP_ROUTE patches of one virtual host: MERGE and REMOVE per route, then the inserts. */
function patchRoutes(host: JsonObject, patches: readonly ConfigPatch[], applied: Applied): void {
  const forHost = patches.filter((patch) => virtualHostMatches(host, patch));
  let routes: JsonObject[] = [];
  for (const original of objects(host.routes)) {
    const route = patchElement(
      original,
      forHost,
      routeMatches,
      (current, value) => mergeMessage(ROUTE, current, value),
      applied,
    );
    if (route) routes.push(route);
  }
  for (const patch of forHost) {
    if (patch.operation === Operation.MERGE || patch.operation === Operation.REMOVE) continue;
    if (patch.operation === Operation.REPLACE) continue; // Istio has no REPLACE for routes
    const namesRoute = !!patch.match.routeConfiguration?.vhost?.route;
    const matches = (route: JsonObject) => routeMatches(route, patch);
    if (patch.operation === Operation.INSERT_FIRST && namesRoute && !routes.some(matches)) continue;
    const result = patchSiblings(routes, patch, namesRoute, matches);
    routes = result.list;
    if (result.applied) applied.add(patch);
  }
  setList(host, "routes", routes);
}
