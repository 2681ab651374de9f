import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  HttpConnectionManager,
  HttpRBAC,
  Listener,
  NetworkRBAC,
  TcpProxy,
  TypeUrl,
} from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { bookinfo, decode, sidecarProxy } from "./sidecar-routes.fixtures.test.js";

function listeners(push: ReturnType<typeof bookinfo>, ip: string, labels: Record<string, string>) {
  const proxy = sidecarProxy(ip, labels);
  const generated = generateSidecarListeners({ push, proxy, cache: new XdsCache() }, "*");
  return new Map(
    generated.map((g) => [g.name, { ...g, json: decode(g.resource, TypeUrl.Listener, Listener) }]),
  );
}

function inner(
  any: { typeUrl: string; value: string },
  codec: { decode(b: Uint8Array): unknown; toJSON(m: never): unknown },
) {
  // biome-ignore lint/suspicious/noExplicitAny: decoded JSON, checked by the assertions
  return codec.toJSON(codec.decode(Buffer.from(any.value, "base64")) as never) as Record<string, any>;
}

describe("sidecar LDS", () => {
  it("builds virtualOutbound, virtualInbound and the outbound listeners, sorted", () => {
    const all = listeners(bookinfo([]), "10.1.0.1", { app: "reviews", version: "v1" });
    assert.deepEqual(
      [...all.keys()],
      ["0.0.0.0_9080", "10.96.0.13_27017", "virtualInbound", "virtualOutbound"],
    );
    const outbound = all.get("virtualOutbound")!.json;
    assert.equal(outbound.useOriginalDst, true);
    assert.equal(
      inner(outbound.defaultFilterChain.filters[0].typedConfig, TcpProxy).cluster,
      "PassthroughCluster",
    );
    const http = all.get("0.0.0.0_9080")!.json;
    const hcm = inner(http.filterChains[0].filters[0].typedConfig, HttpConnectionManager);
    assert.equal(hcm.rds.routeConfigName, "9080");
    assert.deepEqual(
      hcm.httpFilters.map((f: { name: string }) => f.name),
      ["envoy.filters.http.fault", "envoy.filters.http.cors", "envoy.filters.http.router"],
    );
    const tcp = all.get("10.96.0.13_27017")!.json;
    assert.equal(
      inner(tcp.filterChains[0].filters[0].typedConfig, TcpProxy).cluster,
      "outbound|27017||mongodb.default.svc.cluster.local",
    );
    // Reviews' inbound port: PERMISSIVE by default (mTLS for Istio's ALPNs, plaintext otherwise).
    const inbound = all.get("virtualInbound")!.json;
    const chains = inbound.filterChains.filter((c: { name: string }) => c.name === "0.0.0.0_9080");
    assert.deepEqual(
      chains.map(
        (c: { filterChainMatch: { transportProtocol: string } }) => c.filterChainMatch.transportProtocol,
      ),
      ["tls", "raw_buffer"],
    );
    assert.ok(chains[0].transportSocket);
    assert.equal(chains[1].transportSocket, undefined);
  });

  it("applies PeerAuthentication STRICT and AuthorizationPolicy DENY before ALLOW on the inbound chains", () => {
    const push = bookinfo([
      {
        kind: "PeerAuthentication",
        name: "default",
        namespace: "istio-system",
        spec: { mtls: { mode: "STRICT" } },
      },
      {
        kind: "PeerAuthentication",
        name: "mongodb",
        spec: {
          selector: { matchLabels: { app: "mongodb" } },
          portLevelMtls: { 27017: { mode: "DISABLE" } },
        },
      },
      {
        kind: "AuthorizationPolicy",
        name: "allow-productpage",
        spec: {
          selector: { matchLabels: { app: "reviews" } },
          action: "ALLOW",
          rules: [
            {
              from: [{ source: { principals: ["cluster.local/ns/default/sa/bookinfo-productpage"] } }],
              to: [{ operation: { methods: ["GET"], paths: ["/reviews*"] } }],
            },
          ],
        },
      },
      {
        kind: "AuthorizationPolicy",
        name: "deny-ip",
        spec: { action: "DENY", rules: [{ from: [{ source: { ipBlocks: ["10.9.0.0/16"] } }] }] },
      },
    ]);
    const reviews = listeners(push, "10.1.0.1", { app: "reviews", version: "v1" }).get("virtualInbound")!;
    const chains = reviews.json.filterChains.filter((c: { name: string }) => c.name === "0.0.0.0_9080");
    assert.equal(chains.length, 1);
    assert.equal(chains[0].filterChainMatch.transportProtocol, "tls");
    const hcm = inner(chains[0].filters[0].typedConfig, HttpConnectionManager);
    assert.equal(hcm.routeConfig.name, "inbound|9080||");
    assert.equal(hcm.routeConfig.virtualHosts[0].routes[0].route.cluster, "inbound|9080||");
    assert.deepEqual(
      hcm.httpFilters.map((f: { name: string }) => f.name),
      [
        "envoy.filters.http.rbac",
        "envoy.filters.http.rbac",
        "envoy.filters.http.fault",
        "envoy.filters.http.cors",
        "envoy.filters.http.router",
      ],
    );
    const deny = inner(hcm.httpFilters[0].typedConfig, HttpRBAC);
    const allow = inner(hcm.httpFilters[1].typedConfig, HttpRBAC);
    assert.equal(deny.rules.action, "DENY");
    assert.deepEqual(Object.keys(deny.rules.policies), ["ns[default]-policy[deny-ip]-rule[0]"]);
    assert.equal(allow.rules.action, undefined); // ALLOW is the enum's zero value
    const policy = allow.rules.policies["ns[default]-policy[allow-productpage]-rule[0]"];
    assert.deepEqual(policy.principals[0].andIds.ids[0].orIds.ids[0].authenticated.principalName, {
      exact: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage",
    });
    assert.deepEqual(
      reviews.sources.map((s) => `${s.kind}/${s.namespace}/${s.name}`),
      [
        "PeerAuthentication/istio-system/default",
        "AuthorizationPolicy/default/deny-ip",
        "AuthorizationPolicy/default/allow-productpage",
      ],
    );

    // mongodb: port-level DISABLE → one plaintext chain; TCP gets the network RBAC (DENY) then tcp_proxy.
    const mongo = listeners(push, "10.1.0.5", { app: "mongodb", version: "v1" }).get("virtualInbound")!;
    const mongoChains = mongo.json.filterChains.filter((c: { name: string }) => c.name === "0.0.0.0_27017");
    assert.equal(mongoChains.length, 1);
    assert.equal(mongoChains[0].transportSocket, undefined);
    assert.deepEqual(
      mongoChains[0].filters.map((f: { name: string }) => f.name),
      ["envoy.filters.network.rbac", "envoy.filters.network.tcp_proxy"],
    );
    assert.equal(inner(mongoChains[0].filters[0].typedConfig, NetworkRBAC).statPrefix, "tcp.");
  });

  it("sends BlackHoleCluster from virtualOutbound under REGISTRY_ONLY", () => {
    const push = bookinfo([
      { kind: "Sidecar", name: "default", spec: { outboundTrafficPolicy: { mode: "REGISTRY_ONLY" } } },
    ]);
    const outbound = listeners(push, "10.1.0.4", { app: "productpage" }).get("virtualOutbound")!.json;
    assert.equal(
      inner(outbound.defaultFilterChain.filters[0].typedConfig, TcpProxy).cluster,
      "BlackHoleCluster",
    );
  });
});
