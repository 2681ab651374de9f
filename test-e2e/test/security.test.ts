// mTLS, authorization, certificate rotation and xDS identity, end to end:
// real nats-server, ca, ingest, discovery and push processes, one agent
// process per workload, and @grpc/grpc-js-xds servers and clients that reach
// push only through their agents.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { grpcRegistrationYaml, ReviewsClient, whoami } from "@sextant/bookinfo";
import { eventually } from "@sextant/testing";
import { istioMutual, STRICT_MTLS } from "../src/mesh-config.js";
import {
  type Account,
  type Agent,
  type SecureMesh,
  startSecureMesh,
  versionedAgent,
  type Workload,
} from "../src/secure-mesh.js";
import { adsThroughAgent, sdsUpdates } from "../src/xds-clients.js";

const REVIEWS = "reviews.default.svc.cluster.local";
const TARGET = `xds:///${REVIEWS}:9080`;
const account = (serviceAccount: string, namespace = "default"): Account => ({ namespace, serviceAccount });
const productpage = account("productpage");
const reviews = account("reviews");
const ratings = account("ratings");
const intruder = account("intruder", "other");

// grpc-js-xds 1.14's XdsServer listens on its port on every interface, not
// on the address it was given: each server of a test run needs a port of its
// own (the WorkloadEntry maps the service port 9080 to it).
const registration = (entries: Array<{ name: string; address: string; port: number; version: string }>) =>
  grpcRegistrationYaml(
    REVIEWS,
    "10.96.0.20",
    entries.map((entry) => ({ ...entry, serviceAccount: "reviews" })),
  );

const STRICT_AND_ISTIO_MUTUAL = `${STRICT_MTLS}---\n${istioMutual(REVIEWS)}`;

describe("security: mTLS, authorization and xDS identity through agents", () => {
  let mesh: SecureMesh;
  let server: Workload;
  let productpageClient: Workload;
  let ratingsClient: Workload;

  before(async () => {
    mesh = await startSecureMesh([productpage, reviews, ratings, intruder]);
    await mesh.apply(
      registration([{ name: "reviews-v1", address: "127.0.0.31", port: 19081, version: "v1" }]),
    );
    await mesh.apply(STRICT_AND_ISTIO_MUTUAL);
    const serverAgent = await mesh.startAgent(versionedAgent("reviews", "v1", reviews, "127.0.0.31"));
    server = await mesh.startWorkload({
      role: "server",
      name: "reviews-v1",
      agent: serverAgent,
      address: "127.0.0.31:19081",
    });
    productpageClient = await mesh.startWorkload({
      role: "client",
      name: "productpage",
      agent: await mesh.startAgent(versionedAgent("productpage", "v1", productpage, "127.0.0.32")),
    });
    ratingsClient = await mesh.startWorkload({
      role: "client",
      name: "ratings",
      agent: await mesh.startAgent(versionedAgent("ratings", "v1", ratings, "127.0.0.33")),
    });
  });
  after(async () => {
    await mesh?.close();
  });

  it("STRICT + ISTIO_MUTUAL: the client reaches the server over mTLS, and the server sees its SPIFFE identity", async () => {
    await eventually(
      async () =>
        (await productpageClient.caller(TARGET)).answer ===
        "spiffe://cluster.local/ns/default/sa/productpage",
      { timeoutMs: 30_000, message: `productpage never reached reviews over mTLS: ${server.output()}` },
    );
    const { counts, errors } = await productpageClient.tally(TARGET, 50);
    assert.deepEqual(counts, { "reviews-v1": 50 }, errors.join("\n"));
  });

  it("STRICT: a client without mesh credentials is refused", async () => {
    const plain = new ReviewsClient("127.0.0.31:19081", grpc.credentials.createInsecure());
    try {
      assert.equal(await whoami(plain), `error:${grpc.status.UNAVAILABLE}`);
    } finally {
      plain.close();
    }
  });

  it("AuthorizationPolicy ALLOW productpage: productpage passes, ratings gets PERMISSION_DENIED", async () => {
    await mesh.apply(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: reviews-viewer, namespace: default}
spec:
  selector:
    matchLabels: {app: reviews}
  action: ALLOW
  rules:
  - from:
    - source:
        principals: [cluster.local/ns/default/sa/productpage]
`);
    await eventually(
      async () => (await ratingsClient.tally(TARGET, 1)).counts["error:PERMISSION_DENIED"] === 1,
      { timeoutMs: 30_000, message: "ratings was never denied" },
    );
    const denied = await ratingsClient.tally(TARGET, 20);
    assert.deepEqual(denied.counts, { "error:PERMISSION_DENIED": 20 });
    const allowed = await productpageClient.tally(TARGET, 20);
    assert.deepEqual(allowed.counts, { "reviews-v1": 20 }, allowed.errors.join("\n"));
  });

  it("xDS identity: push refuses a stream whose certificate names another namespace than its node", async () => {
    // An agent holding other/intruder's certificate, whose node claims namespace default.
    const agent = await mesh.startAgent({
      pod: "intruder-0",
      account: intruder,
      ip: "127.0.0.35",
      labels: { app: "intruder" },
    });
    try {
      const refusal = await adsThroughAgent(agent, {
        id: "sidecar~127.0.0.35~intruder-0.default~default.svc.cluster.local",
        namespace: "default",
        serviceAccount: "intruder",
      });
      assert.equal(refusal.code, grpc.status.PERMISSION_DENIED, refusal.details);
      assert.match(refusal.details, /authorization failed: .*namespace "other".*namespace "default"/);
      // The same agent, for its own namespace, is served.
      const accepted = await adsThroughAgent(agent, {
        id: "sidecar~127.0.0.35~intruder-0.other~other.svc.cluster.local",
        namespace: "other",
        serviceAccount: "intruder",
      });
      assert.equal(accepted.code, grpc.status.OK, accepted.details);
    } finally {
      await agent.stop();
    }
  });
});

describe("security: certificate rotation under traffic", () => {
  let mesh: SecureMesh;
  let serverAgent: Agent;
  let clientAgent: Agent;
  let client: Workload;

  before(async () => {
    mesh = await startSecureMesh([productpage, reviews]);
    await mesh.apply(
      registration([{ name: "reviews-v2", address: "127.0.0.41", port: 19082, version: "v2" }]),
    );
    await mesh.apply(STRICT_AND_ISTIO_MUTUAL);
    serverAgent = await mesh.startAgent({
      ...versionedAgent("reviews", "v2", reviews, "127.0.0.41"),
      secretTtl: "60s",
    });
    await mesh.startWorkload({
      role: "server",
      name: "reviews-v2",
      agent: serverAgent,
      address: "127.0.0.41:19082",
    });
    clientAgent = await mesh.startAgent({
      ...versionedAgent("productpage", "v1", productpage, "127.0.0.42"),
      secretTtl: "60s",
    });
    client = await mesh.startWorkload({ role: "client", name: "productpage", agent: clientAgent });
  });
  after(async () => {
    await mesh?.close();
  });

  it("SDS serves default and ROOTCA, then a new default on rotation", async () => {
    const updates = await sdsUpdates(serverAgent.sdsSocket, ["default", "ROOTCA"], 2, 90_000);
    assert.deepEqual(new Set(updates[0]?.map((s) => s.name)), new Set(["default", "ROOTCA"]));
    const first = updates[0]?.find((s) => s.name === "default")?.certificate;
    const rotated = updates
      .slice(1)
      .flat()
      .find((s) => s.name === "default")?.certificate;
    assert.ok(first && rotated, "no rotated default secret arrived");
    assert.notEqual(rotated, first);
  });

  it("with a 60 s TTL, certificates rotate with no failed call during 2 minutes", async () => {
    await eventually(async () => (await client.tally(TARGET, 1)).counts["reviews-v2"] === 1, {
      timeoutMs: 30_000,
      message: "the client never reached reviews-v2",
    });
    const seen = new Set<string>([readFileSync(`${clientAgent.certDir}/cert-chain.pem`, "utf8")]);
    const failures: string[] = [];
    let calls = 0;
    const until = Date.now() + 120_000;
    while (Date.now() < until) {
      const { counts, errors } = await client.tally(TARGET, 25);
      calls += 25;
      for (const [answer, count] of Object.entries(counts))
        if (answer !== "reviews-v2") failures.push(`${count} × ${answer}`);
      failures.push(...errors);
      seen.add(readFileSync(`${clientAgent.certDir}/cert-chain.pem`, "utf8"));
    }
    assert.deepEqual(failures, [], `${failures.length} failures in ${calls} calls`);
    // 120 s with a 60 s TTL rotating at half its life: at least three certificates.
    assert.ok(seen.size >= 3, `only ${seen.size} client certificates seen in 2 minutes`);
  });
});
