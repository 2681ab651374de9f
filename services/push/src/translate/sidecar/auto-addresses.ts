import type { Service } from "@sextant/proto";
import { needsAutoAllocation, usesAutoAllocatedAddresses } from "../../model/auto-allocation.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { addressesOfProxyFamilies } from "./dual-stack.js";

/**
 * The service as a sidecar that uses auto-allocated addresses sees it
 * (Istio's GetAddressForProxy and GetAllAddressesForProxy): a ServiceEntry
 * host without an address has its allocated addresses of the proxy's
 * families, IPv4 first. Any other service, or any service for a proxy
 * without DNS_CAPTURE and DNS_AUTO_ALLOCATE, is returned as it is.
 */
export function withAutoAllocatedAddresses(push: PushContext, proxy: MeshProxy, service: Service): Service {
  if (!needsAutoAllocation(service) || !usesAutoAllocatedAddresses(proxy)) return service;
  const allocated = push.autoAllocatedAddresses(service);
  if (!allocated) return service;
  const addresses = addressesOfProxyFamilies(proxy, [allocated.ipv4, allocated.ipv6]);
  return addresses.length > 0 ? { ...service, addresses } : service;
}
