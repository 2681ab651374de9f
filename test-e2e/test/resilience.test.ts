import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as xds from "@grpc/grpc-js-xds";
import { ReviewsClient, tally, whoami } from "@sextant/bookinfo";
import { TypeUrl } from "@sextant/proto/envoy";
import { DEBUG_HEADERS, eventually, type ServiceProcess } from "@sextant/testing";
import { startTcpBalancer, type TcpBalancer } from "../src/balancer.js";
import { bookinfoSample, type Mesh, REVIEWS_HOST, startMesh } from "../src/mesh.js";

type Syncz = Array<{
  proxyId: string;
  replica: string;
  types: Record<string, { versionSent: string; versionAcked: string }>;
}>;
const syncz = async (push: ServiceProcess): Promise<Syncz> =>
  (await (
    await fetch(`http://127.0.0.1:${push.httpPort}/debug/syncz`, { headers: DEBUG_HEADERS })
  ).json()) as Syncz;

/** Calls continuously until stopped; counts answers. Failures are the point of interest. */
function keepCalling(client: grpc.Client) {
  const counts = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      const answer = await whoami(client);
      counts.set(answer, (counts.get(answer) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return {
    counts,
    async stop() {
      running = false;
      await loop;
      return counts;
    },
  };
}

describe("resilience: losing a push replica, and NATS restarting", () => {
  let mesh: Mesh;
  let balancer: TcpBalancer;
  let client: grpc.Client;
  let alive: number[];

  before(async () => {
    mesh = await startMesh({ pushReplicas: 2 });
    await mesh.apply(bookinfoSample("destination-rule-all.yaml"));
    await mesh.apply(bookinfoSample("virtual-service-reviews-90-10.yaml"));
    alive = [...mesh.xdsPorts];
    balancer = await startTcpBalancer(() => alive);
    process.env.GRPC_XDS_BOOTSTRAP_CONFIG = mesh.bootstrap(balancer.port);
    xds.register();
    client = new ReviewsClient(`xds:///${REVIEWS_HOST}:9080`, grpc.credentials.createInsecure());
    await eventually(async () => ((await tally(client, 100)).get("reviews-v1") ?? 0) > 50, {
      timeoutMs: 20_000,
    });
  });

  after(async () => {
    client?.close();
    await balancer?.close();
    await mesh?.close();
  });

  it("moves clients of a killed replica to the other one, with no failed call and no change of version", async () => {
    const [first, second] = mesh.pushes as [ServiceProcess, ServiceProcess];
    const before = (await syncz(first)).find((proxy) => proxy.types[TypeUrl.RouteConfiguration]);
    assert.ok(before, "the client is not on the first replica");
    const calls = keepCalling(client);
    alive = [mesh.xdsPorts[1]!];
    first.child.kill("SIGKILL");
    const after = await eventually(
      async () =>
        (await syncz(second)).find((proxy) => proxy.types[TypeUrl.RouteConfiguration]?.versionAcked),
      { timeoutMs: 30_000, message: "the client never reconnected to the second replica" },
    );
    const counts = await calls.stop();
    for (const typeUrl of [
      TypeUrl.Listener,
      TypeUrl.RouteConfiguration,
      TypeUrl.Cluster,
      TypeUrl.ClusterLoadAssignment,
    ]) {
      assert.equal(
        after.types[typeUrl]?.versionAcked,
        before.types[typeUrl]?.versionSent,
        `${typeUrl} changed version`,
      );
    }
    assert.deepEqual(
      [...counts.keys()].filter((answer) => answer.startsWith("error")),
      [],
      JSON.stringify([...counts]),
    );
    assert.ok((counts.get("reviews-v1") ?? 0) > 0);
  });

  it("keeps traffic flowing while nats-server restarts, and converges on new config afterwards", async () => {
    const calls = keepCalling(client);
    await mesh.nats.restart();
    // Ingest reconnects by itself; the apply may need a moment to find NATS again.
    await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${mesh.ingest.httpPort}/v1/apply`, {
          method: "POST",
          body: bookinfoSample("virtual-service-reviews-v3.yaml"),
        });
        return response.status === 200;
      },
      { timeoutMs: 30_000, message: "ingest could not apply after the restart" },
    );
    await eventually(async () => (await tally(client, 50)).get("reviews-v3") === 50, {
      timeoutMs: 30_000,
      message: "the new config never reached the client after the NATS restart",
    });
    const counts = await calls.stop();
    assert.deepEqual(
      [...counts.keys()].filter((answer) => answer.startsWith("error")),
      [],
      JSON.stringify([...counts]),
    );
  });
});
