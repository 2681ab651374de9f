// istioctl proxy-config's summary tables, computed from push's config dump
// (resources in protobuf JSON form, camelCase, Anys expanded with "@type").
import { X509Certificate } from "node:crypto";
import { plainTable } from "./plain-table.js";

// biome-ignore lint/suspicious/noExplicitAny: config dump JSON is walked loosely, field by field.
type Json = any;

/** The filters istioctl proxy-config takes; each table applies those that mean something to it. */
export interface ConfigFilters {
  port?: number;
  name?: string;
  fqdn?: string;
  subset?: string;
  direction?: string;
}

/** `name.namespace` of the Istio config an `istio.config` metadata path names, as istioctl prints it. */
function configName(resource: Json): string {
  const path: string | undefined = resource?.metadata?.filterMetadata?.istio?.config;
  const match = path?.match(/namespaces\/([^/]+)\/[^/]+\/([^/]+)$/);
  return match ? `${match[2]}.${match[1]}` : "";
}

/** direction|port|subset|fqdn, Istio's cluster names; other names are their own FQDN. */
function clusterKey(name: string): { fqdn: string; port: string; subset: string; direction: string } {
  const parts = name.split("|");
  if (parts.length === 4) {
    const [direction = "", port = "", subset = "", fqdn = ""] = parts;
    return { fqdn, port, subset: subset || "-", direction };
  }
  return { fqdn: name, port: "-", subset: "-", direction: "-" };
}

export function clustersTable(clusters: readonly Json[], filters: ConfigFilters): string {
  const rows = clusters
    .map((cluster) => ({ cluster, key: clusterKey(cluster.name ?? "") }))
    .filter(
      ({ key }) =>
        (filters.fqdn === undefined || key.fqdn.includes(filters.fqdn)) &&
        (filters.port === undefined || key.port === String(filters.port)) &&
        (filters.subset === undefined || key.subset === filters.subset) &&
        (filters.direction === undefined || key.direction === filters.direction),
    )
    .sort(
      (a, b) => a.key.fqdn.localeCompare(b.key.fqdn) || String(a.cluster.name).localeCompare(b.cluster.name),
    )
    .map(({ cluster, key }) => [
      key.fqdn,
      key.port,
      key.subset,
      key.direction,
      cluster.type ?? (cluster.clusterType ? cluster.clusterType.name : "EDS"),
      configName(cluster) || "-",
    ]);
  return plainTable(["SERVICE FQDN", "PORT", "SUBSET", "DIRECTION", "TYPE", "DESTINATION RULE"], rows);
}

/** The network filter's destination: a route config (RDS or inline), a TCP cluster, or the filter's name. */
function destination(chain: Json): string {
  for (const filter of chain?.filters ?? []) {
    const config = filter.typedConfig ?? {};
    if (config.rds?.routeConfigName) return `Route: ${config.rds.routeConfigName}`;
    if (config.routeConfig) return `Inline Route: ${config.routeConfig.name ?? ""}`.trimEnd();
    if (config.cluster) return `Cluster: ${config.cluster}`;
    if (config.weightedClusters) return "Cluster: (weighted)";
  }
  return "-";
}

/** A filter chain's match, as istioctl summarises it. */
function chainMatch(match: Json): string {
  if (!match) return "ALL";
  const parts: string[] = [];
  if (match.serverNames?.length) parts.push(`SNI: ${match.serverNames.join(",")}`);
  if (match.transportProtocol) parts.push(`Trans: ${match.transportProtocol}`);
  if (match.applicationProtocols?.length) parts.push(`App: ${match.applicationProtocols.join(",")}`);
  if (match.prefixRanges?.length)
    parts.push(
      `Addr: ${match.prefixRanges.map((r: Json) => `${r.addressPrefix}/${r.prefixLen ?? 32}`).join(",")}`,
    );
  if (match.destinationPort) parts.push(`DPort: ${match.destinationPort}`);
  return parts.join("; ") || "ALL";
}

export function listenersTable(listeners: readonly Json[], filters: ConfigFilters): string {
  const rows: string[][] = [];
  for (const listener of [...listeners].sort((a, b) => String(a.name).localeCompare(b.name))) {
    const socket = listener.address?.socketAddress;
    if (listener.apiListener || !socket) {
      // A proxyless gRPC listener is an API listener named host:port: no socket, one route.
      const port =
        String(listener.name ?? "")
          .split(":")
          .at(-1) ?? "";
      if (filters.port !== undefined && port !== String(filters.port)) continue;
      const hcm = listener.apiListener?.apiListener ?? {};
      rows.push([
        String(listener.name ?? "").replace(/:\d+$/, ""),
        port,
        "ALL",
        hcm.rds?.routeConfigName ? `Route: ${hcm.rds.routeConfigName}` : destination({ filters: [] }),
      ]);
      continue;
    }
    const port = String(socket.portValue ?? 0);
    const addresses = [
      socket.address,
      ...(listener.additionalAddresses ?? []).map((a: Json) => a.address?.socketAddress?.address),
    ]
      .filter(Boolean)
      .join(",");
    for (const chain of listener.filterChains ?? []) {
      const chainPort = chain.filterChainMatch?.destinationPort;
      if (
        filters.port !== undefined &&
        String(chainPort ?? port) !== String(filters.port) &&
        port !== String(filters.port)
      )
        continue;
      rows.push([addresses, port, chainMatch(chain.filterChainMatch), destination(chain)]);
    }
    if (listener.defaultFilterChain && (filters.port === undefined || port === String(filters.port)))
      rows.push([addresses, port, "ALL (default)", destination(listener.defaultFilterChain)]);
  }
  return plainTable(["ADDRESSES", "PORT", "MATCH", "DESTINATION"], rows);
}

/** A header matcher in short: name=value, name~regex, name=* for presence. */
function headerMatch(header: Json): string {
  const string = header.stringMatch ?? {};
  const value =
    string.exact ??
    header.exactMatch ??
    (string.prefix ?? header.prefixMatch)?.concat("*") ??
    string.safeRegex?.regex;
  const operator = string.safeRegex ? "~" : "=";
  return `${header.invertMatch ? "!" : ""}${header.name}${value === undefined ? "=*" : `${operator}${value}`}`;
}

/**
 * A route's match: istioctl's path column (/* for a prefix /, the path or
 * prefix, or the regex), followed by its header matches, if any, so that
 * routes differing only by headers can be told apart.
 */
function routeMatch(match: Json): string {
  const headers: Json[] = match?.headers ?? [];
  const path = routePath(match);
  return headers.length ? `${path} (${headers.map(headerMatch).join(", ")})` : path;
}

function routePath(match: Json): string {
  if (!match) return "/*";
  if (match.path !== undefined) return match.path;
  if (match.prefix !== undefined)
    return match.prefix === "/" || match.prefix === "" ? "/*" : `${match.prefix}*`;
  if (match.safeRegex) return match.safeRegex.regex;
  if (match.pathSeparatedPrefix) return `${match.pathSeparatedPrefix}/*`;
  return "/*";
}

/** True for a domain with a port (IPv6 literals in brackets carry colons of their own). */
function hasPort(domain: string): boolean {
  if (!domain.includes(":")) return false;
  return !(domain.split(":").length > 3 && domain.endsWith("]"));
}

/**
 * A virtual host's domains as istioctl summarises them: one as is; else the
 * domains without a port, less the long forms of a short one also present
 * (x.svc.cluster.local and x.svc beside x), the first two and a count of the rest.
 */
export function describeDomains(domains: readonly string[]): string {
  if (domains.length <= 1) return domains[0] ?? "";
  const portless = domains.filter((domain) => !hasPort(domain));
  const present = new Set(portless);
  const shortest = portless.filter((domain) =>
    [".svc.cluster.local", ".svc"].every(
      (suffix) => !(domain.endsWith(suffix) && present.has(domain.slice(0, -suffix.length))),
    ),
  );
  const shown = shortest.slice(0, 2).join(", ");
  return shortest.length > 2 ? `${shown} + ${shortest.length - 2} more...` : shown;
}

/** A route to PassthroughCluster: istioctl leaves it out of the table. */
const isPassthrough = (route: Json) => route.route?.cluster === "PassthroughCluster";

export function routesTable(routes: readonly Json[], filters: ConfigFilters): string {
  const rows: string[][] = [];
  for (const config of [...routes].sort((a, b) => String(a.name).localeCompare(b.name))) {
    if (filters.name !== undefined && config.name !== filters.name) continue;
    for (const vhost of config.virtualHosts ?? []) {
      const row = (match: string, virtualService: string) =>
        rows.push([
          config.name ?? "",
          vhost.name ?? "",
          describeDomains(vhost.domains ?? []),
          match,
          virtualService,
        ]);
      const vhostRoutes: Json[] = vhost.routes ?? [];
      // A virtual host without routes answers 404.
      if (vhostRoutes.length === 0) row("/*", "404");
      for (const route of vhostRoutes)
        if (!isPassthrough(route)) row(routeMatch(route.match), configName(route));
    }
  }
  return plainTable(["NAME", "VHOST NAME", "DOMAINS", "MATCH", "VIRTUAL SERVICE"], rows);
}

export function endpointsTable(assignments: readonly Json[], filters: ConfigFilters): string {
  const rows: string[][] = [];
  for (const assignment of assignments) {
    const cluster: string = assignment.clusterName ?? "";
    const key = clusterKey(cluster);
    if (filters.fqdn !== undefined && !key.fqdn.includes(filters.fqdn)) continue;
    if (filters.subset !== undefined && key.subset !== filters.subset) continue;
    if (filters.name !== undefined && cluster !== filters.name) continue;
    for (const locality of assignment.endpoints ?? [])
      for (const endpoint of locality.lbEndpoints ?? []) {
        const socket = endpoint.endpoint?.address?.socketAddress;
        if (filters.port !== undefined && socket?.portValue !== filters.port) continue;
        const status = String(endpoint.healthStatus ?? "HEALTHY");
        rows.push([
          socket ? `${socket.address}:${socket.portValue ?? 0}` : "-",
          status === "UNKNOWN" ? "HEALTHY" : status,
          "OK",
          cluster,
        ]);
      }
  }
  rows.sort((a, b) => a[3]!.localeCompare(b[3]!) || a[0]!.localeCompare(b[0]!));
  return plainTable(["ENDPOINT", "STATUS", "OUTLIER CHECK", "CLUSTER"], rows);
}

/** A secret's certificate facts (validity, serial, dates), or dashes when it holds none that parses. */
function certificateFacts(pemBase64: string | undefined): string[] {
  if (!pemBase64) return ["-", "-", "-", "-"];
  try {
    const certificate = new X509Certificate(Buffer.from(pemBase64, "base64"));
    const notAfter = new Date(certificate.validTo);
    const notBefore = new Date(certificate.validFrom);
    const now = Date.now();
    return [
      String(notBefore.getTime() <= now && now <= notAfter.getTime()),
      certificate.serialNumber.toLowerCase(),
      notAfter.toISOString(),
      notBefore.toISOString(),
    ];
  } catch {
    return ["false", "-", "-", "-"];
  }
}

export function secretsTable(secrets: readonly Json[], filters: ConfigFilters): string {
  const rows = secrets
    .filter((secret) => filters.name === undefined || secret.name === filters.name)
    .map((secret) => {
      const type = secret.tlsCertificate ? "Cert Chain" : secret.validationContext ? "CA" : "-";
      const pem =
        secret.tlsCertificate?.certificateChain?.inlineBytes ??
        secret.validationContext?.trustedCa?.inlineBytes;
      return [secret.name ?? "", type, "ACTIVE", ...certificateFacts(pem)];
    })
    .sort((a, b) => a[0]!.localeCompare(b[0]!));
  return plainTable(
    ["RESOURCE NAME", "TYPE", "STATUS", "VALID CERT", "SERIAL NUMBER", "NOT AFTER", "NOT BEFORE"],
    rows,
  );
}
