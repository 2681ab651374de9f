import { isIP } from "node:net";
import { headlessDnsNames } from "@sextant/model";
import { HealthStatus, packAny, Resolution, type Service } from "@sextant/proto";
import { NameTable, type NameTable_NameInfo } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import { cacheKey } from "../../cache/xds-cache.js";
import { usesAutoAllocatedAddresses } from "../../model/auto-allocation.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { applicableSidecar, sidecarScope } from "../../model/sidecar-scope.js";
import type { GeneratedResource } from "../../model/types.js";
import type { GenerationContext } from "../generator.js";
import { withAutoAllocatedAddresses } from "./auto-addresses.js";
import { addressesOfProxyFamilies, ipMode } from "./dual-stack.js";

/** Istio's NDS type (its pkg/model NameTableType). */
export const NAME_TABLE_TYPE_URL = "type.googleapis.com/istio.networking.nds.v1.NameTable";

/** Istio's provider IDs, the `registry` of a name: its Kubernetes and ServiceEntry registries. */
const REGISTRY_NAMES: Readonly<Record<string, string>> = {
  kubernetes: "Kubernetes",
  serviceentry: "External",
};

/** Kubernetes multi-cluster services' domain: their hosts get no short name (it is the cluster.local service's). */
const CLUSTERSET_SUFFIX = ".clusterset.local";

/**
 * NDS for a sidecar (istiod's NdsGenerator and BuildNameTable): one
 * unnamed NameTable, whatever names are watched (Istio's internal types are
 * all wildcards), of the names the agent's DNS proxy answers for. Istio
 * builds it for any sidecar that asks, whether or not its metadata turns on
 * DNS_CAPTURE (the agent asks only when it does); capture matters only for
 * auto-allocated addresses, which need DNS_CAPTURE and DNS_AUTO_ALLOCATE.
 *
 * For each service of the proxy's SidecarScope:
 * - a Kubernetes service with cluster IPs: those of the proxy's families,
 *   with its name and namespace as short name (the agent expands search
 *   domains), except a `.clusterset.local` host;
 * - a ServiceEntry host with addresses: each that is an IP (CIDRs are not
 *   names' answers);
 * - a ServiceEntry host without one (not a wildcard, resolution not NONE):
 *   its auto-allocated address(es) of the proxy's families, when the proxy
 *   uses them, else no entry;
 * - a headless service (resolution NONE, no address: a Kubernetes service
 *   with clusterIP None, or a ServiceEntry with resolution NONE): the IP
 *   addresses of its ready endpoints of its first port (also not-ready ones
 *   with publishNotReadyAddresses) on the proxy's network, and for each pod
 *   with a subdomain the name `<hostname>.<subdomain>.<namespace>.svc.<domain>`
 *   with its own address(es), as Kubernetes DNS; none if it has no such
 *   endpoint;
 * - anything else (an ExternalName service, a DNS ServiceEntry without
 *   allocation, a wildcard host without an address): nothing. A wildcard
 *   host with an address is in the table as written (`*.example.com`): the
 *   agent answers the names it covers, as Istio's.
 *
 * A name claimed by a Kubernetes service stays its; a ServiceEntry's
 * addresses for a name already in the table are added to it, and a
 * Kubernetes service takes over a name a ServiceEntry had.
 *
 * Pushed on every full push and endpoint change (Istio: full pushes but
 * those only of config kinds that cannot change names, and headless
 * endpoint updates); the cache key holds the endpoint versions of the
 * headless services only, and versions are content hashes, so a proxy is
 * sent its table only when it changed.
 */
export function generateSidecarNameTable(context: GenerationContext): GeneratedResource[] {
  const { push, proxy, cache } = context;
  const scope = sidecarScope(push, proxy);
  const sidecar = applicableSidecar(push, proxy);
  const headlessVersions = scope.services
    .filter(isHeadless)
    .map((service) => `${service.hostname}=${push.endpointVersions.get(service.hostname) ?? "none"}`);
  const key = cacheKey(
    "nds-sidecar",
    push.configVersion,
    proxy.namespace,
    sidecar ? `${sidecar.ref.namespace}/${sidecar.ref.name}` : "-",
    ipMode(proxy),
    proxy.network,
    usesAutoAllocatedAddresses(proxy) ? "auto" : "-",
    headlessVersions.join(","),
  );
  const resource = cache.get(key, () => ({
    name: "",
    resource: packAny(NAME_TABLE_TYPE_URL, NameTable, buildNameTable(push, proxy, scope.services)),
    sources: [],
  }));
  return resource ? [resource] : [];
}

function buildNameTable(push: PushContext, proxy: MeshProxy, services: readonly Service[]): NameTable {
  const table = new Map<string, NameTable_NameInfo>();
  for (const service of services) {
    const registry = REGISTRY_NAMES[service.registry] ?? service.registry;
    let ips = serviceAddresses(push, proxy, service);
    if (ips.length === 0 && isHeadless(service)) {
      const names = headlessNames(push, proxy, service);
      ips = names.get(service.hostname) ?? [];
      names.delete(service.hostname);
      // Per-pod names: short name <hostname>.<subdomain>, in the service's namespace.
      const domain = service.hostname.slice(service.hostname.indexOf("."));
      for (const [name, podIps] of names)
        table.set(name, {
          ips: podIps,
          registry,
          shortname: name.slice(0, name.length - domain.length),
          namespace: service.namespace,
          altHosts: [],
        });
    }
    if (ips.length === 0) continue;
    const kubernetes = service.registry === "kubernetes";
    const names =
      kubernetes && !service.hostname.endsWith(CLUSTERSET_SUFFIX)
        ? { shortname: service.name, namespace: service.namespace }
        : { shortname: "", namespace: "" };
    const found = table.get(service.hostname);
    if (!found) table.set(service.hostname, { ips, registry, ...names, altHosts: [] });
    else if (found.registry !== REGISTRY_NAMES.kubernetes)
      table.set(
        service.hostname,
        kubernetes
          ? { ...found, ips, registry, ...(names.shortname ? names : {}) }
          : { ...found, ips: [...found.ips, ...ips] },
      );
  }
  // Sorted, so that equal tables encode to equal bytes (versions are hashes of them).
  return NameTable.fromPartial({
    table: Object.fromEntries([...table].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
  });
}

/** Istio's headless case: resolution NONE (Kubernetes clusterIP None, or ServiceEntry NONE) without an address. */
function isHeadless(service: Service): boolean {
  return (
    service.resolution === Resolution.RESOLUTION_PASSTHROUGH &&
    service.ports.length > 0 &&
    !service.addresses.some(isUsableAddress)
  );
}

function isUsableAddress(address: string): boolean {
  return address !== "" && address !== "0.0.0.0" && address !== "::";
}

/**
 * A service's own addresses for the proxy (Istio's GetAllAddressesForProxy):
 * a Kubernetes service's cluster IPs of the proxy's families; every IP a
 * ServiceEntry lists (Istio makes a service per address and merges their
 * names' addresses), or its auto-allocated ones of the proxy's families
 * for a proxy that uses them.
 */
function serviceAddresses(push: PushContext, proxy: MeshProxy, service: Service): string[] {
  const { addresses } = withAutoAllocatedAddresses(push, proxy, service);
  const own = addresses.filter((address) => isUsableAddress(address) && isIP(address) !== 0);
  return service.registry === "kubernetes" ? addressesOfProxyFamilies(proxy, own) : own;
}

/**
 * A headless service's names (@sextant/model's headlessDnsNames: its
 * hostname, and `<hostname>.<subdomain>.<namespace>.svc.<domain>` per pod
 * with a subdomain, as Kubernetes DNS) with their IP addresses, ready ones
 * unless the service publishes not-ready addresses. As Istio's
 * ServiceEndpointsByPort for the first port: only endpoints of that port;
 * and only those on the proxy's network (either side unset counts as the
 * same, as Istio's InNetwork), since passthrough traffic cannot cross
 * networks. Sextant's registry is one cluster, so Istio's cluster-local
 * filter keeps them all.
 */
function headlessNames(push: PushContext, proxy: MeshProxy, service: Service): Map<string, string[]> {
  const firstPort = service.ports[0];
  const endpoints = (push.endpointsByHost.get(service.hostname) ?? []).filter(
    (endpoint) =>
      firstPort !== undefined &&
      endpoint.ports[firstPort.name] !== undefined &&
      (endpoint.network === "" || proxy.network === "" || endpoint.network === proxy.network),
  );
  return headlessDnsNames(
    {
      hostname: service.hostname,
      headless: true,
      hasPorts: firstPort !== undefined,
      publishNotReadyAddresses: service.publishNotReadyAddresses === true,
    },
    endpoints.map((endpoint) => ({
      address: endpoint.address,
      healthy:
        endpoint.health === HealthStatus.HEALTH_STATUS_HEALTHY ||
        endpoint.health === HealthStatus.HEALTH_STATUS_UNSPECIFIED,
      ...(endpoint.hostname ? { hostname: endpoint.hostname } : {}),
      ...(endpoint.subdomain ? { subdomain: endpoint.subdomain } : {}),
    })),
  );
}
