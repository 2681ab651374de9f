// push's contract (see ServiceContract): what deploy/'s NATS permissions,
// ARCHITECTURE.md's table and the bus's run-time checks are derived from.
import { Buckets, Subjects } from "@sextant/bus";
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const pushContract = {
  buckets: {
    // status/proxy-status.ts (listed whole by /debug/proxy_status, main.ts, for every replica's proxies);
    // status/change-tracer.ts (what each change built and sent, and the answers)
    // @sextant/bus's runner: this replica's membership record (sextantctl version).
    write: [Buckets.proxyStatus, Buckets.traces, Buckets.members],
    // inputs/push-inputs.ts (credentials: the SDS secrets), and the trust bundle its mTLS identity follows
    // (@sextant/identity's bus trust source).
    read: [Buckets.config, Buckets.services, Buckets.endpoints, Buckets.credentials, Buckets.trust],
  },
  subjects: {
    // status/proxy-status.ts: proxies' rejections and WorkloadGroup connections.
    publish: [Subjects.nack, Subjects.registration],
  },
  ports: {
    xds: {
      port: DEFAULT_PORTS.push.xds,
      setting: "XDS_PORT",
      serves: "ADS, plaintext",
      enabledBy: "XDS_PLAINTEXT_ENABLED",
    },
    xdsTls: { port: DEFAULT_PORTS.push.xdsTls, setting: "XDS_TLS_PORT", serves: "ADS over mTLS" },
    http: { port: DEFAULT_PORTS.push.http, setting: "HTTP_PORT", serves: "/debug/*, /metrics, /ready" },
  },
} satisfies ServiceContract;
