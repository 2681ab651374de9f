import { isIP } from "node:net";
import type { MeshProxy } from "../../model/proxy.js";

/** The IP families a proxy has addresses in (Istio's IPMode, from the node's INSTANCE_IPS). */
export type IpMode = "ipv4" | "ipv6" | "dual";

/**
 * Istio's DiscoverIPMode: IPv4 if every instance IP is IPv4, IPv6 if every
 * one is IPv6, else dual (a hostname or other non-IP counts as neither).
 */
export function ipMode(proxy: MeshProxy): IpMode {
  const families = proxy.instanceIps.map((ip) => isIP(ip));
  if (families.every((family) => family === 4)) return "ipv4";
  if (families.every((family) => family === 6)) return "ipv6";
  return "dual";
}

/** The unspecified addresses of each family. */
export const WILDCARD_IPV4 = "0.0.0.0";
export const WILDCARD_IPV6 = "::";

/**
 * The wildcard addresses a proxy's listeners bind, primary first (Istio's
 * wildCards by IPMode): `0.0.0.0`, `::`, or both for a dual-stack proxy. A
 * listener binds the first as its address and the rest as
 * additional_addresses.
 */
export function wildcardAddresses(proxy: MeshProxy): string[] {
  switch (ipMode(proxy)) {
    case "ipv4":
      return [WILDCARD_IPV4];
    case "ipv6":
      return [WILDCARD_IPV6];
    case "dual":
      return [WILDCARD_IPV4, WILDCARD_IPV6];
  }
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
