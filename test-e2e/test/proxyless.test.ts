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

  it("converges on a 50/50 split after a change, and reports how long it took", async () => {
    const fifty = sample("virtual-service-reviews-90-10.yaml")
      .replace("weight: 90", "weight: 50")
      .replace("weight: 10", "weight: 50");
    const started = Date.now();
    await apply(fifty);
    await eventually(
      async () => {
        const counts = await tally(client, 200);
        return Math.abs(share(counts, "reviews-v2", 200) - 50) <= 12;
      },
      { timeoutMs: 20_000, intervalMs: 0, message: "the 50/50 split never took effect" },
    );
    // Measured, not asserted: the machines are shared. BENCHMARKS.md records it.
    console.log(`# convergence to 50/50 observed after ${Date.now() - started} ms`);
    const counts = await tally(client, 1_000);
    assert.ok(Math.abs(share(counts, "reviews-v1", 1_000) - 50) <= 5, JSON.stringify([...counts]));
  });

  it("sends the calls with end-user: jason to v2 only (virtual-service-reviews-jason-v2-v3.yaml)", async () => {
    await apply(sample("virtual-service-reviews-jason-v2-v3.yaml"));
    const jason = new grpc.Metadata();
    jason.set("end-user", "jason");
    await eventually(async () => (await tally(client, 40)).get("reviews-v3") === 40, { timeoutMs: 10_000 });
    const asJason = await tally(client, 200, jason);
    assert.deepEqual([...asJason], [["reviews-v2", 200]]);
    const anonymous = await tally(client, 200);
    assert.deepEqual([...anonymous], [["reviews-v3", 200]]);
  });

  it("fails the configured share of calls with the configured status (fault abort)", async () => {
    await apply(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews}
spec:
  hosts: [reviews]
  http:
  - fault:
      abort:
        percentage: {value: 30}
        grpcStatus: UNAVAILABLE
    route:
    - destination: {host: reviews, subset: v1}
`);
    await eventually(
      async () => ((await tally(client, 100)).get(`error:${grpc.status.UNAVAILABLE}`) ?? 0) > 0,
      {
        timeoutMs: 10_000,
      },
    );
    const counts = await tally(client, 1_000);
    assert.ok(
      Math.abs(share(counts, `error:${grpc.status.UNAVAILABLE}`, 1_000) - 30) <= 5,
      JSON.stringify([...counts]),
    );
    assert.equal(
      (counts.get("reviews-v1") ?? 0) + (counts.get(`error:${grpc.status.UNAVAILABLE}`) ?? 0),
      1_000,
    );
  });

  it("records a NACK with the client's own message, ties it to the DestinationRule, and keeps the old config serving", async () => {
    await apply(sample("virtual-service-all-v1.yaml"));
    await eventually(async () => (await tally(client, 40)).get("reviews-v1") === 40, { timeoutMs: 10_000 });
    // Bookinfo's own destination-rule-reviews.yaml asks for RANDOM, which gRPC clients do not implement.
    await apply(sample("destination-rule-reviews.yaml"));
    const nack = await eventually(
      async () => {
        const syncz = (await (await fetch(`http://127.0.0.1:${push.httpPort}/debug/syncz`)).json()) as Array<{
          types: Record<string, { lastNack?: { message: string } }>;
        }>;
        return syncz.flatMap((proxy) => Object.values(proxy.types)).find((type) => type.lastNack)?.lastNack;
      },
      { timeoutMs: 15_000, message: "no NACK in /debug/syncz" },
    );
    assert.match(nack.message, /unsupported lb_policy: RANDOM|lb_policy.*RANDOM/);
    const analysis = await eventually(async () => {
      const report = (await (await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/analyze`)).json()) as {
        messages: Array<{ kind: string; name: string; origin: string; message: string }>;
      };
      return report.messages.find(
        (m) => m.origin === "proxy" && m.kind === "DestinationRule" && m.name === "reviews",
      );
    });
    assert.match(analysis.message, /RANDOM/);
    const counts = await tally(client, 100);
    assert.deepEqual([...counts], [["reviews-v1", 100]]);
    await apply(sample("destination-rule-all.yaml"));
  });
});
