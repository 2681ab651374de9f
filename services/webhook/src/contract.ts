// webhook's contract (see ServiceContract): it uses no bucket and no subject,
// so it does not connect to NATS and has no NATS user.
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const webhookContract = {
  ports: {
    https: {
      port: DEFAULT_PORTS.webhook.https,
      setting: "HTTPS_PORT",
      serves: "/inject and /validate (Kubernetes admission)",
    },
    http: { port: DEFAULT_PORTS.webhook.http, setting: "HTTP_PORT", serves: "/metrics, /ready" },
  },
} satisfies ServiceContract;
