import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as xds from "@grpc/grpc-js-xds";
import { Buckets, type Bus, connectBus, encodeKey } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import { EndpointShard, HealthStatus, Protocol, Resolution, Service } from "@sextant/proto";
import { bookinfoNetworkingDir, eventually, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { type Backend, ReviewsClient, startBackend, tally } from "../src/grpc-app.js";
import { freePort, type ServiceProcess, startServiceProcess } from "../src/processes.js";

const HOST = "reviews.default.svc.cluster.local";
const sample = (file: string) => readFileSync(join(bookinfoNetworkingDir(), file), "utf8");
const share = (counts: Map<string, number>, key: string, total: number) =>
  (100 * (counts.get(key) ?? 0)) / total;

describe("proxyless gRPC through push, with @grpc/grpc-js-xds", () => {
  let nats: NatsServerFixture;
  let bus: Bus;
  let ingest: ServiceProcess;
  let push: ServiceProcess;
  let xdsPort: number;
  const backends: Backend[] = [];
  let client: grpc.Client;

  const apply = async (yaml: string) => {
    const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
      method: "POST",
      body: yaml,
    });
    assert.equal(response.status, 200, await response.text());
  };

  before(async () => {
    nats = await startNatsServer();
    bus = await connectBus({
      url: nats.url,
      name: "e2e",
      logger: createLogger({ service: "e2e", level: "silent" }),
    });
    for (const version of ["v1", "v2", "v3"]) backends.push(await startBackend(`reviews-${version}`));
    // The registry: one service and its three versions' endpoints.
    const services = await bus.bucket(Buckets.services);
    await services.put(
      encodeKey("default", HOST),
      Service.fromPartial({
        hostname: HOST,
        namespace: "default",
        name: "reviews",
        addresses: ["10.96.0.10"],
        ports: [{ name: "grpc", number: 9080, protocol: Protocol.PROTOCOL_GRPC }],
        resolution: Resolution.RESOLUTION_STATIC,
        registry: "test",
      }),
    );
    const endpoints = await bus.bucket(Buckets.endpoints);
    await endpoints.put(
      encodeKey("default", HOST, "test"),
      EndpointShard.fromPartial({
        hostname: HOST,
        namespace: "default",
        shard: "test",
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

    ingest = await startServiceProcess("ingest", { NATS_URL: nats.url });
    xdsPort = await freePort();
    push = await startServiceProcess("push", {
      NATS_URL: nats.url,
      XDS_PORT: String(xdsPort),
      PUSH_DEBOUNCE_AFTER: "50",
    });
    await apply(sample("destination-rule-all.yaml"));
    await apply(sample("virtual-service-all-v1.yaml"));

    process.env.GRPC_XDS_BOOTSTRAP_CONFIG = JSON.stringify({
      xds_servers: [
        {
          server_uri: `127.0.0.1:${xdsPort}`,
          channel_creds: [{ type: "insecure" }],
          server_features: ["xds_v3"],
        },
      ],
      node: {
        id: "sidecar~127.0.0.1~productpage-v1-e2e.default~default.svc.cluster.local",
        metadata: { GENERATOR: "grpc", NAMESPACE: "default", SERVICE_ACCOUNT: "bookinfo-productpage" },
        locality: {},
      },
    });
    xds.register();
    client = new ReviewsClient(`xds:///${HOST}:9080`, grpc.credentials.createInsecure());
  });

  after(async () => {
    client?.close();
    for (const backend of backends) backend.close();
    await push?.stop();
    await ingest?.stop();
    await bus?.close();
    await nats?.dispose();
  });

  it("routes everything to v1 with virtual-service-all-v1.yaml", async () => {
    await eventually(async () => (await tally(client, 50)).get("reviews-v1") === 50, {
      timeoutMs: 20_000,
      message: "traffic never went to v1 only",
    });
  });

  it("splits 1,000 calls 90/10 with virtual-service-reviews-90-10.yaml", async () => {
    await apply(sample("virtual-service-reviews-90-10.yaml"));
    await eventually(async () => ((await tally(client, 40)).get("reviews-v2") ?? 0) > 0, {
      timeoutMs: 10_000,
    });
    const counts = await tally(client, 1_000);
    assert.ok(Math.abs(share(counts, "reviews-v1", 1_000) - 90) <= 4, JSON.stringify([...counts]));
    assert.ok(Math.abs(share(counts, "reviews-v2", 1_000) - 10) <= 4, JSON.stringify([...counts]));
  });
});
