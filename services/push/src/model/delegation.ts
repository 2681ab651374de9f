import { resolveHost } from "@sextant/model";
import type { ConfigRef } from "@sextant/proto";
import type {
  Destination,
  HTTPMatchRequest,
  HTTPRoute,
  StringMatch,
  VirtualService,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import type { TypedConfig } from "./types.js";

/**
 * A VirtualService as translation sees it: a root's `delegate` routes
 * replaced by its delegates' routes, and the delegates it was merged from
 * (sources of what is built from it).
 */
export interface RoutedVirtualService extends TypedConfig<VirtualService> {
  readonly delegates: readonly ConfigRef[];
}

/**
 * Istio's VirtualService delegation (model/virtualservice_controller.go
 * mergeVirtualServices, model/virtualservice.go MergeHTTPRoutes): a
 * VirtualService without hosts is a delegate and routes nothing itself; an
 * HTTP route of a VirtualService with hosts that names a delegate
 * (`delegate.namespace` defaults to the root's) is replaced by the
 * delegate's routes merged with it (mergeHttpRoute). A route whose delegate
 * is missing, has hosts, or is not exported to the root's namespace is
 * dropped. Delegation is one level deep: a delegate's own `delegate` routes
 * are dropped. Short destination hosts of a delegate are resolved in the
 * delegate's namespace, as Istio resolves them before merging.
 */
export function mergeDelegates(
  virtualServices: readonly TypedConfig<VirtualService>[],
  domainSuffix: string,
  isVisible: (exportTo: readonly string[], ownNamespace: string, namespace: string) => boolean,
): RoutedVirtualService[] {
  const delegates = new Map<string, TypedConfig<VirtualService>>();
  for (const config of virtualServices) {
    if (config.spec.hosts.length === 0) delegates.set(`${config.ref.namespace}/${config.ref.name}`, config);
  }
  const out: RoutedVirtualService[] = [];
  for (const root of virtualServices) {
    if (root.spec.hosts.length === 0) continue;
    if (!root.spec.http.some((route) => route.delegate)) {
      out.push({ ...root, delegates: [] });
      continue;
    }
    const used: ConfigRef[] = [];
    const http: HTTPRoute[] = [];
    for (const route of root.spec.http) {
      if (!route.delegate) {
        http.push(route);
        continue;
      }
      const namespace = route.delegate.namespace || root.ref.namespace;
      const delegate = delegates.get(`${namespace}/${route.delegate.name}`);
      if (!delegate || !isVisible(delegate.spec.exportTo, namespace, root.ref.namespace)) continue;
      if (!used.some((ref) => ref.namespace === delegate.ref.namespace && ref.name === delegate.ref.name))
        used.push(delegate.ref);
      for (const leaf of delegate.spec.http) {
        if (leaf.delegate) continue;
        const merged = mergeHttpRoute(route, resolveDestinations(leaf, namespace, domainSuffix));
        if (merged) http.push(merged);
      }
    }
    out.push({ ...root, spec: { ...root.spec, http }, delegates: used });
  }
  return out;
}

/** The delegate route with its destination, mirror and mirrors hosts as FQDNs of the delegate's namespace. */
function resolveDestinations(route: HTTPRoute, namespace: string, domainSuffix: string): HTTPRoute {
  const resolve = (destination: Destination): Destination => ({
    ...destination,
    host: resolveHost(destination.host, namespace, domainSuffix),
  });
  return {
    ...route,
    route: route.route.map((entry) =>
      entry.destination ? { ...entry, destination: resolve(entry.destination) } : entry,
    ),
    ...(route.mirror ? { mirror: resolve(route.mirror) } : {}),
    mirrors: route.mirrors.map((entry) =>
      entry.destination ? { ...entry, destination: resolve(entry.destination) } : entry,
    ),
  };
}

/**
 * Istio's mergeHTTPRoute: the delegate route with the root's matches ANDed
 * in (undefined if they conflict), its name prefixed with the root's, and
 * each of rewrite, directResponse, timeout, retries, fault, mirror(s),
 * corsPolicy and headers taken from the root only where the delegate leaves
 * it unset.
 */
export function mergeHttpRoute(root: HTTPRoute, leaf: HTTPRoute): HTTPRoute | undefined {
  const match = mergeMatches(root.match, leaf.match);
  if (!match) return undefined;
  return {
    ...leaf,
    match,
    delegate: undefined,
    name: leaf.name && root.name ? `${root.name}-${leaf.name}` : leaf.name || root.name,
    rewrite: leaf.rewrite ?? root.rewrite,
    directResponse: leaf.directResponse ?? root.directResponse,
    timeout: leaf.timeout ?? root.timeout,
    retries: leaf.retries ?? root.retries,
    fault: leaf.fault ?? root.fault,
    mirror: leaf.mirror ?? root.mirror,
    mirrorPercent: leaf.mirrorPercent ?? root.mirrorPercent,
    mirrorPercentage: leaf.mirrorPercentage ?? root.mirrorPercentage,
    corsPolicy: leaf.corsPolicy ?? root.corsPolicy,
    mirrors: leaf.mirrors.length > 0 ? leaf.mirrors : root.mirrors,
    headers: leaf.headers ?? root.headers,
  };
}

/**
 * Istio's mergeHTTPMatchRequests: with matches on both sides, each delegate
 * match is ANDed with every root match it does not conflict with; a delegate
 * match that conflicts with all of them makes the whole route conflict
 * (undefined). Without matches on one side, the other side's.
 */
export function mergeMatches(
  root: readonly HTTPMatchRequest[],
  leaf: readonly HTTPMatchRequest[],
): HTTPMatchRequest[] | undefined {
  if (root.length === 0) return [...leaf];
  if (leaf.length === 0) return [...root];
  const out: HTTPMatchRequest[] = [];
  for (const leafMatch of leaf) {
    const compatible = root.filter((rootMatch) => !matchesConflict(rootMatch, leafMatch));
    if (compatible.length === 0) return undefined;
    for (const rootMatch of compatible) out.push(mergeMatch(rootMatch, leafMatch));
  }
  return out;
}

/** Istio's mergeHTTPMatchRequest: the delegate's match, the root's fields where it leaves them unset; maps merged, the delegate's entries winning. */
function mergeMatch(root: HTTPMatchRequest, leaf: HTTPMatchRequest): HTTPMatchRequest {
  return {
    ...leaf,
    name: leaf.name && root.name ? `${root.name}-${leaf.name}` : leaf.name || root.name,
    uri: leaf.uri ?? root.uri,
    scheme: leaf.scheme ?? root.scheme,
    method: leaf.method ?? root.method,
    authority: leaf.authority ?? root.authority,
    headers: { ...root.headers, ...leaf.headers },
    withoutHeaders: { ...root.withoutHeaders, ...leaf.withoutHeaders },
    queryParams: { ...root.queryParams, ...leaf.queryParams },
    port: leaf.port || root.port,
    sourceLabels: { ...root.sourceLabels, ...leaf.sourceLabels },
    sourceNamespace: leaf.sourceNamespace || root.sourceNamespace,
    gateways: leaf.gateways.length > 0 ? leaf.gateways : root.gateways,
    statPrefix: leaf.statPrefix || root.statPrefix,
  };
}

/** Istio's hasConflict: the delegate's match must narrow the root's, never widen or contradict it. */
function matchesConflict(root: HTTPMatchRequest, leaf: HTTPMatchRequest): boolean {
  const pairs: Array<[StringMatch | undefined, StringMatch | undefined]> = [
    [root.uri, leaf.uri],
    [root.scheme, leaf.scheme],
    [root.method, leaf.method],
    [root.authority, leaf.authority],
    ...Object.entries(leaf.headers).map(([k, v]): [StringMatch | undefined, StringMatch] => [
      root.headers[k],
      v,
    ]),
    ...Object.entries(leaf.withoutHeaders).map(([k, v]): [StringMatch | undefined, StringMatch] => [
      root.withoutHeaders[k],
      v,
    ]),
    ...Object.entries(leaf.queryParams).map(([k, v]): [StringMatch | undefined, StringMatch] => [
      root.queryParams[k],
      v,
    ]),
  ];
  if (pairs.some(([r, l]) => stringMatchConflict(r, l))) return true;
  if (Boolean(root.ignoreUriCase) !== Boolean(leaf.ignoreUriCase)) return true;
  if (root.port > 0 && leaf.port > 0 && root.port !== leaf.port) return true;
  if (root.sourceNamespace && leaf.sourceNamespace !== root.sourceNamespace) return true;
  for (const [k, v] of Object.entries(leaf.sourceLabels)) {
    if (k in root.sourceLabels && root.sourceLabels[k] !== v) return true;
  }
  if (root.gateways.length > 0 && leaf.gateways.length > 0) {
    if (leaf.gateways.some((gateway) => !root.gateways.includes(gateway))) return true;
  }
  return false;
}

/**
 * Istio's stringMatchConflict: no conflict when either side is unset; a
 * regex on either side conflicts with any match on the other; an exact root
 * takes only the same exact; a prefix root takes a prefix or exact that
 * starts with it; anything else conflicts.
 */
function stringMatchConflict(root: StringMatch | undefined, leaf: StringMatch | undefined): boolean {
  if (!root || !leaf) return false;
  const set = (value: StringMatch) => ({
    exact: value.exact || undefined,
    prefix: value.prefix || undefined,
    regex: value.regex || undefined,
  });
  const r = set(root);
  const l = set(leaf);
  if (r.regex && (l.regex || l.prefix || l.exact)) return true;
  if (l.regex && (r.regex || r.prefix || r.exact)) return true;
  if (r.exact) return l.prefix !== undefined || l.exact !== r.exact;
  if (r.prefix) {
    if (l.prefix) return !l.prefix.startsWith(r.prefix);
    if (l.exact) return !l.exact.startsWith(r.prefix);
  }
  return true;
}
