// The control plane sextantctl's proxy commands run against: nats-server,
// ingest, discovery and push replicas as processes, on random ports.
import assert from "node:assert/strict";
import {
  debugTokenEnv,
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";

export const HOST = "reviews.default.svc.cluster.local";

/** reviews: a ServiceEntry on 9080 (gRPC) and two WorkloadEntries, v1 and v2, at fixed addresses. */
export const REVIEWS_YAML = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews, namespace: default}
spec:
  hosts: [${HOST}]
  addresses: [10.96.0.10]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: grpc, protocol: GRPC}]
  workloadSelector:
    labels: {app: reviews}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: reviews-v1, namespace: default}
spec:
  address: 10.1.0.11
  ports: {grpc: 9080}
  labels: {app: reviews, version: v1}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: reviews-v2, namespace: default}
spec:
  address: 10.1.0.12
  ports: {grpc: 9080}
  labels: {app: reviews, version: v2}
`;

export interface ProxyMesh {
  readonly nats: NatsServerFixture;
  readonly ingest: ServiceProcess;
  readonly discovery: ServiceProcess;
  readonly pushes: ServiceProcess[];
  /** Each replica's plaintext xDS address. */
  readonly xdsAddresses: string[];
  /** Each replica's HTTP (debug) URL. */
  readonly pushUrls: string[];
  readonly ingestUrl: string;
  apply(yaml: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the mesh with `replicas` push replicas heartbeating their records
 * every heartbeatMs; `env` is added to ingest's and push's environment.
 */
export async function startProxyMesh(
  replicas: number,
  heartbeatMs: number,
  env: Record<string, string> = {},
): Promise<ProxyMesh> {
  const nats = await startNatsServer();
  const ingest = await startServiceProcess("ingest", { NATS_URL: nats.url, API_AUTH: "none", ...env });
  const ingestUrl = `http://127.0.0.1:${ingest.httpPort}`;
  const discovery = await startServiceProcess("discovery", { NATS_URL: nats.url, INGEST_URL: ingestUrl });
  const apply = async (yaml: string) => {
    const response = await fetch(`${ingestUrl}/v1/apply`, { method: "POST", body: yaml });
    assert.equal(response.status, 200, await response.text());
  };
  await apply(REVIEWS_YAML);
  const pushes: ServiceProcess[] = [];
  const xdsAddresses: string[] = [];
  for (let replica = 0; replica < replicas; replica++) {
    const xdsPort = await freePort();
    xdsAddresses.push(`127.0.0.1:${xdsPort}`);
    pushes.push(
      await startServiceProcess("push", {
        NATS_URL: nats.url,
        ...debugTokenEnv(),
        XDS_PLAINTEXT_ENABLED: "true",
        XDS_PORT: String(xdsPort),
        XDS_TLS_ENABLED: "false",
        PUSH_DEBOUNCE_AFTER: "50",
        STATUS_FLUSH_MS: "100",
        STATUS_HEARTBEAT_MS: String(heartbeatMs),
        REPLICA_ID: `push-${replica}`,
        ...env,
      }),
    );
  }
  return {
    nats,
    ingest,
    discovery,
    pushes,
    xdsAddresses,
    pushUrls: pushes.map((push) => `http://127.0.0.1:${push.httpPort}`),
    ingestUrl,
    apply,
    async close() {
      for (const push of pushes) await push.stop();
      await discovery.stop();
      await ingest.stop();
      await nats.dispose();
    },
  };
}
