import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Backend, REVIEWS_HOST, reviewsRegistrationYaml, startReviewsBackends } from "@sextant/bookinfo";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import {
  bookinfoNetworkingDir,
  debugTokenEnv,
  eventually,
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";

/** The reviews service every e2e suite routes to. */
export { REVIEWS_HOST };

/** One of Istio's Bookinfo networking samples, unchanged. */
export const bookinfoSample = (file: string): string =>
  readFileSync(join(bookinfoNetworkingDir(), file), "utf8");

/** A control plane of real processes: nats-server, ingest, discovery and push replicas, with reviews v1-v3 backends. */
export interface Mesh {
  readonly nats: NatsServerFixture;
  readonly bus: Bus;
  readonly ingest: ServiceProcess;
  readonly discovery: ServiceProcess;
  readonly pushes: ServiceProcess[];
  readonly xdsPorts: number[];
  readonly backends: Backend[];
  /** POSTs YAML to ingest's /v1/apply and fails the test unless it is accepted. */
  apply(yaml: string): Promise<void>;
  /** A proxyless gRPC bootstrap pointing at port, for GRPC_XDS_BOOTSTRAP_CONFIG. */
  bootstrap(xdsPort: number, pod?: string): string;
  close(): Promise<void>;
}

/**
 * Starts the mesh: nats-server, ingest, discovery and push as processes.
 * The reviews backends join as Bookinfo's VMs would: a ServiceEntry for
 * reviews and one WorkloadEntry per version, applied through ingest, which
 * discovery turns into the registry that push serves.
 */
export async function startMesh(options: { pushReplicas?: number } = {}): Promise<Mesh> {
  const nats = await startNatsServer();
  const bus = await connectBus({
    url: nats.url,
    name: "e2e",
    logger: createLogger({ service: "e2e", level: "silent" }),
  });
  const backends = await startReviewsBackends();
  // The config API is open here; ingest's test/auth.test.ts tests its authentication.
  const ingest = await startServiceProcess("ingest", { NATS_URL: nats.url, API_AUTH: "none" });
  const discovery = await startServiceProcess("discovery", {
    NATS_URL: nats.url,
    INGEST_URL: `http://127.0.0.1:${ingest.httpPort}`,
    // /debug/registryz accepts DEBUG_HEADERS' token.
    ...debugTokenEnv(),
  });
  const apply = async (yaml: string) => {
    const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
      method: "POST",
      body: yaml,
    });
    assert.equal(response.status, 200, await response.text());
  };
  await apply(reviewsRegistrationYaml(backends));
  // Push must start with reviews in the registry, as it would in a running mesh.
  await eventually(
    async () => {
      const shards = await (await bus.bucket(Buckets.endpoints)).list();
      return shards.some(
        (entry) => entry.value.hostname === REVIEWS_HOST && entry.value.endpoints.length === backends.length,
      );
    },
    { timeoutMs: 30_000, message: "discovery never published the reviews endpoints" },
  );
  const pushes: ServiceProcess[] = [];
  const xdsPorts: number[] = [];
  for (let replica = 0; replica < (options.pushReplicas ?? 1); replica++) {
    const xdsPort = await freePort();
    xdsPorts.push(xdsPort);
    pushes.push(
      await startServiceProcess("push", {
        NATS_URL: nats.url,
        // /debug/* accepts DEBUG_HEADERS' token.
        ...debugTokenEnv(),
        // Proxyless clients without an agent: plaintext xDS, opt-in.
        XDS_PLAINTEXT_ENABLED: "true",
        XDS_PORT: String(xdsPort),
        // This mesh has no ca; the mTLS tests start their own (test/security.test.ts).
        XDS_TLS_ENABLED: "false",
        PUSH_DEBOUNCE_AFTER: "50",
        REPLICA_ID: `push-${replica}`,
      }),
    );
  }
  return {
    nats,
    bus,
    ingest,
    discovery,
    pushes,
    xdsPorts,
    backends,
    async apply(yaml) {
      const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
        method: "POST",
        body: yaml,
      });
      assert.equal(response.status, 200, await response.text());
    },
    bootstrap: (xdsPort, pod = "productpage-v1-e2e") =>
      JSON.stringify({
        xds_servers: [
          {
            server_uri: `127.0.0.1:${xdsPort}`,
            channel_creds: [{ type: "insecure" }],
            server_features: ["xds_v3"],
          },
        ],
        node: {
          id: `sidecar~127.0.0.1~${pod}.default~default.svc.cluster.local`,
          metadata: { GENERATOR: "grpc", NAMESPACE: "default", SERVICE_ACCOUNT: "bookinfo-productpage" },
          locality: {},
        },
      }),
    async close() {
      for (const backend of backends) backend.close();
      for (const push of pushes) await push.stop();
      await discovery.stop();
      await ingest.stop();
      await bus.close();
      await nats.dispose();
    },
  };
}
