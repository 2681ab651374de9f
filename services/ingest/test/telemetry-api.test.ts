// A Telemetry through ingest's generic config API: apply (v1 and v1alpha1),
// read back, list, analysis, delete; an invalid one is refused.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Buckets, encodeKey } from "@sextant/bus";
import { EndpointShard, ProxyStatus } from "@sextant/proto";
import { eventually } from "@sextant/testing";
import { analysisMessages, get, ingestForSuite, post } from "./harness.js";

const MESH_DEFAULT = `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging:
  - providers: [{name: envoy}]
    filter: {expression: "response.code >= 400"}
  tracing:
  - randomSamplingPercentage: 10
`;

describe("Telemetry through the config API", () => {
  const ingest = ingestForSuite();

  it("stores a Telemetry, returns it as written, lists it by kind and plural, and deletes it", async () => {
    const applied = await post(`${ingest.url}/v1/apply`, MESH_DEFAULT);
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    const one = await get(`${ingest.url}/v1/config/Telemetry/istio-system/mesh-default`);
    assert.equal(one.status, 200);
    assert.equal(one.json.apiVersion, "telemetry.istio.io/v1");
    assert.deepEqual(one.json.spec.accessLogging, [
      { providers: [{ name: "envoy" }], filter: { expression: "response.code >= 400" } },
    ]);
    assert.equal(one.json.spec.tracing[0].randomSamplingPercentage, 10);
    const listed = await get(`${ingest.url}/v1/config?kind=telemetries&namespace=istio-system`);
    assert.deepEqual(
      listed.json.items.map((item: { metadata: { name: string } }) => item.metadata.name),
      ["mesh-default"],
    );
    const deleted = await fetch(`${ingest.url}/v1/config/Telemetry/istio-system/mesh-default`, {
      method: "DELETE",
    });
    assert.equal(deleted.status, 200);
    assert.equal((await get(`${ingest.url}/v1/config/Telemetry/istio-system/mesh-default`)).status, 404);
  });

  it("accepts v1alpha1 and refuses a sampling percentage above 100", async () => {
    const alpha = MESH_DEFAULT.replace("telemetry.istio.io/v1", "telemetry.istio.io/v1alpha1").replace(
      "mesh-default",
      "alpha",
    );
    assert.equal((await post(`${ingest.url}/v1/apply`, alpha)).status, 200);
    const invalid = await post(
      `${ingest.url}/v1/apply`,
      MESH_DEFAULT.replace("10", "101").replace("mesh-default", "bad"),
    );
    assert.equal(invalid.status, 400);
    assert.equal(invalid.json.errors[0].path, "spec.tracing[0].randomSamplingPercentage");
  });

  it("reports metrics as accepted but ignored in analysis", async () => {
    await post(
      `${ingest.url}/v1/apply`,
      "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: metrics, namespace: prod}\nspec:\n  metrics:\n  - providers: [{name: prometheus}]\n",
    );
    const message = await eventually(async () => {
      const messages = await analysisMessages(ingest.url);
      return messages.find((m) => m.name === "metrics" && m.code === "SXT0022");
    });
    assert.equal(message.field, "spec.metrics[0]");
  });

  it("tells when a Telemetry reaches a connected proxyless gRPC client, from push's proxy status", async () => {
    await (await ingest.bus.bucket(Buckets.endpoints)).put(
      "grpc.echo.grpc.svc.cluster.local.kubernetes",
      EndpointShard.fromPartial({
        hostname: "echo.grpc.svc.cluster.local",
        namespace: "grpc",
        shard: "kubernetes/Kubernetes",
        endpoints: [{ address: "10.244.0.30", namespace: "grpc", labels: { app: "echo" } }],
      }),
    );
    await post(
      `${ingest.url}/v1/apply`,
      "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: echo, namespace: grpc}\nspec:\n  selector: {matchLabels: {app: echo}}\n  tracing:\n  - randomSamplingPercentage: 5\n  metrics:\n  - providers: [{name: prometheus}]\n",
    );
    const echoMessages = async () =>
      (await analysisMessages(ingest.url)).filter((m) => m.name === "echo" && m.code === "SXT0022");
    // Analysed (its metrics message is there), but nothing about proxyless before such a client connects there.
    const before = await eventually(async () => {
      const found = await echoMessages();
      return found.length > 0 ? found : undefined;
    });
    assert.deepEqual(
      before.map((m) => m.field),
      ["spec.metrics[0]"],
    );
    const proxyId = "sidecar~10.244.0.30~echo-1.grpc~grpc.svc.cluster.local";
    await (await ingest.bus.bucket(Buckets.proxyStatus)).put(
      encodeKey(proxyId),
      ProxyStatus.fromPartial({ proxyId, generator: "grpc", replica: "push-0" }),
    );
    const message = await eventually(async () => (await echoMessages()).find((m) => m.field === "spec"));
    assert.match(
      message.message ?? "",
      /ignored for proxyless gRPC workloads: 1 selected \(grpc\/app=echo\)/,
    );
  });
});
