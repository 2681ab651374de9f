import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Buckets, Subjects } from "@sextant/bus";
import { configKey, credentialKey } from "@sextant/model";
import { CredentialPresence, EndpointShard, NackEvent } from "@sextant/proto";
import { SEXTANT_VERSION } from "@sextant/runtime";
import { bookinfoNetworkingDir, eventually, metricValue } from "@sextant/testing";
import {
  analysisMessages,
  get,
  ingestForSuite,
  post,
  startIngest,
  startNatsWithClient,
  virtualService,
} from "./harness.js";

const samplesDir = bookinfoNetworkingDir();
const samples = readdirSync(samplesDir)
  .filter((file) => file.endsWith(".yaml"))
  .sort()
  .map((file) => ({ file, text: readFileSync(join(samplesDir, file), "utf8") }));

describe("ingest HTTP API", () => {
  const ingest = ingestForSuite();

  it("applies every Bookinfo networking sample unchanged, and re-applying reports unchanged", async () => {
    assert.ok(samples.length >= 20, "the Bookinfo samples are missing");
    for (const { file, text } of samples) {
      const { status, json } = await post(`${ingest.url}/v1/apply`, text);
      assert.equal(status, 200, `${file}: ${JSON.stringify(json)}`);
      assert.ok(json.resources.length > 0, file);
      const again = await post(`${ingest.url}/v1/apply`, text);
      assert.equal(again.status, 200, file);
      assert.deepEqual(
        again.json.resources.map((r: { result: string }) => r.result),
        json.resources.map(() => "unchanged"),
        `${file} re-applied`,
      );
    }
  });

  it("reports created, configured and unchanged with revisions and generations", async () => {
    const first = await post(`${ingest.url}/v1/apply`, virtualService("lifecycle", { subset: "v1" }));
    assert.equal(first.json.resources[0].result, "created");
    assert.equal(first.json.resources[0].generation, 1);
    const changed = await post(`${ingest.url}/v1/apply`, virtualService("lifecycle", { subset: "v2" }));
    assert.equal(changed.json.resources[0].result, "configured");
    assert.equal(changed.json.resources[0].generation, 2);
    assert.ok(changed.json.resources[0].revision > first.json.resources[0].revision);
    const same = await post(`${ingest.url}/v1/apply`, virtualService("lifecycle", { subset: "v2" }));
    assert.equal(same.json.resources[0].result, "unchanged");
    assert.equal(same.json.resources[0].revision, changed.json.resources[0].revision);
  });

  it("gives each stored change a trace, keeps it through an unchanged apply, and traces a deletion", async () => {
    const url = `${ingest.url}/v1/trace/VirtualService/default/traced`;
    assert.equal((await get(url)).status, 404);
    await post(`${ingest.url}/v1/apply`, virtualService("traced", { subset: "v1" }));
    const first = (await get(url)).json;
    assert.match(first.stored.traceId, /^[0-9a-f]{32}$/);
    assert.match(first.stored.spanId, /^[0-9a-f]{16}$/);
    assert.equal(first.stored.generation, 1);
    assert.equal(first.stored.deleted, false);
    // No push replica runs here: the change is not built, so the trace is not complete.
    assert.deepEqual([first.builds, first.complete], [[], false]);
    await post(`${ingest.url}/v1/apply`, virtualService("traced", { subset: "v1" }));
    assert.equal(
      (await get(url)).json.stored.traceId,
      first.stored.traceId,
      "an unchanged apply is no change",
    );
    await post(`${ingest.url}/v1/apply`, virtualService("traced", { subset: "v2" }));
    const second = (await get(url)).json;
    assert.notEqual(second.stored.traceId, first.stored.traceId);
    assert.equal(second.stored.generation, 2);
    await fetch(`${ingest.url}/v1/config/VirtualService/default/traced`, { method: "DELETE" });
    const deleted = (await get(url)).json;
    assert.deepEqual([deleted.stored.deleted, deleted.stored.generation], [true, 2]);
  });

  it("lists the running service processes, itself among them, at GET /v1/members", async () => {
    const { status, json } = await get(`${ingest.url}/v1/members`);
    assert.equal(status, 200);
    const self = json.members.filter((member: { service: string }) => member.service === "ingest");
    assert.equal(self.length, 1);
    assert.equal(self[0].version, SEXTANT_VERSION);
    assert.equal(self[0].instance, ingest.service.settings.REPLICA_ID);
    assert.ok(Date.parse(self[0].started) <= Date.parse(self[0].refreshed));
  });

  it("stores nothing when any document is invalid, and lists every error", async () => {
    const body = [
      virtualService("valid-one"),
      "---",
      "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: bad-dr}\nspec:\n  host: reviews\n  subsets:\n  - name: v1\n  - name: v1\n",
      "---",
      "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: bad-vs}\nspec:\n  hosts: [a]\n  http:\n  - route:\n    - destination: {host: a}\n      weight: -1\n",
    ].join("\n");
    const { status, json } = await post(`${ingest.url}/v1/apply`, body);
    assert.equal(status, 400);
    assert.match(json.error, /2 documents are invalid; nothing was stored/);
    assert.deepEqual(
      json.errors.map((e: { document: number; kind: string; name: string; path: string }) => [
        e.document,
        e.kind,
        e.name,
        e.path,
      ]),
      [
        [1, "DestinationRule", "bad-dr", "spec.subsets[1].name"],
        [2, "VirtualService", "bad-vs", "spec.http[0].route[0].weight"],
      ],
    );
    assert.equal((await get(`${ingest.url}/v1/config/VirtualService/default/valid-one`)).status, 404);
  });

  it("validates without storing", async () => {
    const { status, json } = await post(`${ingest.url}/v1/validate`, virtualService("only-validated"));
    assert.equal(status, 200);
    assert.equal(json.valid, true);
    assert.equal((await get(`${ingest.url}/v1/config/virtualservices/default/only-validated`)).status, 404);
    const invalid = await post(`${ingest.url}/v1/validate`, "kind: Nope\nmetadata: {name: x}\n");
    assert.equal(invalid.status, 400);
    assert.equal(invalid.json.errors[0].path, "kind");
  });

  it("lists, reads and deletes resources, defaulting the namespace", async () => {
    await post(
      `${ingest.url}/v1/apply`,
      `${virtualService("listed")}---\n${virtualService("elsewhere", { namespace: "prod" })}`,
    );
    const all = await get(`${ingest.url}/v1/config?kind=VirtualService`);
    const names = all.json.items.map(
      (item: { metadata: { namespace: string; name: string } }) =>
        `${item.metadata.namespace}/${item.metadata.name}`,
    );
    assert.ok(names.includes("default/listed") && names.includes("prod/elsewhere"), names.join());
    const prod = await get(`${ingest.url}/v1/config?kind=virtualservice&namespace=prod`);
    assert.deepEqual(
      prod.json.items.map((item: { metadata: { name: string } }) => item.metadata.name),
      ["elsewhere"],
    );

    const one = await get(`${ingest.url}/v1/config/VirtualService/default/listed`);
    assert.equal(one.status, 200);
    assert.equal(one.json.kind, "VirtualService");
    assert.deepEqual(one.json.spec.hosts, ["listed"]);

    assert.equal(
      (await fetch(`${ingest.url}/v1/config/VirtualService/default/listed`, { method: "DELETE" })).status,
      200,
    );
    assert.equal((await get(`${ingest.url}/v1/config/VirtualService/default/listed`)).status, 404);
    assert.equal(
      (await fetch(`${ingest.url}/v1/config/VirtualService/default/listed`, { method: "DELETE" })).status,
      404,
    );
    assert.equal((await get(`${ingest.url}/v1/config?kind=Bogus`)).status, 400);
  });

  it("applies, reads and deletes a ProxyConfig (networking.istio.io/v1beta1 only)", async () => {
    const proxyConfig = (apiVersion: string, concurrency: number) =>
      `apiVersion: ${apiVersion}\nkind: ProxyConfig\nmetadata: {name: threads, namespace: prod}\nspec: {concurrency: ${concurrency}, image: {imageType: distroless}}\n`;
    const refused = await post(`${ingest.url}/v1/apply`, proxyConfig("networking.istio.io/v1", 2));
    assert.equal(refused.status, 400);
    assert.equal(
      (await post(`${ingest.url}/v1/apply`, proxyConfig("networking.istio.io/v1beta1", -1))).status,
      400,
    );
    assert.equal(
      (await post(`${ingest.url}/v1/apply`, proxyConfig("networking.istio.io/v1beta1", 2))).status,
      200,
    );
    const one = await get(`${ingest.url}/v1/config/ProxyConfig/prod/threads`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.json.spec, { concurrency: 2, image: { imageType: "distroless" } });
    const deleted = await fetch(`${ingest.url}/v1/config/ProxyConfig/prod/threads`, { method: "DELETE" });
    assert.equal(deleted.status, 200);
    assert.equal((await get(`${ingest.url}/v1/config/ProxyConfig/prod/threads`)).status, 404);
  });

  it("stores an EnvoyFilter (v1alpha3) with its patch value as written, and deletes it", async () => {
    const envoyFilter = `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: add-cors, namespace: default}
spec:
  workloadSelector: {labels: {app: reviews}}
  configPatches:
    - applyTo: HTTP_FILTER
      match: {context: SIDECAR_INBOUND, listener: {filterChain: {filter: {name: envoy.filters.network.http_connection_manager, subFilter: {name: envoy.filters.http.router}}}}}
      patch:
        operation: INSERT_BEFORE
        value: {name: envoy.filters.http.cors, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}
`;
    const applied = await post(`${ingest.url}/v1/apply`, envoyFilter);
    assert.equal(applied.status, 200, JSON.stringify(applied.json));
    assert.equal(applied.json.resources[0].result, "created");
    const url = `${ingest.url}/v1/config/EnvoyFilter/default/add-cors`;
    const stored = (await get(url)).json;
    assert.equal(stored.apiVersion, "networking.istio.io/v1alpha3");
    assert.deepEqual(stored.spec.configPatches[0].patch.value, {
      name: "envoy.filters.http.cors",
      typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors" },
    });
    const wrongVersion = await post(
      `${ingest.url}/v1/apply`,
      envoyFilter.replace("v1alpha3", "v1").replace("add-cors", "other"),
    );
    assert.equal(wrongVersion.status, 400, "Istio serves EnvoyFilter at v1alpha3 only");
    assert.equal((await fetch(url, { method: "DELETE" })).status, 200);
    assert.equal((await get(url)).status, 404);
  });

  it("serialises concurrent applies of one resource so that no update is lost", async () => {
    const applies = 16;
    const results = await Promise.all(
      Array.from({ length: applies }, (_, i) =>
        post(`${ingest.url}/v1/apply`, virtualService("contended", { subset: `v${i}` })),
      ),
    );
    for (const { status, json } of results) assert.equal(status, 200, JSON.stringify(json));
    const generations = results
      .map(({ json }) => json.resources[0].generation)
      .sort((a: number, b: number) => a - b);
    // Each apply changed the spec of the one before it: generations 1..N, each seen once.
    assert.deepEqual(
      generations,
      Array.from({ length: applies }, (_, i) => i + 1),
    );
    const stored = await get(`${ingest.url}/v1/config/VirtualService/default/contended`);
    assert.equal(stored.json.metadata.generation, applies);
  });

  describe("hostile input gets a clear 4xx and the service keeps serving", () => {
    const cases: Array<[string, () => string | Uint8Array, number, RegExp]> = [
      ["text that is not YAML", () => "this: is: not: yaml: [", 400, /invalid YAML/],
      ["binary bytes", () => new Uint8Array([0, 159, 146, 150, 255, 0, 1, 2]), 400, /binary|UTF-8|text/i],
      ["a 10 MB body", () => "a".repeat(10 * 1024 * 1024), 413, /larger than the limit/],
      [
        "10,000 documents",
        () => Array.from({ length: 10_000 }, () => "a: 1").join("\n---\n"),
        400,
        /too many documents/,
      ],
      ["deeply nested YAML", () => `${"- ".repeat(5000)}x`, 400, /nest/i],
      [
        "an alias bomb",
        () =>
          [
            "a: &a [x, x, x, x, x, x, x, x, x, x]",
            "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]",
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]",
            "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]",
            "e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]",
          ].join("\n"),
        400,
        /alias/i,
      ],
      [
        "a wrong kind",
        () => "apiVersion: networking.istio.io/v1\nkind: VirtualServic\nmetadata: {name: x}\nspec: {}\n",
        400,
        /VirtualServic.{0,4} is not supported/,
      ],
      [
        "a missing metadata.name",
        () => "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {}\nspec: {hosts: [a]}\n",
        400,
        /metadata.name is required/,
      ],
      ["an empty body", () => "", 400, /empty/],
    ];
    for (const [name, body, status, message] of cases) {
      it(name, async () => {
        const response = await fetch(`${ingest.url}/v1/apply`, { method: "POST", body: body() });
        assert.equal(response.status, status);
        const json = await response.json();
        assert.match(JSON.stringify(json), message);
        assert.equal((await fetch(`${ingest.url}/ready`)).status, 200);
      });
    }
  });

  it("analyses across resources and clears messages once fixed", async () => {
    await post(
      `${ingest.url}/v1/apply`,
      virtualService("gw-bound", { hosts: ["shop.example.com"], gateways: ["missing-gateway"] }),
    );
    await post(
      `${ingest.url}/v1/apply`,
      virtualService("needs-subset", { hosts: ["ratings-x"], subset: "v9" }),
    );
    await post(
      `${ingest.url}/v1/apply`,
      `${virtualService("claim-a", { hosts: ["shared"] })}---\n${virtualService("claim-b", { hosts: ["shared"] })}`,
    );
    const report = () => analysisMessages(ingest.url);
    const find = (messages: Array<Record<string, string>>, name: string, code: string) =>
      messages.find((m) => m.name === name && m.code === code);

    const messages = await eventually(async () => {
      const current = await report();
      return find(current, "claim-b", "IST0109") && find(current, "gw-bound", "IST0101") && current;
    });
    assert.equal(find(messages, "gw-bound", "IST0101")?.field, "spec.gateways[0]");
    assert.match(
      find(messages, "gw-bound", "IST0101")?.message ?? "",
      /gateway not found: "default\/missing-gateway"/,
    );
    assert.equal(
      find(messages, "needs-subset", "IST0101")?.field,
      "spec.http[0].route[0].destination.subset",
    );
    assert.ok(find(messages, "claim-a", "IST0109"));

    // Define the gateway and the subset: their messages go away.
    await post(
      `${ingest.url}/v1/apply`,
      [
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: missing-gateway}\nspec:\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['*']\n",
        "---",
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: ratings-x}\nspec:\n  host: ratings-x\n  subsets:\n  - name: v9\n    labels: {version: v9}\n",
      ].join("\n"),
    );
    await eventually(async () => {
      const current = await report();
      return !find(current, "gw-bound", "IST0101") && !find(current, "needs-subset", "IST0101");
    });
  });

  it("reports a Gateway whose selector picks no workload until the registry has one", async () => {
    await post(
      `${ingest.url}/v1/apply`,
      "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: front, namespace: shop}\nspec:\n  selector: {istio: shopgateway}\n  servers:\n  - port: {number: 80, name: http, protocol: HTTP}\n    hosts: ['*']\n",
    );
    const selectorMessage = async () =>
      (await analysisMessages(ingest.url)).find((m) => m.name === "front" && m.code === "IST0101");
    const message = await eventually(selectorMessage);
    assert.equal(message.field, "spec.selector");
    assert.equal(message.message, 'Referenced selector not found: "istio=shopgateway"');

    // discovery publishes the gateway's pod as an endpoint of its Service: the message goes.
    await (await ingest.bus.bucket(Buckets.endpoints)).put(
      "istio-system.shop-gateway.istio-system.svc.cluster.local.kubernetes",
      EndpointShard.fromPartial({
        hostname: "shop-gateway.istio-system.svc.cluster.local",
        namespace: "istio-system",
        shard: "kubernetes/Kubernetes",
        endpoints: [
          { address: "10.244.0.9", namespace: "istio-system", labels: { istio: "shopgateway", app: "shop" } },
        ],
      }),
    );
    await eventually(async () => (await selectorMessage()) === undefined);
  });

  it("reports a Gateway credentialName with no Secret in the gateway workload's namespace until discovery indexes one", async () => {
    await (await ingest.bus.bucket(Buckets.endpoints)).put(
      "edge.vault-gateway.edge.svc.cluster.local.kubernetes",
      EndpointShard.fromPartial({
        hostname: "vault-gateway.edge.svc.cluster.local",
        namespace: "edge",
        shard: "kubernetes/Kubernetes",
        endpoints: [{ address: "10.244.0.10", namespace: "edge", labels: { istio: "vaultgateway" } }],
      }),
    );
    await post(
      `${ingest.url}/v1/apply`,
      "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: vault, namespace: shop}\nspec:\n  selector: {istio: vaultgateway}\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['vault.example.com']\n    tls: {mode: SIMPLE, credentialName: vault-cred}\n",
    );
    const credentialMessage = async () =>
      (await analysisMessages(ingest.url)).find((m) => m.name === "vault" && m.code === "IST0101");
    const message = await eventually(credentialMessage);
    assert.equal(message.field, "spec.servers[0].tls.credentialName");
    assert.equal(message.message, 'Referenced credentialName not found: "vault-cred"');

    // discovery indexes the Secret in the workload's namespace (edge, not the Gateway's shop): the message goes.
    await (await ingest.bus.bucket(Buckets.credentialIndex)).put(
      credentialKey({ namespace: "edge", name: "vault-cred" }),
      CredentialPresence.fromPartial({ namespace: "edge", name: "vault-cred", hasCertificate: true }),
    );
    await eventually(async () => (await credentialMessage()) === undefined);
  });

  it("records a proxy's NACK against the config that caused it, until a new generation", async () => {
    await post(`${ingest.url}/v1/apply`, virtualService("nacked", { subset: "v1" }));
    const statusBucket = await ingest.bus.bucket(Buckets.configStatus);
    const ref = { kind: "VirtualService", namespace: "default", name: "nacked" };
    ingest.bus.subject(Subjects.nack).publish(
      NackEvent.fromPartial({
        proxyId: "grpc~10.0.0.7~app.default~default.svc.cluster.local",
        typeUrl: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
        resourceNames: ["nacked:80"],
        message: "ring hash is not supported",
        configs: [ref],
      }),
    );
    const nack = await eventually(async () =>
      (await analysisMessages(ingest.url)).find((m) => m.name === "nacked" && m.origin === "proxy"),
    );
    assert.equal(nack.code, "SXT0001");
    assert.match(
      nack.message ?? "",
      /grpc~10.0.0.7.* rejected RouteConfiguration nacked:80: ring hash is not supported/,
    );

    await post(`${ingest.url}/v1/apply`, virtualService("nacked", { subset: "v2" }));
    await eventually(async () => {
      const status = await statusBucket.get(configKey(ref));
      return (
        status?.value.observedGeneration === 2 && !status.value.messages.some((m) => m.origin === "proxy")
      );
    });
  });

  it("counts applies and rejections in /metrics", async () => {
    const text = await (await fetch(`${ingest.url}/metrics`)).text();
    const value = (name: string, ...labels: string[]) => metricValue(text, name, ...labels);
    assert.ok(
      value("sextant_ingest_applies_total", 'kind="VirtualService"', 'result="created"', 'source="http"') > 0,
    );
    assert.ok(value("sextant_ingest_applies_total", 'kind="VirtualService"', 'result="unchanged"') > 0);
    assert.ok(value("sextant_ingest_rejections_total", 'kind="VirtualService"', 'source="http"') > 0);
    assert.ok(value("sextant_ingest_apply_duration_seconds_count", 'source="http"') > 0);
  });
});

describe("ingest restarts", () => {
  it("keeps every resource across a restart of ingest and then of nats-server", async () => {
    const env = await startNatsWithClient();
    let ingest = await startIngest(env.nats.url);
    try {
      for (const { text } of samples) assert.equal((await post(`${ingest.url}/v1/apply`, text)).status, 200);
      const before = (await get(`${ingest.url}/v1/config`)).json.items;
      assert.ok(before.length > 10);

      await ingest.stop();
      ingest = await startIngest(env.nats.url);
      assert.deepEqual((await get(`${ingest.url}/v1/config`)).json.items, before);

      await env.nats.restart();
      const after = await eventually(
        async () => {
          const response = await get(`${ingest.url}/v1/config`);
          return response.status === 200 && response.json.items;
        },
        { timeoutMs: 30_000 },
      );
      assert.deepEqual(after, before);
      const reapplied = await post(`${ingest.url}/v1/apply`, samples[0]!.text);
      assert.ok(reapplied.json.resources.every((r: { result: string }) => r.result === "unchanged"));
    } finally {
      await ingest.stop();
      await env.close();
    }
  });
});
