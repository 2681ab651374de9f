import { isIP } from "node:net";

/** What the DNS table reads of a registry Service (structurally, so this package needs no protobuf types). */
export interface DnsService {
  readonly hostname: string;
  /** True for a headless service (PASSTHROUGH resolution). */
  readonly headless: boolean;
  readonly hasPorts: boolean;
  readonly publishNotReadyAddresses?: boolean;
}

/** What the DNS table reads of an endpoint. */
export interface DnsEndpoint {
  readonly address: string;
  readonly healthy: boolean;
  readonly hostname?: string;
  readonly subdomain?: string;
}

/**
 * The names a headless service answers in DNS, with their addresses, as
 * Istio's DNS name table (pkg/dns/server/name_table.go, BuildNameTable)
 * makes them: the service's own hostname resolves to every endpoint IP, and
 * each endpoint whose pod names a subdomain also gets
 * `<hostname>.<subdomain>.<namespace>.svc.<suffix>` (the service hostname
 * with its first label replaced), like Kubernetes' per-pod records of a
 * StatefulSet. Only IP endpoints count, each address once, and only healthy
 * ones unless the service publishes not-ready addresses. A service that is
 * not headless, or has no ports, gives no names here (its VIP answers).
 */
export function headlessDnsNames(
  service: DnsService,
  endpoints: readonly DnsEndpoint[],
): Map<string, string[]> {
  const names = new Map<string, string[]>();
  if (!service.headless || !service.hasPorts) return names;
  const dot = service.hostname.indexOf(".");
  const domain = dot < 0 ? "" : service.hostname.slice(dot + 1);
  const add = (name: string, address: string) => {
    const addresses = names.get(name);
    if (addresses) addresses.push(address);
    else names.set(name, [address]);
  };
  const seen = new Set<string>();
  for (const endpoint of endpoints) {
    if (isIP(endpoint.address) === 0) continue;
    if (!endpoint.healthy && !service.publishNotReadyAddresses) continue;
    if (seen.has(endpoint.address)) continue;
    seen.add(endpoint.address);
    add(service.hostname, endpoint.address);
    if (endpoint.subdomain && endpoint.hostname && domain)
      add(`${endpoint.hostname}.${endpoint.subdomain}.${domain}`, endpoint.address);
  }
  return names;
}
