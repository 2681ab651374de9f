// MESH_CONFIG_FILE end to end in push: a sidecar whose CUSTOM policy names a
// provider MeshConfig lacks is sent a DENY of what the policy matches; once
// the file defines the provider (as a ConfigMap update rewrites it), the
// sidecar is pushed the ext_authz filter instead, without a restart.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { type DiscoveryResponse, TypeUrl } from "@sextant/proto/envoy";
import { grpcNode, pushForSuite, putConfig, registerService } from "./harness.js";

/** The bytes of the virtualInbound listener (its nested filter configs are embedded, names and all). */
function virtualInbound(response: DiscoveryResponse): Buffer {
  const listener = response.resources.find((any) => Buffer.from(any.value).includes("virtualInbound"));
  assert.ok(listener, "no virtualInbound listener");
  return Buffer.from(listener.value);
}

describe("MESH_CONFIG_FILE in a running push", () => {
  const meshFile = join(mkdtempSync(join(tmpdir(), "push-mesh-")), "mesh");

  const push = pushForSuite({
    seed: async (bus) => {
      await registerService(bus, "reviews.default.svc.cluster.local", { name: "http", number: 9080 }, [
        { address: "10.1.0.1", port: 9080, labels: { app: "reviews" } },
      ]);
      await registerService(bus, "ext-authz.foo.svc.cluster.local", { name: "grpc", number: 9000 }, [
        { address: "10.1.0.20", port: 9000, labels: { app: "ext-authz" } },
      ]);
      await putConfig(bus, {
        kind: "AuthorizationPolicy",
        apiVersion: "security.istio.io/v1",
        name: "ext-authz",
        spec: {
          action: "CUSTOM",
          provider: { name: "authz" },
          rules: [{ to: [{ operation: { paths: ["/admin/*"] } }] }],
        },
      });
    },
    // The file does not exist yet: an optional ConfigMap that has not been created.
    env: { MESH_CONFIG_FILE: meshFile },
  });

  it("denies for a missing provider, then runs ext_authz once the file defines it", async () => {
    const client = push.adsClient();
    // A sidecar (no GENERATOR) of reviews at 10.1.0.1.
    const node = {
      ...grpcNode(),
      id: "sidecar~10.1.0.1~reviews-1.default~default.svc.cluster.local",
      metadata: { NAMESPACE: "default", LABELS: { app: "reviews" }, INSTANCE_IPS: "10.1.0.1" },
    };
    client.send({ node, typeUrl: TypeUrl.Listener, resourceNames: [] });
    const first = await client.next();
    const denying = virtualInbound(first);
    assert.ok(denying.includes("-deny-due-to-bad-CUSTOM-action"));
    assert.ok(!denying.includes("envoy.filters.http.ext_authz"));
    client.ack(first);

    writeFileSync(
      meshFile,
      "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: ext-authz.foo.svc.cluster.local, port: 9000}\n",
    );
    const pushed = await client.next();
    const calling = virtualInbound(pushed);
    assert.ok(calling.includes("envoy.filters.http.ext_authz"));
    assert.ok(calling.includes("outbound|9000||ext-authz.foo.svc.cluster.local"));
    assert.ok(!calling.includes("-deny-due-to-bad-CUSTOM-action"));
  });
});
