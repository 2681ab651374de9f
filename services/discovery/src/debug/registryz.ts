import { EndpointShard, Service } from "@sextant/proto";
import type { Registry } from "../registry/registry.js";

/** What /debug/registryz reports besides the registry itself. */
export interface RegistryzExtras {
  readonly leader: () => unknown;
  readonly registrations?: () => unknown;
}

/**
 * The body of `GET /debug/registryz`: the registry this replica computed
 * (on a standby too, so two replicas can be compared), in the protos' JSON
 * form, with the leadership state and the inputs it was computed from.
 */
export function registryz(registry: Registry, extras: RegistryzExtras): Record<string, unknown> {
  const { services, endpoints } = registry.snapshot();
  const byHost = (a: { namespace: string; hostname: string }, b: { namespace: string; hostname: string }) =>
    a.namespace.localeCompare(b.namespace) || a.hostname.localeCompare(b.hostname);
  return {
    leader: extras.leader(),
    inputs: registry.inputCounts(),
    services: [...services].sort(byHost).map((service) => Service.toJSON(service)),
    endpoints: [...endpoints]
      .sort((a, b) => byHost(a, b) || a.shard.localeCompare(b.shard))
      .map((shard) => EndpointShard.toJSON(shard)),
    ...(extras.registrations ? { registrations: extras.registrations() } : {}),
  };
}
