import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Buckets, type Bus, connectBus, encodeKey } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { EndpointShard, HealthStatus, Protocol, Resolution, Service } from "@sextant/proto";
import { bookinfoNetworkingDir, freePort, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { type Backend, startBackend } from "./grpc-app.js";
import { type ServiceProcess, startServiceProcess } from "./processes.js";

/** The reviews service every e2e suite routes to. */
export const REVIEWS_HOST = "reviews.default.svc.cluster.local";

/** One of Istio's Bookinfo networking samples, unchanged. */
export const bookinfoSample = (file: string): string =>
  readFileSync(join(bookinfoNetworkingDir(), file), "utf8");

/** A control plane of real processes: nats-server, ingest and push replicas, with reviews v1-v3 backends. */
export interface Mesh {
  readonly nats: NatsServerFixture;
  readonly bus: Bus;
  readonly ingest: ServiceProcess;
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
 * Starts the mesh. The registry entry for reviews is written to the
 * registry buckets directly, the way discovery writes it, so these suites
 * exercise push and ingest on their own.
 */
export async function startMesh(options: { pushReplicas?: number } = {}): Promise<Mesh> {
  const nats = await startNatsServer();
  const bus = await connectBus({
    url: nats.url,
    name: "e2e",
    logger: createLogger({ service: "e2e", level: "silent" }),
  });
  const backends: Backend[] = [];
  for (const version of ["v1", "v2", "v3"]) backends.push(await startBackend(`reviews-${version}`));
  await (await bus.bucket(Buckets.services)).put(
    encodeKey("default", REVIEWS_HOST),
    Service.fromPartial({
      hostname: REVIEWS_HOST,
      namespace: "default",
      name: "reviews",
      addresses: ["10.96.0.10"],
      ports: [{ name: "grpc", number: 9080, protocol: Protocol.PROTOCOL_GRPC }],
      resolution: Resolution.RESOLUTION_STATIC,
      registry: "e2e",
    }),
  );
  await (await bus.bucket(Buckets.endpoints)).put(
    encodeKey("default", REVIEWS_HOST, "e2e"),
    EndpointShard.fromPartial({
      hostname: REVIEWS_HOST,
      namespace: "default",
      shard: "e2e",
      endpoints: backends.map((backend) => ({
        address: "127.0.0.1",
        ports: { grpc: backend.port },
        labels: { app: "reviews", version: backend.name.replace("reviews-", "") },
        serviceAccount: "bookinfo-reviews",
        namespace: "default",
        health: HealthStatus.HEALTH_STATUS_HEALTHY,
      })),
    }),
  );
  const ingest = await startServiceProcess("ingest", { NATS_URL: nats.url });
  const pushes: ServiceProcess[] = [];
  const xdsPorts: number[] = [];
  for (let replica = 0; replica < (options.pushReplicas ?? 1); replica++) {
    const xdsPort = await freePort();
    xdsPorts.push(xdsPort);
    pushes.push(
      await startServiceProcess("push", {
        NATS_URL: nats.url,
        XDS_PORT: String(xdsPort),
        PUSH_DEBOUNCE_AFTER: "50",
        REPLICA_ID: `push-${replica}`,
      }),
    );
  }
  return {
    nats,
    bus,
    ingest,
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
      await ingest.stop();
      await bus.close();
      await nats.dispose();
    },
  };
}
