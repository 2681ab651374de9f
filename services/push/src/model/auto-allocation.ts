import { Resolution, type Service } from "@sextant/proto";
import type { MeshProxy } from "./proxy.js";

/**
 * Addresses for ServiceEntry hosts that have none (Istio's legacy
 * autoAllocateIPs, used by proxies with ISTIO_META_DNS_AUTO_ALLOCATE): the
 * agent's DNS proxy answers the host with its address, and the sidecar can
 * tell such hosts apart by destination address (a TCP ServiceEntry gets a
 * listener of its own instead of sharing 0.0.0.0).
 *
 * Istio's range: 240.240.0.0/16 (class E, never routed), without the .0 and
 * .255 of each /24, so 256 × 254 addresses; IPv6 2001:2::f0f0:<n> (RFC 5180's
 * benchmarking range). Istio hashes "<namespace>/<hostname>" with FNV-1a
 * (32 bits) to a slot and resolves collisions by double hashing in the order
 * its registry lists the services, then numbers the occupied slots in order,
 * so an address depends on the registry's order and on every other host
 * (istiod's own comment says replicas may differ). Sextant keeps the hash and
 * the range but makes the address a pure function of the set of hosts:
 *
 * - a slot's address is fixed (slot s is 240.240.⌊s/254⌋.(s mod 254 + 1));
 * - every host first claims its home slot (hash mod 256·254), the smallest
 *   key winning a contested one; the hosts left probe the following slots
 *   (linear probing, wrapping), in key order.
 *
 * So two push replicas, or a restart, give every host the same address
 * whatever order their inputs came in, and adding a host moves no other
 * unless it takes that host's slot (the same home slot, or a slot a probed
 * host had reached). The IPv6 address is built from the same slot as
 * 2001:2::f0f0:<(third octet << 8 | fourth) in hex>; Istio concatenates
 * the two octets' hex digits unpadded, which gives two slots one address.
 */

const ADDRESSES_PER_BLOCK = 254;
const SLOTS = 256 * ADDRESSES_PER_BLOCK;

/** The addresses allocated to one host. */
export interface AutoAllocatedAddresses {
  readonly ipv4: string;
  readonly ipv6: string;
}

/** The key Istio allocates by (its Service.Key): "<namespace>/<hostname>". */
export function allocationKey(service: Pick<Service, "namespace" | "hostname">): string {
  return `${service.namespace}/${service.hostname}`;
}

/**
 * Whether Istio allocates an address to a service: a ServiceEntry host
 * without any address, not a wildcard, whose resolution is not NONE
 * (PASSTHROUGH: the proxy would not know which address the application
 * asked for).
 */
export function needsAutoAllocation(service: Service): boolean {
  return (
    service.registry === "serviceentry" &&
    service.addresses.every((address) => address === "" || address === "0.0.0.0") &&
    !service.hostname.startsWith("*") &&
    service.resolution !== Resolution.RESOLUTION_PASSTHROUGH &&
    service.resolution !== Resolution.RESOLUTION_ALIAS
  );
}

/**
 * The allocation for every service that needs one, by {@link allocationKey}.
 * Input order does not matter. Past 256 × 254 hosts the rest get none
 * (Istio logs that it is out of addresses).
 */
export function allocateAddresses(services: Iterable<Service>): ReadonlyMap<string, AutoAllocatedAddresses> {
  const keys = [
    ...new Set([...services].filter(needsAutoAllocation).map((service) => allocationKey(service))),
  ].sort();
  const taken = new Set<number>();
  const slotOf = new Map<string, number>();
  const probing: string[] = [];
  for (const key of keys) {
    const home = fnv1a32(key) % SLOTS;
    if (taken.has(home)) {
      probing.push(key);
    } else {
      taken.add(home);
      slotOf.set(key, home);
    }
  }
  for (const key of probing) {
    if (taken.size >= SLOTS) break;
    let slot = fnv1a32(key) % SLOTS;
    while (taken.has(slot)) slot = (slot + 1) % SLOTS;
    taken.add(slot);
    slotOf.set(key, slot);
  }
  const allocated = new Map<string, AutoAllocatedAddresses>();
  for (const key of keys) {
    const slot = slotOf.get(key);
    if (slot !== undefined) allocated.set(key, addressesOfSlot(slot));
  }
  return allocated;
}

function addressesOfSlot(slot: number): AutoAllocatedAddresses {
  const third = Math.floor(slot / ADDRESSES_PER_BLOCK);
  const fourth = (slot % ADDRESSES_PER_BLOCK) + 1;
  return {
    ipv4: `240.240.${third}.${fourth}`,
    ipv6: `2001:2::f0f0:${((third << 8) | fourth).toString(16)}`,
  };
}

/** FNV-1a, 32 bits, over the UTF-8 bytes of text (Go's hash/fnv New32a). */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}

/**
 * Istio's nodeUsesAutoallocatedIPs for a sidecar: its metadata turns on both
 * DNS_CAPTURE and DNS_AUTO_ALLOCATE (ISTIO_META_DNS_CAPTURE and
 * ISTIO_META_DNS_AUTO_ALLOCATE in the agent's environment). Auto-allocated
 * addresses mean nothing to a proxy whose DNS queries the agent does not
 * answer.
 */
export function usesAutoAllocatedAddresses(proxy: MeshProxy): boolean {
  return metadataFlag(proxy, "DNS_CAPTURE") && metadataFlag(proxy, "DNS_AUTO_ALLOCATE");
}

/** Istio's StringBool: a metadata value Go's strconv.ParseBool reads as true (or a JSON true). */
export function metadataFlag(proxy: MeshProxy, key: string): boolean {
  const value = proxy.metadata[key];
  return (
    value === true || (typeof value === "string" && ["1", "t", "T", "TRUE", "true", "True"].includes(value))
  );
}
