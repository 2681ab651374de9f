// The agent's contract (see ServiceContract): it runs beside a workload and
// talks to ca and push only, never to NATS. Its xDS proxy and SDS listen on
// local sockets and 127.0.0.1, which nothing outside the pod reaches.
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const agentContract = {
  ports: {
    http: {
      port: DEFAULT_PORTS.agent.http,
      setting: "HTTP_PORT",
      serves: "/ready, /healthz/ready, /metrics; with agent proxy also /stats/prometheus, /app-health/*",
    },
    dns: {
      port: 15053,
      setting: "DNS_PROXY_ADDR",
      serves: "the DNS proxy, UDP and TCP on loopback (names from push's NameTable, the rest forwarded)",
      enabledBy: "ISTIO_META_DNS_CAPTURE=true",
    },
  },
} satisfies ServiceContract;
