// webhook's contract (see ServiceContract): what deploy/'s NATS permissions,
// ARCHITECTURE.md's table and the bus's run-time checks are derived from.
import { Buckets } from "@sextant/bus";
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const webhookContract = {
  buckets: {
    // proxyconfigs/proxy-config-store.ts: the stored ProxyConfigs, which injection merges (read only).
    read: [Buckets.config],
    // @sextant/bus's runner: this replica's membership record (sextantctl version).
    write: [Buckets.members],
  },
  ports: {
    https: {
      port: DEFAULT_PORTS.webhook.https,
      setting: "HTTPS_PORT",
      serves: "/inject and /validate (Kubernetes admission)",
    },
    http: { port: DEFAULT_PORTS.webhook.http, setting: "HTTP_PORT", serves: "/metrics, /ready" },
  },
} satisfies ServiceContract;
