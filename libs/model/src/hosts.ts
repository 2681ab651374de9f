/** The default DNS suffix of Kubernetes services, as in Istio. */
export const DEFAULT_DOMAIN_SUFFIX = "cluster.local";

/**
 * Resolves a host as written in Istio config to the registry's FQDN, as
 * Istio does: a name without a dot ("reviews") is a service in the namespace
 * of the resource (or proxy) it appears in; anything with a dot is taken as
 * written. Wildcards are returned unchanged.
 */
export function resolveHost(host: string, namespace: string, domainSuffix = DEFAULT_DOMAIN_SUFFIX): string {
  if (host === "*" || host.startsWith("*.") || host.includes(".")) return host;
  return `${host}.${namespace}.svc.${domainSuffix}`;
}

/**
 * True if a (possibly wildcard) host pattern covers a concrete host:
 * "*" covers everything, "*.example.com" covers "a.example.com" and
 * "b.a.example.com" but not "example.com".
 */
export function hostMatches(pattern: string, host: string): boolean {
  if (pattern === "*") return true;
  if (pattern.startsWith("*.")) return host.endsWith(pattern.slice(1));
  return pattern === host;
}
