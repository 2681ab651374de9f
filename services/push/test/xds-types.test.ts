// Adding an xDS type is its generator, one entry of the type table and its
// golden case; nothing in the server changes. This test adds a test-only
// type (SDS secrets for proxyless clients) in exactly those three places and
// shows that the server serves it: both protocol variants, pushes in the
// table's order, its metric label, and config_dump's decoder.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { Registry } from "@sextant/observability";
import { packAny } from "@sextant/proto";
import { Secret, TypeUrl } from "@sextant/proto/envoy";
import { checkGoldenDir, metricValue } from "@sextant/testing";
import { parse, stringify } from "yaml";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import type { WatchedNames } from "../src/model/types.js";
import { configDumpDecoder } from "../src/server/debug.js";
import { XdsMetrics } from "../src/server/metrics.js";
import { type XdsType, XdsTypeTable } from "../src/server/xds-type-table.js";
import type { GenerationContext } from "../src/translate/generator.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { DeltaTestClient } from "./delta-client.js";
import { contextOf, type GoldenInput } from "./golden-inputs.js";
import { AdsTestClient, grpcNode, startDiscoveryServer } from "./harness.js";

// 1. The generator: a secret per name asked for, saying whom it is for and how many services the mesh has.
function generateTestSecrets({ push, proxy }: GenerationContext, watched: WatchedNames) {
  if (watched === "*") return [];
  return [...watched].sort().map((name) => ({
    name,
    resource: packAny(
      TypeUrl.Secret,
      Secret,
      Secret.fromPartial({
        name,
        genericSecret: {
          secret: { inlineString: `for ${proxy.namespace}; ${push.services.length} services` },
        },
      }),
    ),
    sources: [],
  }));
}

// 2. Its table entry, after the types push serves today, so it is pushed last
// (in place of the real SDS entry, which serves routers and sidecars only).
const SECRETS: XdsType = {
  typeUrl: TypeUrl.Secret,
  label: "sds",
  codec: Secret,
  wildcardWhenEmpty: false,
  changedOnlyInSotw: false,
  generators: { grpc: { needsPush: (change) => change.full, generate: generateTestSecrets } },
};
const TYPES = new XdsTypeTable([
  ...XDS_TYPES.types.filter((type) => type.typeUrl !== TypeUrl.Secret),
  SECRETS,
]);

// 3. Its golden case: testdata/test-type/<case>.secrets.out.yaml, as config_dump shows the resources.
const testdata = fileURLToPath(new URL("./testdata/test-type", import.meta.url));
const anyToJson = configDumpDecoder(TYPES);

const servicesOf = (...names: string[]) =>
  names.map((name) => ({
    hostname: `${name}.default.svc.cluster.local`,
    namespace: "default",
    name,
    ports: [{ name: "grpc", number: 9080 }],
  }));

describe("an xDS type added in a test (its generator, its table entry, its golden case)", () => {
  it("matches testdata/test-type/<case>.secrets.out.yaml", () => {
    checkGoldenDir(testdata, (testCase) => {
      const input = parse(testCase.input) as GoldenInput & { subscribe: { secrets: string[] } };
      const context = {
        push: contextOf(input),
        proxy: parseProxy(grpcNode("golden", { NAMESPACE: input.proxy?.namespace ?? "default" })),
        cache: new XdsCache(),
      };
      const resources = TYPES.generator("grpc", TypeUrl.Secret)!.generate(
        context,
        new Set(input.subscribe.secrets),
      );
      return { secrets: stringify(resources.map((r) => anyToJson(r.resource))) };
    });
  });

  it("is served over both ADS variants, pushed in the table's order, and counted under its label", async () => {
    let push: PushContext = contextOf({ services: servicesOf("a") });
    const registry = new Registry();
    const server = await startDiscoveryServer({
      metrics: new XdsMetrics(registry),
      types: TYPES,
      context: () => push,
    });
    const sotw = new AdsTestClient(server.address);
    const delta = new DeltaTestClient(server.address);
    const secretOf = (any: { value: Uint8Array }) =>
      Secret.decode(any.value).genericSecret?.secret?.inlineString;
    try {
      // A subscription by name is answered with the type's resources.
      sotw.send({ node: grpcNode("sotw"), typeUrl: TypeUrl.Secret, resourceNames: ["default"] });
      const secrets = await sotw.next();
      assert.equal(secrets.typeUrl, TypeUrl.Secret);
      assert.deepEqual(secrets.resources.map(secretOf), ["for default; 1 services"]);
      sotw.send({ typeUrl: TypeUrl.Secret, resourceNames: ["default"], responseNonce: secrets.nonce });

      // The types before it in the table are pushed before it.
      const cluster = "outbound|9080||b.default.svc.cluster.local";
      sotw.send({ typeUrl: TypeUrl.Cluster, resourceNames: [cluster] });
      const clusters = await sotw.next();
      assert.equal(clusters.resources.length, 0, "no cluster b before service b exists");
      sotw.send({ typeUrl: TypeUrl.Cluster, resourceNames: [cluster], responseNonce: clusters.nonce });
      push = contextOf({ services: servicesOf("a", "b") });
      server.discovery.push({ full: true, endpointHosts: new Set() }, Date.now());
      await server.discovery.idle();
      const [first, second] = [await sotw.next(), await sotw.next()];
      assert.deepEqual(
        [first.typeUrl, second.typeUrl],
        [TypeUrl.Cluster, TypeUrl.Secret],
        "pushed in the table's order",
      );
      assert.deepEqual(second.resources.map(secretOf), ["for default; 2 services"]);

      // Incremental: the same resources, each with its version.
      delta.send({ node: grpcNode("delta"), typeUrl: TypeUrl.Secret, resourceNamesSubscribe: ["default"] });
      const incremental = await delta.next();
      assert.deepEqual(
        incremental.resources.map((r) => [r.name, secretOf(r.resource!)]),
        [["default", "for default; 2 services"]],
      );

      const metrics = await registry.metrics();
      assert.equal(metricValue(metrics, "pilot_xds_pushes", 'type="sds"'), 3);
      assert.equal(metricValue(metrics, "pilot_xds_pushes", 'type="cds"'), 2);
    } finally {
      sotw.close();
      delta.close();
      await server.close();
    }
  });

  it("is not served to a kind of proxy its entry has no generator for", () => {
    assert.ok(TYPES.generator("grpc", TypeUrl.Secret));
    assert.equal(TYPES.generator("sidecar", TypeUrl.Secret), undefined);
  });
});
