import { isIP } from "node:net";
import { Cluster_DnsLookupFamily } from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";
import type { MeshProxy } from "../../model/proxy.js";

/**
 * The one place a sidecar's addresses follow the IP families of its pod.
 *
 * Istio gates most of its dual-stack behaviour on ISTIO_DUAL_STACK, off by
 * default: without it a dual-stack proxy's virtualOutbound and
 * virtualInbound listen on 0.0.0.0 only, its inbound clusters send from
 * 127.0.0.6 only and its DNS clusters resolve IPv4 only, so IPv6
 * connections iptables redirects to 15001/15006 find no listener and an
 * IPv6-only destination is unreachable (only its wildcard outbound
 * listeners, InboundPassthroughCluster and the VIPs of dual-stack services
 * get both families without the flag). Sextant has no such
 * switch: a proxy whose INSTANCE_IPS hold both families gets what Istio
 * gives it with ISTIO_DUAL_STACK on (the pod has IPv6 addresses because the
 * cluster is dual-stack, so its traffic will use them; Sextant issue 18).
 * IPv4-only proxies get exactly Istio's default; IPv6-only ones use the IPv6
 * wildcard, localhost and passthrough source wherever Istio uses them (Istio
 * does that without the flag too).
 */

/** The IP families a proxy has addresses in (Istio's IPMode, from the node's INSTANCE_IPS). */
type IpMode = "ipv4" | "ipv6" | "dual";

/**
 * Istio's DiscoverIPMode: IPv4 if no instance IP is IPv6, IPv6 if none is
 * IPv4, else dual. What is not an IP address is skipped, as Istio skips it,
 * so a proxy without any address counts as IPv4.
 */
export function ipMode(proxy: MeshProxy): IpMode {
  const families = new Set(proxy.instanceIps.map((ip) => isIP(ip)).filter((family) => family !== 0));
  if (!families.has(6)) return "ipv4";
  if (!families.has(4)) return "ipv6";
  return "dual";
}

/** The unspecified addresses of each family. */
export const WILDCARD_IPV4 = "0.0.0.0";
export const WILDCARD_IPV6 = "::";

/** Whether an address is the unspecified address of its family (a listener on it takes every address). */
export function isWildcardAddress(address: string): boolean {
  return address === WILDCARD_IPV4 || address === WILDCARD_IPV6;
}

/** The loopback addresses of each family. */
export const LOCALHOST_IPV4 = "127.0.0.1";
export const LOCALHOST_IPV6 = "::1";

/**
 * The source addresses inbound traffic is sent from, which the pod's
 * iptables rules let through uncaptured (Istio's InboundPassthroughBindIpv4/6).
 */
const INBOUND_PASSTHROUGH_BIND_IPV4 = "127.0.0.6";
const INBOUND_PASSTHROUGH_BIND_IPV6 = "::6";

/** One address per family the proxy has, IPv4 first (the order of Istio's maps by IPMode). */
function byMode(proxy: MeshProxy, ipv4: string, ipv6: string): [string, ...string[]] {
  switch (ipMode(proxy)) {
    case "ipv4":
      return [ipv4];
    case "ipv6":
      return [ipv6];
    case "dual":
      return [ipv4, ipv6];
  }
}

/**
 * The wildcard addresses a proxy's listeners bind, primary first (Istio's
 * wildCards by IPMode): `0.0.0.0`, `::`, or both for a dual-stack proxy. A
 * listener binds the first as its address and the rest as
 * additional_addresses (see {@link additionalAddresses}). The first is also
 * Istio's "actual wildcard" (`0.0.0.0` whenever the proxy has IPv4).
 */
export function wildcardAddresses(proxy: MeshProxy): [string, ...string[]] {
  return byMode(proxy, WILDCARD_IPV4, WILDCARD_IPV6);
}

/** The proxy's loopback addresses, IPv4 first (Istio's localHosts by IPMode). */
export function localhostAddresses(proxy: MeshProxy): [string, ...string[]] {
  return byMode(proxy, LOCALHOST_IPV4, LOCALHOST_IPV6);
}

/**
 * The source addresses of the proxy's inbound clusters, primary first
 * (Istio's passthroughBindIPs by IPMode): `127.0.0.6`, `::6`, or both for a
 * dual-stack proxy, where Envoy picks the one of the destination's family.
 */
export function passthroughBindAddresses(proxy: MeshProxy): [string, ...string[]] {
  return byMode(proxy, INBOUND_PASSTHROUGH_BIND_IPV4, INBOUND_PASSTHROUGH_BIND_IPV6);
}

/**
 * The dns_lookup_family of the proxy's DNS clusters (Istio's
 * SelectDNSLookupFamily): IPv4-only and IPv6-only proxies resolve their own
 * family; a dual-stack one resolves both (ALL, Envoy's happy eyeballs over
 * the answers, as Istio with ISTIO_DUAL_STACK).
 */
export function dnsLookupFamily(proxy: MeshProxy): Cluster_DnsLookupFamily {
  switch (ipMode(proxy)) {
    case "ipv4":
      return Cluster_DnsLookupFamily.V4_ONLY;
    case "ipv6":
      return Cluster_DnsLookupFamily.V6_ONLY;
    case "dual":
      return Cluster_DnsLookupFamily.ALL;
  }
}

/**
 * The addresses of the families the proxy has, in their order (Istio's
 * FilterAddressesByIPFamily): all of them for a dual-stack proxy. What is
 * not an IP address is dropped.
 */
export function addressesOfProxyFamilies(proxy: MeshProxy, addresses: readonly string[]): string[] {
  const mode = ipMode(proxy);
  return addresses.filter((address) => {
    const family = isIP(address);
    return (family === 4 && mode !== "ipv6") || (family === 6 && mode !== "ipv4");
  });
}

/** A Listener's additional_addresses for binds beyond the primary, on port (Istio's BuildAdditionalAddresses). */
export function additionalAddresses(
  extraBinds: readonly string[],
  port: number,
): Array<{ address: { socketAddress: { address: string; portValue: number } } }> {
  return extraBinds
    .filter(Boolean)
    .map((address) => ({ address: { socketAddress: { address, portValue: port } } }));
}
