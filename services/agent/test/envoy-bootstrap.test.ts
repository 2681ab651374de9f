import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { AnySchema, anyUnpack } from "@bufbuild/protobuf/wkt";
import { expectGolden } from "@sextant/testing";
import { envoyBootstrap, type JsonObject } from "../src/bootstrap/envoy-bootstrap.js";
import { bootstrapText } from "../src/bootstrap/from-settings.js";
import { proxyNode } from "../src/node/proxy-node.js";
import { envoyRegistry } from "./helpers/envoy-registry.js";
import { REVIEWS_POD } from "./helpers/fixtures.js";

const testdata = join(import.meta.dirname, "testdata");

const bootstrap = (instanceIp = REVIEWS_POD.instanceIp) =>
  envoyBootstrap({
    node: proxyNode({ ...REVIEWS_POD, instanceIp }, "envoy"),
    instanceIp,
    sdsSocketPath: "/var/run/secrets/workload-spiffe-uds/socket",
    xdsSocketPath: "/etc/istio/proxy/XDS",
    agentHttpPort: 15020,
  });

/** Every object in json that is an Any in proto JSON (has "@type"). */
function anys(json: unknown, found: JsonObject[] = []): JsonObject[] {
  if (Array.isArray(json)) for (const item of json) anys(item, found);
  else if (json && typeof json === "object") {
    if ("@type" in json) found.push(json as JsonObject);
    for (const value of Object.values(json)) anys(value, found);
  }
  return found;
}

describe("Envoy bootstrap", () => {
  test("matches the golden file", () => {
    expectGolden(join(testdata, "envoy-bootstrap.golden.json"), bootstrapText(bootstrap()));
  });

  test("decodes into Envoy's Bootstrap proto without loss", () => {
    const registry = envoyRegistry();
    const schema = registry.getMessage("envoy.config.bootstrap.v3.Bootstrap");
    assert.ok(schema, "Bootstrap is in the descriptor set");
    const json = bootstrap() as JsonValue;
    // fromJson rejects unknown fields (and unknown Any types) by default.
    const message = fromJson(schema, json, { registry });
    // The generator writes no field at its proto3 default (see envoyBootstrap),
    // so the canonical encoding gives back exactly the input.
    assert.deepEqual(toJson(schema, message, { registry, useProtoFieldName: true }), json);
  });

  test("every Any decodes into its type", () => {
    const registry = envoyRegistry();
    const found = anys(bootstrap());
    assert.deepEqual([...new Set(found.map((any) => any["@type"]))].sort(), [
      "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
      "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
      "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    ]);
    for (const json of found) {
      const any = fromJson(AnySchema, json as JsonValue, { registry });
      assert.ok(anyUnpack(any, registry), `${json["@type"]} decodes`);
    }
  });

  test("names the node as Istio does", () => {
    const node = (bootstrap() as { node: Record<string, unknown> }).node;
    assert.equal(
      node.id,
      "sidecar~10.244.1.17~reviews-v1-7d9c8b4b7f-x2x9q.bookinfo~bookinfo.svc.cluster.local",
    );
    assert.equal(node.cluster, "reviews.bookinfo");
    assert.deepEqual(node.locality, { region: "us-east1", zone: "us-east1-b", sub_zone: "rack-7" });
    const metadata = node.metadata as Record<string, unknown>;
    assert.equal(metadata.NAMESPACE, "bookinfo");
    assert.equal(metadata.SERVICE_ACCOUNT, "bookinfo-reviews");
    assert.equal(metadata.INSTANCE_IPS, "10.244.1.17");
    assert.deepEqual(
      (metadata.LABELS as Record<string, string>)["topology.istio.io/locality"],
      "us-east1/us-east1-b/rack-7",
    );
    assert.equal(metadata.GENERATOR, undefined, "an Envoy node is served the sidecar generators");
  });

  test("uses IPv6 loopback and wildcard addresses for an IPv6 workload", () => {
    const text = JSON.stringify(bootstrap("fd00::17"));
    assert.match(text, /"address":"::1","port_value":15000/);
    assert.match(text, /"address":"::","port_value":15090/);
    assert.doesNotMatch(text, /127\.0\.0\.1|0\.0\.0\.0/);
  });
});
