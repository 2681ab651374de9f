// GAMMA mesh routing with both real proxyless clients: a GRPCRoute whose
// parentRef is the Service reviews (group "", kind Service) routes the mesh's
// calls to reviews for gRPC C-core (python3-grpcio) and @grpc/grpc-js-xds
// clients alike: a weighted split between the versions' Services, a header
// match and a gRPC method match. One mesh, every case in it.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { grpcRegistrationYaml } from "@sextant/bookinfo";
import { eventually } from "@sextant/testing";
import { assertGrpcioInstalled, serverPort, startCcoreWorkload } from "../src/ccore-workload.js";
import {
  type Account,
  nacks,
  type SecureMesh,
  startSecureMesh,
  versionedAgent,
  type Workload,
} from "../src/secure-mesh.js";

const REVIEWS = "reviews.default.svc.cluster.local";
const reviewsTarget = `xds:///${REVIEWS}:9080`;
const account = (serviceAccount: string): Account => ({ namespace: "default", serviceAccount });
const productpage = account("productpage");
const ratings = account("ratings");
const reviews = account("reviews");

/**
 * The Service of one version (reviews-v1.default.svc.cluster.local): GAMMA
 * splits between Services, not subsets, as Istio's Gateway API conversion has
 * no subsets. It selects the version's WorkloadEntry, which the Service
 * reviews selects too.
 */
const versionService = (version: string, vip: string) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: reviews-${version}, namespace: default}
spec:
  hosts: [reviews-${version}.default.svc.cluster.local]
  addresses: [${vip}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: grpc, protocol: GRPC}]
  workloadSelector:
    labels: {app: reviews, version: ${version}}
`;

/** A GRPCRoute attached to the Service reviews on port 9080 (GAMMA), with these rules. */
const grpcRoute = (rules: string) => `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: reviews, namespace: default}
spec:
  parentRefs:
  - {group: "", kind: Service, name: reviews, port: 9080}
  rules:
${rules}`;

const backend = (version: string, weight?: number) =>
  `{name: reviews-${version}, port: 9080${weight === undefined ? "" : `, weight: ${weight}`}}`;

/** The routes of each case, as GRPCRoutes. */
const ROUTES = {
  split: grpcRoute(`  - backendRefs: [${backend("v1", 80)}, ${backend("v2", 20)}]
`),
  header: grpcRoute(`  - matches:
    - headers: [{name: end-user, value: jason}]
    backendRefs: [${backend("v2")}]
  - backendRefs: [${backend("v1")}]
`),
  method: grpcRoute(`  - matches:
    - method: {service: bookinfo.Reviews, method: Caller}
    backendRefs: [${backend("v1")}]
  - matches:
    - method: {service: bookinfo.Reviews, method: Whoami}
    backendRefs: [${backend("v2")}]
  - backendRefs: [${backend("v1")}]
`),
  // Istio makes a direct response 500 of a rule without backends; gRPC maps 500 to UNKNOWN.
  noBackends: grpcRoute(`  - matches:
    - method: {service: bookinfo.Reviews, method: Whoami}
  - backendRefs: [${backend("v1")}]
`),
};

/**
 * An HTTPRoute on the Service reviews-v1: a gRPC call is an HTTP/2 POST to
 * /<service>/<method>, so a path match picks a method for proxyless clients too.
 */
const HTTP_ROUTE = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: reviews-v1, namespace: default}
spec:
  parentRefs:
  - {group: "", kind: Service, name: reviews-v1, port: 9080}
  rules:
  - matches:
    - path: {type: Exact, value: /bookinfo.Reviews/Whoami}
      headers: [{name: end-user, value: jason}]
    backendRefs: [${backend("v2")}]
  - backendRefs: [${backend("v1")}]
`;

describe("GAMMA: a GRPCRoute on the Service reviews, with gRPC C-core and grpc-js-xds clients", () => {
  let mesh: SecureMesh;
  const clients: Array<{ kind: string; workload: Workload }> = [];
  const servers: Workload[] = [];
  const logs = () => [...clients.map((c) => c.workload), ...servers].map((w) => w.output()).join("\n");

  /** Waits until every client's calls meet `settled` (the route push sent took effect), then runs `check` on each. */
  async function forEachClient(
    settled: (client: Workload) => Promise<boolean>,
    message: string,
    check: (client: Workload, kind: string) => Promise<void>,
  ): Promise<void> {
    for (const { kind, workload } of clients) {
      try {
        await eventually(() => settled(workload), { timeoutMs: 30_000, message: `${kind}: ${message}` });
      } catch (error) {
        throw new Error(`${(error as Error).message}\n${logs()}`);
      }
      await check(workload, kind);
    }
  }

  before(async () => {
    console.log(`# python3-grpcio ${assertGrpcioInstalled()}`);
    mesh = await startSecureMesh([productpage, ratings, reviews]);
    const entries = [
      { name: "reviews-v1", version: "v1", address: "127.0.0.81" },
      { name: "reviews-v2", version: "v2", address: "127.0.0.82" },
    ];
    const backends = await Promise.all(
      entries.map(async (entry) => ({
        ...entry,
        app: "reviews",
        port: await serverPort(entry.address),
        serviceAccount: reviews.serviceAccount,
      })),
    );
    await mesh.apply(grpcRegistrationYaml(REVIEWS, "10.96.0.81", backends));
    await mesh.apply(versionService("v1", "10.96.0.82"));
    await mesh.apply(versionService("v2", "10.96.0.83"));
    await mesh.apply(ROUTES.split);
    // One server of each implementation: v1 on grpc-js-xds, v2 on C-core.
    const [v1, v2] = backends as [(typeof backends)[0], (typeof backends)[0]];
    const agentOf = (entry: typeof v1) =>
      mesh.startAgent(versionedAgent("reviews", entry.version, reviews, entry.address));
    servers.push(
      await startCcoreWorkload({
        role: "server",
        name: v2.name,
        agent: await agentOf(v2),
        address: `${v2.address}:${v2.port}`,
      }),
    );
    servers.push(
      await mesh.startWorkload({
        role: "server",
        name: v1.name,
        agent: await agentOf(v1),
        address: `${v1.address}:${v1.port}`,
      }),
    );
    clients.push({
      kind: "C-core",
      workload: await startCcoreWorkload({
        role: "client",
        name: "productpage",
        agent: await mesh.startAgent(versionedAgent("productpage", "v1", productpage, "127.0.0.84")),
      }),
    });
    clients.push({
      kind: "grpc-js-xds",
      workload: await mesh.startWorkload({
        role: "client",
        name: "ratings",
        agent: await mesh.startAgent(versionedAgent("ratings", "v1", ratings, "127.0.0.85")),
      }),
    });
  });
  after(async () => {
    for (const workload of [...clients.map((c) => c.workload), ...servers]) await workload.stop();
    await mesh?.close();
  });

  it("weighted split: backendRefs reviews-v1 weight 80 and reviews-v2 weight 20 share 200 calls about 80/20", async () => {
    // Applied in before(), ahead of the clients: the first routes they get are these.
    await forEachClient(
      async (client) => {
        const { counts } = await client.tally(reviewsTarget, 40);
        return (counts["reviews-v1"] ?? 0) > 0 && (counts["reviews-v2"] ?? 0) > 0;
      },
      "calls never reached both versions",
      async (client, kind) => {
        const { counts, errors } = await client.tally(reviewsTarget, 200);
        const v1 = counts["reviews-v1"] ?? 0;
        assert.equal(v1 + (counts["reviews-v2"] ?? 0), 200, `${kind}: ${errors.join("\n")}`);
        // n = 200, p = 0.8: the standard deviation of v1's share is 2.8 points; 15 is over 5 sigma
        // (and keeps out the 50/50 of the route push sends without one).
        assert.ok(Math.abs((100 * v1) / 200 - 80) <= 15, `${kind}: ${JSON.stringify(counts)}`);
      },
    );
  });

  it("header match: calls with end-user: jason go to reviews-v2, everyone else's to reviews-v1", async () => {
    await mesh.apply(ROUTES.header);
    await forEachClient(
      async (client) =>
        (await client.tally(reviewsTarget, 10, "end-user:jason")).counts["reviews-v2"] === 10 &&
        (await client.tally(reviewsTarget, 20)).counts["reviews-v1"] === 20,
      "jason's calls never went to reviews-v2 only and the others' to reviews-v1 only",
      async (client, kind) => {
        const asJason = await client.tally(reviewsTarget, 50, "end-user:jason");
        assert.deepEqual(asJason.counts, { "reviews-v2": 50 }, `${kind}: ${asJason.errors.join("\n")}`);
        const anonymous = await client.tally(reviewsTarget, 50);
        assert.deepEqual(anonymous.counts, { "reviews-v1": 50 }, `${kind}: ${anonymous.errors.join("\n")}`);
        const asMary = await client.tally(reviewsTarget, 20, "end-user:mary");
        assert.deepEqual(asMary.counts, { "reviews-v1": 20 }, `${kind}: ${asMary.errors.join("\n")}`);
      },
    );
  });

  it("method match: bookinfo.Reviews/Whoami goes to reviews-v2, not to the rules for Caller or for the rest", async () => {
    // Whoami reaches v2 only through its own rule: the Caller rule before it, the catch-all
    // after it and the header routes before this change all send it to v1.
    await mesh.apply(ROUTES.method);
    await forEachClient(
      async (client) => (await client.tally(reviewsTarget, 20)).counts["reviews-v2"] === 20,
      "Whoami never went to reviews-v2 only",
      async (client, kind) => {
        const { counts, errors } = await client.tally(reviewsTarget, 50);
        assert.deepEqual(counts, { "reviews-v2": 50 }, `${kind}: ${errors.join("\n")}`);
      },
    );
  });

  it("a rule without backendRefs fails the calls it matches (UNKNOWN, as gRPC maps Istio's 500) instead of passing them on", async () => {
    // Before: Whoami to v2. Were the rule left out, the calls would reach v1 through the catch-all.
    await mesh.apply(ROUTES.noBackends);
    await forEachClient(
      async (client) => (await client.tally(reviewsTarget, 20)).counts["error:UNKNOWN"] === 20,
      "Whoami calls never all failed",
      async (client, kind) => {
        const { counts } = await client.tally(reviewsTarget, 30);
        assert.deepEqual(counts, { "error:UNKNOWN": 30 }, kind);
      },
    );
  });

  it("HTTPRoute on the Service reviews-v1: jason's Whoami calls go to reviews-v2, the others stay on reviews-v1", async () => {
    const target = "xds:///reviews-v1.default.svc.cluster.local:9080";
    await mesh.apply(HTTP_ROUTE);
    // Without the route, jason's calls go to reviews-v1 as everyone's do.
    await forEachClient(
      async (client) => (await client.tally(target, 20, "end-user:jason")).counts["reviews-v2"] === 20,
      "jason's calls never went to reviews-v2 only",
      async (client, kind) => {
        const asJason = await client.tally(target, 50, "end-user:jason");
        assert.deepEqual(asJason.counts, { "reviews-v2": 50 }, `${kind}: ${asJason.errors.join("\n")}`);
        const anonymous = await client.tally(target, 50);
        assert.deepEqual(anonymous.counts, { "reviews-v1": 50 }, `${kind}: ${anonymous.errors.join("\n")}`);
      },
    );
  });

  it("both clients accepted every route push sent them: no NACK recorded", async () => {
    assert.deepEqual(nacks(mesh), []);
  });
});
