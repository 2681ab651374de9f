// ca's contract (see ServiceContract): what deploy/'s NATS permissions,
// ARCHITECTURE.md's table and the bus's run-time checks are derived from.
import { Buckets } from "@sextant/bus";
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const caContract = {
  buckets: {
    // trust/trust-bundle.ts writes the root; trust/trust-bundle-feed.ts follows it.
    // @sextant/bus's runner: this replica's membership record (sextantctl version).
    write: [Buckets.trust, Buckets.members],
  },
  ports: {
    grpc: {
      port: DEFAULT_PORTS.ca.grpc,
      setting: "GRPC_PORT",
      serves: "CreateCertificate and WatchTrustBundle over TLS",
    },
    http: { port: DEFAULT_PORTS.ca.http, setting: "HTTP_PORT", serves: "/metrics, /ready" },
  },
} satisfies ServiceContract;
