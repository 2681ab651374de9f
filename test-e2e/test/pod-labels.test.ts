// An injected pod's labels reach push: the server's agent is configured as
// the webhook's template configures it (labels only in the downward-API
// labels file, push's address only in PROXY_CONFIG), and an
// AuthorizationPolicy whose selector names a label found only in that file
// applies to it. Real nats-server, ca, ingest, discovery and push processes;
// @grpc/grpc-js-xds servers and clients behind their agents.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { grpcRegistrationYaml } from "@sextant/bookinfo";
import { eventually } from "@sextant/testing";
import { istioMutual, STRICT_MTLS } from "../src/mesh-config.js";
import { type Account, type SecureMesh, startSecureMesh, type Workload } from "../src/secure-mesh.js";

const REVIEWS = "reviews.default.svc.cluster.local";
const TARGET = `xds:///${REVIEWS}:9080`;
const account = (serviceAccount: string): Account => ({ namespace: "default", serviceAccount });
const productpage = account("productpage");
const reviews = account("reviews");
const ratings = account("ratings");

// Only the pod's labels file carries this label: neither the WorkloadEntry
// nor any environment variable does, so the policy can only select the
// server through the labels its agent read from the file.
const POD_ONLY_LABEL = "security.example.com/tier";

describe("pod labels from the downward API select an AuthorizationPolicy", () => {
  let mesh: SecureMesh;
  let server: Workload;
  let productpageClient: Workload;
  let ratingsClient: Workload;

  before(async () => {
    mesh = await startSecureMesh([productpage, reviews, ratings]);
    await mesh.apply(
      grpcRegistrationYaml(REVIEWS, "10.96.0.21", [
        // A port of its own: grpc-js-xds servers listen on every interface.
        { name: "reviews-v1", address: "127.0.0.51", port: 19091, version: "v1", serviceAccount: "reviews" },
      ]),
    );
    await mesh.apply(`${STRICT_MTLS}---\n${istioMutual(REVIEWS)}`);
    const serverAgent = await mesh.startAgent({
      pod: "reviews-v1-7d9c8b4b7f-x2x9q",
      account: reviews,
      ip: "127.0.0.51",
      labels: {
        app: "reviews",
        version: "v1",
        "pod-template-hash": "7d9c8b4b7f",
        [POD_ONLY_LABEL]: "restricted",
      },
      asInjected: true,
    });
    server = await mesh.startWorkload({
      role: "server",
      name: "reviews-v1",
      agent: serverAgent,
      address: "127.0.0.51:19091",
    });
    productpageClient = await mesh.startWorkload({
      role: "client",
      name: "productpage",
      agent: await mesh.startAgent({
        pod: "productpage-v1-0",
        account: productpage,
        ip: "127.0.0.52",
        labels: { app: "productpage", version: "v1" },
        asInjected: true,
      }),
    });
    ratingsClient = await mesh.startWorkload({
      role: "client",
      name: "ratings",
      agent: await mesh.startAgent({
        pod: "ratings-v1-0",
        account: ratings,
        ip: "127.0.0.53",
        labels: { app: "ratings", version: "v1" },
        asInjected: true,
      }),
    });
  });
  after(async () => {
    await mesh?.close();
  });

  it("before any policy, both clients reach the server (over mTLS, through PROXY_CONFIG's push)", async () => {
    for (const client of [productpageClient, ratingsClient])
      await eventually(async () => (await client.tally(TARGET, 1)).counts["reviews-v1"] === 1, {
        timeoutMs: 30_000,
        message: `a client never reached reviews: ${server.output()}`,
      });
  });

  it("a DENY policy selecting the file-only label applies: ratings is denied, productpage is not", async () => {
    await mesh.apply(`apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-ratings, namespace: default}
spec:
  selector:
    matchLabels: {app: reviews, "${POD_ONLY_LABEL}": restricted}
  action: DENY
  rules:
  - from:
    - source:
        principals: [cluster.local/ns/default/sa/ratings]
`);
    await eventually(
      async () => (await ratingsClient.tally(TARGET, 1)).counts["error:PERMISSION_DENIED"] === 1,
      { timeoutMs: 30_000, message: "ratings was never denied: the policy did not select the pod" },
    );
    const denied = await ratingsClient.tally(TARGET, 10);
    assert.deepEqual(denied.counts, { "error:PERMISSION_DENIED": 10 });
    const allowed = await productpageClient.tally(TARGET, 10);
    assert.deepEqual(allowed.counts, { "reviews-v1": 10 }, allowed.errors.join("\n"));
  });
});
