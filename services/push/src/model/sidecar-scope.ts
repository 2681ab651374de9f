import { resolveHost } from "@sextant/model";
import type { Service } from "@sextant/proto";
import {
  type IstioEgressListener,
  OutboundTrafficPolicy_Mode,
  type Sidecar,
  type SidecarPort,
} from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import type { VirtualService } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import type { MeshProxy } from "./proxy.js";
import { type PushContext, visible } from "./push-context.js";
import { selectorMatches } from "./security.js";
import type { TypedConfig } from "./types.js";

/** One egress listener of a scope (Istio's IstioEgressListenerWrapper): what it imports. */
export interface SidecarEgressListener {
  /** The listener's port; undefined for the catch-all listener (Istio builds listeners per service port). */
  readonly port?: SidecarPort;
  /** The bind address as written ("" if none). */
  readonly bind: string;
  /** The imported hosts by namespace ("*" for any namespace; "." already replaced by the proxy's). */
  readonly hosts: ReadonlyMap<string, readonly string[]>;
  /**
   * The services this listener imports, sorted by hostname; with a port, each
   * is trimmed to that port (Istio's serviceMatchingListenerPort).
   */
  readonly services: readonly Service[];
  /** The VirtualServices (bound to the mesh gateway, visible here) whose hosts this listener imports, in config order. */
  readonly virtualServices: readonly TypedConfig<VirtualService>[];
}

/** What a sidecar proxy sees of the mesh (Istio's SidecarScope): the services it imports and its outbound policy. */
export interface SidecarScope {
  /**
   * The services in scope (the union over the egress listeners, plus the
   * destinations of their VirtualServices), sorted by hostname; one per
   * hostname. This is what CDS builds clusters for.
   */
  readonly services: readonly Service[];
  /** The same services by hostname. */
  readonly servicesByHost: ReadonlyMap<string, Service>;
  /** What happens to traffic for hosts outside the registry (the mesh default is ALLOW_ANY). */
  readonly outboundTrafficPolicy: "ALLOW_ANY" | "REGISTRY_ONLY";
  /** The Sidecar resource that applied, for sources; none when the mesh default applies. */
  readonly sidecar?: TypedConfig<Sidecar>;
  /** The egress listeners; the default scope has one catch-all listener importing "*\/*". */
  readonly egressListeners: readonly SidecarEgressListener[];
}

/** The mesh's outboundTrafficPolicy when no Sidecar sets one (Istio's MeshConfig default). */
export const MESH_OUTBOUND_TRAFFIC_POLICY = "ALLOW_ANY";

const MESH_GATEWAY = "mesh";
const WILDCARD_NAMESPACE = "*";

const scopes = new WeakMap<PushContext, Map<string, SidecarScope>>();

/**
 * The SidecarScope of a proxy, as istiod's PushContext.getSidecarScope and
 * ConvertToSidecarScope build it:
 *
 * - for a router (gateway), never a Sidecar, as Istio's doGetSidecarScope;
 * - the Sidecar in the proxy's namespace whose workloadSelector matches the
 *   proxy's labels, else the namespace's Sidecar without a selector, else the
 *   root namespace's Sidecar without a selector (the first by namespace/name
 *   where Istio takes the oldest: ingest keeps no creation time);
 * - none: every service visible to the proxy's namespace (exportTo), and the
 *   mesh's outbound policy (ALLOW_ANY);
 * - a Sidecar: per egress listener (none means one importing "*\/*"), the
 *   visible services whose namespace and hostname an egress host
 *   `<namespace>/<host>` names ("." is the proxy's namespace, "*" any, "~"
 *   none; an explicit namespace entry shadows "*" for that namespace, as in
 *   Istio), trimmed to the listener's port if it has one; then the
 *   destinations of the VirtualServices those hosts import (the same hostname
 *   in the proxy's namespace first, else the first visible namespace
 *   alphabetically). `outboundTrafficPolicy` from the Sidecar, else the mesh's.
 *
 * Memoized per snapshot by (Sidecar, namespace), which is all a scope depends on.
 */
export function sidecarScope(push: PushContext, proxy: MeshProxy): SidecarScope {
  const sidecar = applicableSidecar(push, proxy);
  const key = `${proxy.namespace}\u0000${sidecar ? `${sidecar.ref.namespace}/${sidecar.ref.name}` : ""}`;
  let byKey = scopes.get(push);
  if (!byKey) {
    byKey = new Map();
    scopes.set(push, byKey);
  }
  let scope = byKey.get(key);
  if (!scope) {
    scope = buildScope(push, proxy.namespace, sidecar);
    byKey.set(key, scope);
  }
  return scope;
}

/** The Sidecar resource that applies to proxy, with Istio's precedence; undefined if none. */
export function applicableSidecar(push: PushContext, proxy: MeshProxy): TypedConfig<Sidecar> | undefined {
  // Istio's doGetSidecarScope: gateways always take the default scope (egress */*), whatever Sidecar exists.
  if (proxy.kind === "router") return undefined;
  const own = push.sidecars.filter((config) => config.ref.namespace === proxy.namespace);
  const selected = own.find(
    (config) => hasSelector(config) && selectorMatches(config.spec.workloadSelector?.labels, proxy.labels),
  );
  if (selected) return selected;
  const namespaceDefault = own.find((config) => !hasSelector(config));
  if (namespaceDefault) return namespaceDefault;
  return push.sidecars.find((config) => config.ref.namespace === push.rootNamespace && !hasSelector(config));
}

function hasSelector(config: TypedConfig<Sidecar>): boolean {
  return Object.keys(config.spec.workloadSelector?.labels ?? {}).length > 0;
}

function buildScope(
  push: PushContext,
  namespace: string,
  sidecar: TypedConfig<Sidecar> | undefined,
): SidecarScope {
  const exported = push.services.filter((service) => visible(service.exportTo, service.namespace, namespace));
  const meshVirtualServices = push.virtualServices.filter(
    (config) =>
      visible(config.spec.exportTo, config.ref.namespace, namespace) &&
      (config.spec.gateways.length === 0 || config.spec.gateways.includes(MESH_GATEWAY)),
  );
  if (!sidecar) {
    return {
      services: exported,
      servicesByHost: new Map(exported.map((service) => [service.hostname, service])),
      outboundTrafficPolicy: MESH_OUTBOUND_TRAFFIC_POLICY,
      egressListeners: [
        {
          bind: "",
          hosts: new Map([[WILDCARD_NAMESPACE, ["*"]]]),
          services: exported,
          virtualServices: meshVirtualServices,
        },
      ],
    };
  }
  const configs: Pick<IstioEgressListener, "hosts" | "port" | "bind">[] =
    sidecar.spec.egress.length > 0 ? sidecar.spec.egress : [{ hosts: ["*/*"], port: undefined, bind: "" }];
  const egressListeners = configs.map((config) =>
    egressListener(config, namespace, exported, meshVirtualServices),
  );

  // The union for CDS: explicit imports first, then VirtualService destinations (which never replace them).
  const servicesByHost = new Map<string, Service>();
  const add = (service: Service | undefined) => {
    if (!service) return;
    const found = servicesByHost.get(service.hostname);
    if (!found) {
      servicesByHost.set(service.hostname, service);
    } else if (found.namespace === service.namespace) {
      // Listeners on different ports each import a trimmed copy: merge their ports.
      const ports = [...found.ports];
      for (const port of service.ports)
        if (!ports.some((existing) => existing.number === port.number)) ports.push(port);
      if (ports.length !== found.ports.length) servicesByHost.set(service.hostname, { ...found, ports });
    }
  };
  for (const listener of egressListeners) {
    for (const service of listener.services) add(service);
    for (const config of listener.virtualServices) {
      for (const host of destinationHosts(config, push.domainSuffix)) {
        const candidates = exported.filter((service) => service.hostname === host);
        const service =
          candidates.find((candidate) => candidate.namespace === namespace) ??
          [...candidates].sort((a, b) => (a.namespace < b.namespace ? -1 : 1))[0];
        if (service) add(listener.port ? trimToPort(service, listener.port) : service);
      }
    }
  }
  const services = [...servicesByHost.values()].sort((a, b) => (a.hostname < b.hostname ? -1 : 1));
  const policy = sidecar.spec.outboundTrafficPolicy;
  return {
    services,
    servicesByHost: new Map(services.map((service) => [service.hostname, service])),
    outboundTrafficPolicy:
      policy === undefined
        ? MESH_OUTBOUND_TRAFFIC_POLICY
        : policy.mode === OutboundTrafficPolicy_Mode.ALLOW_ANY
          ? "ALLOW_ANY"
          : "REGISTRY_ONLY",
    sidecar,
    egressListeners,
  };
}

function egressListener(
  config: Pick<IstioEgressListener, "hosts" | "port" | "bind">,
  namespace: string,
  exported: readonly Service[],
  meshVirtualServices: readonly TypedConfig<VirtualService>[],
): SidecarEgressListener {
  const hosts = new Map<string, string[]>();
  for (const entry of config.hosts) {
    const slash = entry.indexOf("/");
    // Istio logs and skips a host without a namespace part.
    if (slash < 0) continue;
    const entryNamespace = entry.slice(0, slash) === "." ? namespace : entry.slice(0, slash);
    hosts.set(entryNamespace, [...(hosts.get(entryNamespace) ?? []), entry.slice(slash + 1)]);
  }
  const port =
    config.port && config.port.number !== 0 && config.port.protocol.toUpperCase() !== "HTTP_PROXY"
      ? config.port
      : undefined;
  // Istio's selectServices: an explicit entry for the service's namespace shadows the "*" entries.
  const imported: Service[] = [];
  for (const service of exported) {
    const patterns = hosts.get(service.namespace) ?? hosts.get(WILDCARD_NAMESPACE);
    if (!patterns?.some((pattern) => hostSubsetOf(service.hostname, pattern))) continue;
    const trimmed = port ? trimToPort(service, port) : service;
    if (trimmed) imported.push(trimmed);
  }
  // One namespace per hostname: the proxy's own if it is among them, else the first imported.
  const chosen = new Map<string, string>();
  for (const service of imported)
    if (!chosen.has(service.hostname) || service.namespace === namespace)
      chosen.set(service.hostname, service.namespace);
  const services = imported.filter((service) => chosen.get(service.hostname) === service.namespace);
  // Istio's SelectVirtualServices: by the entries of the VirtualService's namespace and the "*" entries.
  const virtualServices = meshVirtualServices.filter((vs) =>
    [hosts.get(vs.ref.namespace), hosts.get(WILDCARD_NAMESPACE)].some((patterns) =>
      patterns?.some((pattern) => vs.hosts.some((vsHost) => hostsOverlap(vsHost, pattern))),
    ),
  );
  return { port: config.port, bind: config.bind, hosts, services, virtualServices };
}

/** A copy of service with only the given port, or undefined if it has no such port. */
function trimToPort(service: Service, port: SidecarPort): Service | undefined {
  const match = service.ports.find((candidate) => candidate.number === port.number);
  return match ? { ...service, ports: [match] } : undefined;
}

/** The hosts a VirtualService routes to (http, mirrors, tcp, tls), resolved relative to its namespace. */
function destinationHosts(config: TypedConfig<VirtualService>, domainSuffix: string): string[] {
  const hosts: string[] = [];
  for (const route of config.spec.http) {
    for (const destination of route.route)
      if (destination.destination) hosts.push(destination.destination.host);
    if (route.mirror) hosts.push(route.mirror.host);
    for (const mirror of route.mirrors) if (mirror.destination) hosts.push(mirror.destination.host);
  }
  for (const route of [...config.spec.tcp, ...config.spec.tls])
    for (const destination of route.route)
      if (destination.destination) hosts.push(destination.destination.host);
  return hosts.filter(Boolean).map((host) => resolveHost(host, config.ref.namespace, domainSuffix));
}

/** Istio's host.Name.SubsetOf: host is covered by pattern ("*" all, "*.x" by suffix, else equal). */
function hostSubsetOf(host: string, pattern: string): boolean {
  if (pattern === "*") return true;
  if (pattern.startsWith("*")) {
    const suffix = pattern.slice(1);
    return host.startsWith("*") ? host.slice(1).endsWith(suffix) : host.endsWith(suffix);
  }
  return !host.startsWith("*") && host === pattern;
}

/** Istio's host.Name.Matches: either side may be a wildcard covering the other. */
function hostsOverlap(a: string, b: string): boolean {
  const aWild = a.startsWith("*");
  const bWild = b.startsWith("*");
  if (aWild && bWild)
    return a.length > b.length ? a.slice(1).endsWith(b.slice(1)) : b.slice(1).endsWith(a.slice(1));
  if (aWild) return b.endsWith(a.slice(1));
  if (bWild) return a.endsWith(b.slice(1));
  return a === b;
}
