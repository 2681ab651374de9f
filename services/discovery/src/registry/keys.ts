import { encodeKey } from "@sextant/bus";

/**
 * The `sextant-services` key of a service: namespace.hostname, so that one
 * namespace's services are one key prefix (a watch or a list by namespace).
 */
export function serviceKey(namespace: string, hostname: string): string {
  return encodeKey(namespace, hostname);
}

/** The `sextant-endpoints` key of one source's endpoints of a service: namespace.hostname.shard. */
export function endpointsKey(namespace: string, hostname: string, shard: string): string {
  return encodeKey(namespace, hostname, shard);
}

/** The shard name of the Kubernetes endpoints of one cluster, as istiod names it: provider/cluster. */
export function kubernetesShard(clusterId: string): string {
  return `kubernetes/${clusterId}`;
}

/** The shard name of the endpoints one ServiceEntry contributes. */
export function serviceEntryShard(namespace: string, name: string): string {
  return `serviceentry/${namespace}/${name}`;
}
