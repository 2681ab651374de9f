// What Envoy would reject in a patched resource, as far as push can tell
// without Envoy: the rules EnvoyFilter patches commonly break. (That the
// resource decodes as its type at all is checked when it is encoded.)
// Each rule names Envoy's own check it stands for.
import type { JsonObject } from "../../model/envoy-filter.js";
import { objects } from "./common.js";
import { anyType, isObject } from "./merge.js";

const HCM_TYPE = "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
const ROUTER_TYPE = "envoy.extensions.filters.http.router.v3.Router";
/** Network filters that end a chain (Envoy's isTerminalFilter among those push's registry knows). */
const TERMINAL_NETWORK_TYPES = new Set([HCM_TYPE, "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"]);

/** Why Envoy would reject the listener, or nothing. */
export function listenerProblems(listener: JsonObject): string[] {
  const problems: string[] = [];
  if (!listener.name) problems.push("a listener needs a name");
  const chains = objects(listener.filterChains);
  const seen = new Map<string, number>();
  chains.forEach((chain, i) => {
    // Envoy: "multiple filter chains with the same matching rules are defined".
    const key = JSON.stringify(sortedKeys(chain.filterChainMatch ?? {}));
    const before = seen.get(key);
    if (before !== undefined)
      problems.push(`filter_chains[${i}] has the same match as filter_chains[${before}]`);
    else seen.set(key, i);
    problems.push(...chainProblems(chain, `filter_chains[${i}]`));
  });
  if (isObject(listener.defaultFilterChain))
    problems.push(...chainProblems(listener.defaultFilterChain, "default_filter_chain"));
  return problems;
}

function chainProblems(chain: JsonObject, path: string): string[] {
  const problems: string[] = [];
  const filters = objects(chain.filters);
  filters.forEach((filter, i) => {
    const type = anyType(filter.typedConfig);
    const last = i === filters.length - 1;
    // Envoy's filter chain factory: a terminal filter must be last, and the last must be terminal.
    if (type && TERMINAL_NETWORK_TYPES.has(type) && !last)
      problems.push(`${path}.filters[${i}] (${filter.name}) is terminal but not the last network filter`);
    if (last && type && !TERMINAL_NETWORK_TYPES.has(type) && isKnownNetworkFilter(type))
      problems.push(`${path}.filters[${i}] (${filter.name}) is not terminal but is the last network filter`);
    if (type === HCM_TYPE && isObject(filter.typedConfig))
      problems.push(...hcmProblems(filter.typedConfig, `${path}.filters[${i}]`));
  });
  return problems;
}

/** Network filter types that are known not to end a chain (any other unknown type is given the benefit). */
function isKnownNetworkFilter(type: string): boolean {
  return type.startsWith("envoy.extensions.filters.network.");
}

function hcmProblems(hcm: JsonObject, path: string): string[] {
  const problems: string[] = [];
  const filters = objects(hcm.httpFilters);
  filters.forEach((filter, i) => {
    const terminal = anyType(filter.typedConfig) === ROUTER_TYPE;
    const last = i === filters.length - 1;
    // Envoy: "terminal filter named … must be the last filter in a http filter chain" and its converse.
    if (terminal && !last)
      problems.push(`${path}.http_filters[${i}] (${filter.name}) is terminal but not the last HTTP filter`);
    if (!terminal && last)
      problems.push(`${path}.http_filters[${i}] (${filter.name}) is the last HTTP filter but not terminal`);
  });
  if (isObject(hcm.routeConfig))
    problems.push(...routeConfigurationProblems(hcm.routeConfig).map((p) => `${path}: ${p}`));
  return problems;
}

const ROUTE_ACTIONS = ["route", "redirect", "directResponse", "filterAction", "nonForwardingAction"];
const PATH_SPECIFIERS = [
  "prefix",
  "path",
  "safeRegex",
  "connectMatcher",
  "pathSeparatedPrefix",
  "pathMatchPolicy",
];

/** Why Envoy would reject the route configuration, or nothing. */
export function routeConfigurationProblems(config: JsonObject): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  const domains = new Set<string>();
  objects(config.virtualHosts).forEach((host, i) => {
    const path = `virtual_hosts[${i}]`;
    const name = String(host.name ?? "");
    // Envoy: "Only unique values for name are permitted" / "… for domains are permitted".
    if (!name) problems.push(`${path}: a virtual host needs a name`);
    else if (names.has(name)) problems.push(`${path}: duplicate virtual host name ${name}`);
    names.add(name);
    const hostDomains = Array.isArray(host.domains) ? (host.domains as unknown[]) : [];
    if (hostDomains.length === 0) problems.push(`${path}: a virtual host needs domains`);
    for (const domain of hostDomains) {
      const key = String(domain).toLowerCase();
      if (domains.has(key)) problems.push(`${path}: duplicate domain ${key}`);
      domains.add(key);
    }
    objects(host.routes).forEach((route, j) => {
      if (!ROUTE_ACTIONS.some((action) => route[action] !== undefined))
        problems.push(`${path}.routes[${j}]: a route needs an action`);
      const match = isObject(route.match) ? route.match : undefined;
      if (!match || !PATH_SPECIFIERS.some((specifier) => match[specifier] !== undefined))
        problems.push(`${path}.routes[${j}]: a route match needs a path specifier`);
    });
  });
  return problems;
}

/** Why Envoy would reject the cluster, or nothing. */
export function clusterProblems(cluster: JsonObject): string[] {
  const problems: string[] = [];
  if (!cluster.name) problems.push("a cluster needs a name");
  // Cluster.connect_timeout: (validate.rules).duration.gt = 0.
  if (typeof cluster.connectTimeout === "string" && Number.parseFloat(cluster.connectTimeout) <= 0)
    problems.push("connect_timeout must be greater than 0s");
  if (cluster.type === "EDS" && !isObject(cluster.edsClusterConfig))
    problems.push("an EDS cluster needs eds_cluster_config");
  return problems;
}

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (!isObject(value)) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortedKeys(value[key])]),
  );
}
