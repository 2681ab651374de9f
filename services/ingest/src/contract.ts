// ingest's contract (see ServiceContract): what deploy/'s NATS permissions,
// ARCHITECTURE.md's table and the bus's run-time checks are derived from.
import { Buckets, Subjects } from "@sextant/bus";
import { DEFAULT_PORTS, type ServiceContract } from "@sextant/runtime";

export const ingestContract = {
  buckets: {
    // store/config-store.ts; analysis/analysis-runner.ts writes analysis messages.
    // trace/change-traces.ts writes each change's trace.
    // @sextant/bus's runner: this replica's membership record; api/members-route.ts lists every replica's.
    write: [Buckets.config, Buckets.configStatus, Buckets.traces, Buckets.members],
    // analysis/analysis-runner.ts: the registry the analyzers check hosts against,
    // the workloads (endpoints) Gateway selectors must pick, and which Secrets credentialNames find.
    // trace/change-traces.ts: the connected proxies a change's trace reports on.
    read: [Buckets.services, Buckets.endpoints, Buckets.credentialIndex, Buckets.proxyStatus],
  },
  subjects: {
    // nack/nack-recorder.ts: one replica records each NACK.
    subscribe: [{ subject: Subjects.nack, queue: "ingest" }],
  },
  ports: {
    http: {
      port: DEFAULT_PORTS.ingest.http,
      setting: "HTTP_PORT",
      serves: "the config API (/v1/*), /metrics, /ready",
    },
  },
} satisfies ServiceContract;
