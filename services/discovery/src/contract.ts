// discovery's contract (see ServiceContract): what deploy/'s NATS permissions,
// ARCHITECTURE.md's table and the bus's run-time checks are derived from.
import { Buckets, Subjects } from "@sextant/bus";
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const discoveryContract = {
  buckets: {
    // publish/publisher.ts: the leader writes the registry; leader/lease.ts holds the lease;
    // credentials/credential-publisher.ts: the leader writes the Secrets that config names,
    // and their index (names and booleans) for ingest's analysis.
    write: [
      Buckets.services,
      Buckets.endpoints,
      Buckets.leases,
      Buckets.credentials,
      Buckets.credentialIndex,
      // @sextant/bus's runner: this replica's membership record (sextantctl version).
      Buckets.members,
    ],
    // serviceentry/config-source.ts: ServiceEntry, WorkloadEntry, WorkloadGroup;
    // credentials/credential-publisher.ts: Gateway, DestinationRule (their credentialName).
    read: [Buckets.config],
  },
  subjects: {
    // registration/auto-registration.ts: every replica follows the events.
    subscribe: [{ subject: Subjects.registration }],
  },
  ports: {
    http: {
      port: DEFAULT_PORTS.discovery.http,
      setting: "HTTP_PORT",
      serves: "/debug/registryz, /metrics, /ready",
    },
  },
} satisfies ServiceContract;
