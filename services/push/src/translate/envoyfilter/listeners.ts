// LISTENER, LISTENER_FILTER, FILTER_CHAIN, NETWORK_FILTER and HTTP_FILTER
// patches on one listener, as Istio's envoyfilter/listener_patch.go applies
// them: the listener, then its listener filters, then each filter chain,
// each of its network filters, and the HTTP filters of an HTTP connection
// manager; FILTER_CHAIN ADDs last.
import {
  ApplyTo,
  type ConfigPatch,
  type JsonObject,
  Operation,
  type PatchContext,
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
import { copy, isObject, mergeAny, mergeMessage, mergeSocket } from "./merge.js";
import { patchRouteConfiguration } from "./routes.js";

const LISTENER = "envoy.config.listener.v3.Listener";
const FILTER_CHAIN = "envoy.config.listener.v3.FilterChain";
const LISTENER_FILTER = "envoy.config.listener.v3.ListenerFilter";
const HCM_NAME = "envoy.filters.network.http_connection_manager";
const VIRTUAL_LISTENERS = new Set(["virtualInbound", "virtualOutbound"]);

/**
 * Patches a listener in place for `context`; returns false when a patch
 * removes it (Istio's empty name). The inline route configuration of an
 * HTTP connection manager (a sidecar's inbound chains) takes the route
 * patches of the same context.
 */
export function patchListener(
  listener: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  applied: Applied,
): boolean {
  const patched = patchElement(
    listener,
    patchesIn(patches, ApplyTo.LISTENER, context),
    listenerMatches,
    (current, value) => mergeMessage(LISTENER, current, value),
    applied,
  );
  if (!patched) return false;
  replaceFields(listener, patched);
  patchListenerFilters(listener, patches, context, applied);
  const chains = objects(listener.filterChains).filter((chain) =>
    patchFilterChain(listener, chain, patches, context, applied),
  );
  if (isObject(listener.defaultFilterChain) && objects(listener.defaultFilterChain.filters).length > 0) {
    if (!patchFilterChain(listener, listener.defaultFilterChain, patches, context, applied))
      delete listener.defaultFilterChain;
  }
  for (const patch of patchesIn(patches, ApplyTo.FILTER_CHAIN, context)) {
    if (patch.operation !== Operation.ADD || !listenerMatches(listener, patch)) continue;
    chains.push(copy(patch.value ?? {}));
    applied.add(patch);
  }
  setList(listener, "filterChains", chains);
  return true;
}

function listenerPort(listener: JsonObject): number | undefined {
  const address = listener.address;
  const socket = isObject(address) ? address.socketAddress : undefined;
  return isObject(socket) && typeof socket.portValue === "number" ? socket.portValue : undefined;
}

/** Istio's listenerMatch: name, then port (the virtual listeners match any port below LISTENER). */
function listenerMatches(listener: JsonObject, patch: ConfigPatch): boolean {
  const match = patch.match.listener;
  if (!match) return true;
  if (match.name && match.name !== listener.name) return false;
  if (patch.applyTo !== ApplyTo.LISTENER && VIRTUAL_LISTENERS.has(String(listener.name))) return true;
  return !match.portNumber || listenerPort(listener) === match.portNumber;
}

function patchListenerFilters(
  listener: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  applied: Applied,
): void {
  let filters = objects(listener.listenerFilters);
  for (const patch of patchesIn(patches, ApplyTo.LISTENER_FILTER, context)) {
    if (!listenerMatches(listener, patch)) continue;
    const named = patch.match.listener?.listenerFilter ?? "";
    const matches = (filter: JsonObject) => filter.name === named;
    if (patch.operation === Operation.MERGE) {
      if (!named) continue;
      filters = filters.map((filter) => {
        if (!matches(filter) || !patch.value) return filter;
        applied.add(patch);
        return mergeMessage(LISTENER_FILTER, filter, patch.value);
      });
      continue;
    }
    const result = patchSiblings(filters, patch, named !== "", matches);
    filters = result.list;
    if (result.applied) applied.add(patch);
  }
  setList(listener, "listenerFilters", filters);
}

/** Istio's filterChainMatch. */
function filterChainMatches(listener: JsonObject, chain: JsonObject, patch: ConfigPatch): boolean {
  const match = patch.match.listener;
  if (!match) return true;
  const chainMatch = isObject(chain.filterChainMatch) ? chain.filterChainMatch : undefined;
  if (
    VIRTUAL_LISTENERS.has(String(listener.name)) &&
    match.portNumber > 0 &&
    chainMatch?.destinationPort !== match.portNumber
  )
    return false;
  const want = match.filterChain;
  if (!want) return true;
  if (want.name && want.name !== chain.name) return false;
  if (want.sni && !(chainMatch?.serverNames as unknown[] | undefined)?.includes(want.sni)) return false;
  if (want.transportProtocol && chainMatch?.transportProtocol !== want.transportProtocol) return false;
  if (want.applicationProtocols) {
    const protocols = (chainMatch?.applicationProtocols as unknown[] | undefined) ?? [];
    if (!chainMatch || !want.applicationProtocols.split(",").every((p) => protocols.includes(p)))
      return false;
  }
  if (want.destinationPort > 0 && chainMatch?.destinationPort !== want.destinationPort) return false;
  return true;
}

/** Patches a filter chain in place; false when a patch removes it. */
function patchFilterChain(
  listener: JsonObject,
  chain: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  applied: Applied,
): boolean {
  const patched = patchElement(
    chain,
    patchesIn(patches, ApplyTo.FILTER_CHAIN, context),
    (current, patch) => listenerMatches(listener, patch) && filterChainMatches(listener, current, patch),
    mergeFilterChain,
    applied,
  );
  if (!patched) return false;
  replaceFields(chain, patched);
  patchNetworkFilters(listener, chain, patches, context, applied);
  return objects(chain.filters).length > 0;
}

/**
 * Istio's filter chain MERGE: a patch's transport socket of the same name as
 * the chain's merges into its typed config, and nothing else of the patch
 * applies; otherwise the plain merge (which sets or replaces the socket).
 */
function mergeFilterChain(chain: JsonObject, patch: JsonObject): JsonObject {
  const socket = patch.transportSocket;
  const current = chain.transportSocket;
  if (!isObject(socket) || !isObject(current) || socket.name !== current.name)
    return mergeMessage(FILTER_CHAIN, chain, patch);
  const merged = copy(chain);
  mergeSocket(merged.transportSocket as JsonObject, socket);
  return merged;
}

/**
 * A level of filters a patch can name: the network filters of a filter chain, or the HTTP filters of an
 * HTTP connection manager (a network filter's sub filters).
 */
interface FilterLevel {
  /** Whether the patch names a filter at this level (the sibling its list operation goes next to). */
  names(patch: ConfigPatch): boolean;
  /** Whether the filter is the one the patch names (any filter, when it names none). */
  matches(filter: JsonObject, patch: ConfigPatch): boolean;
}

const NETWORK_FILTERS: FilterLevel = {
  names: (patch) => !!patch.match.listener?.filterChain?.filter,
  matches: (filter, patch) => {
    const named = patch.match.listener?.filterChain?.filter?.name;
    return !named || filter.name === named;
  },
};

const HTTP_FILTERS: FilterLevel = {
  names: (patch) => !!patch.match.listener?.filterChain?.filter?.subFilter,
  matches: (filter, patch) => {
    const named = patch.match.listener?.filterChain?.filter?.subFilter?.name;
    return !named || filter.name === named;
  },
};

/** The list operations (all but MERGE) of patches on one level's filters, in patch order. */
function patchFilterList(
  filters: JsonObject[],
  patches: readonly ConfigPatch[],
  level: FilterLevel,
  applied: Applied,
): JsonObject[] {
  let list = filters;
  for (const patch of patches) {
    if (patch.operation === Operation.MERGE) continue;
    const result = patchSiblings(list, patch, level.names(patch), (filter) => level.matches(filter, patch));
    list = result.list;
    if (result.applied) applied.add(patch);
  }
  return list;
}

/** The MERGEs of patches that name filter at its level, in patch order. */
function mergeIntoFilter(
  filter: JsonObject,
  patches: readonly ConfigPatch[],
  level: FilterLevel,
  applied: Applied,
): void {
  for (const patch of patches) {
    if (patch.operation === Operation.MERGE && level.matches(filter, patch))
      mergeFilter(filter, patch, applied);
  }
}

function patchNetworkFilters(
  listener: JsonObject,
  chain: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  applied: Applied,
): void {
  const networkPatches = patchesIn(patches, ApplyTo.NETWORK_FILTER, context).filter(
    (patch) => listenerMatches(listener, patch) && filterChainMatches(listener, chain, patch),
  );
  const filters = patchFilterList(objects(chain.filters), networkPatches, NETWORK_FILTERS, applied);
  for (const filter of filters) {
    mergeIntoFilter(filter, networkPatches, NETWORK_FILTERS, applied);
    if (filter.name === HCM_NAME && isObject(filter.typedConfig)) {
      patchHttpFilters(listener, chain, filter, filter.typedConfig, patches, context, applied);
    }
  }
  chain.filters = filters;
}

/** Istio's filter MERGE: a new name, and the typed config merged when of the same type. */
function mergeFilter(filter: JsonObject, patch: ConfigPatch, applied: Applied): void {
  if (!isObject(filter.typedConfig) || !patch.value) return;
  if (typeof patch.value.name === "string" && patch.value.name) filter.name = patch.value.name;
  if (patch.value.typedConfig !== undefined) {
    const merged = mergeAny(filter.typedConfig, patch.value.typedConfig);
    if (merged) filter.typedConfig = merged;
  }
  applied.add(patch);
}

function patchHttpFilters(
  listener: JsonObject,
  chain: JsonObject,
  network: JsonObject,
  hcm: JsonObject,
  patches: ProxyPatches,
  context: PatchContext,
  applied: Applied,
): void {
  if (isObject(hcm.routeConfig)) patchRouteConfiguration(hcm.routeConfig, patches, context, applied);
  const httpPatches = patchesIn(patches, ApplyTo.HTTP_FILTER, context).filter(
    (patch) =>
      listenerMatches(listener, patch) &&
      filterChainMatches(listener, chain, patch) &&
      NETWORK_FILTERS.matches(network, patch),
  );
  const filters = patchFilterList(objects(hcm.httpFilters), httpPatches, HTTP_FILTERS, applied);
  for (const filter of filters) mergeIntoFilter(filter, httpPatches, HTTP_FILTERS, applied);
  setList(hcm, "httpFilters", filters);
}
