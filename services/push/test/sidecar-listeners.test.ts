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
import { parseProxy } from "../src/model/proxy.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { contextOf } from "./golden-inputs.js";
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
    // As Istio: a blackhole chain for 15001 itself, then a catch-all chain (no default chain).
    assert.deepEqual(
      outbound.filterChains.map((c: { name: string }) => c.name),
      ["virtualOutbound-blackhole", "virtualOutbound-catchall-tcp"],
    );
    assert.equal(outbound.defaultFilterChain, undefined);
    assert.equal(
      inner(outbound.filterChains[1].filters[0].typedConfig, TcpProxy).cluster,
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
      inner(outbound.filterChains[1].filters[0].typedConfig, TcpProxy).cluster,
      "BlackHoleCluster",
    );
  });

  describe("outbound listeners", () => {
    const kube = (name: string, vip: string | undefined, ports: Array<Record<string, unknown>>) => ({
      hostname: `${name}.default.svc.cluster.local`,
      namespace: "default",
      name,
      addresses: vip ? [vip] : [],
      ports,
      selector: { app: name },
      resolution: "RESOLUTION_STATIC",
      registry: "kubernetes",
    });
    const external = (host: string, ports: Array<Record<string, unknown>>) => ({
      hostname: host,
      namespace: "default",
      name: host.split(".")[0],
      ports,
      resolution: "RESOLUTION_DNS",
      meshExternal: true,
      registry: "serviceentry",
    });
    const outbound = (services: Array<Record<string, unknown>>, ips = "10.1.0.9", config = "") => {
      const push = contextOf({ services, config });
      const proxy = parseProxy({
        id: `sidecar~${ips.split(",")[0]}~client-xyz.default~default.svc.cluster.local`,
        metadata: {
          NAMESPACE: "default",
          LABELS: { app: "client" },
          INSTANCE_IPS: ips,
          ENVOY_STATUS_PORT: 15021,
        },
      } as never);
      const generated = generateSidecarListeners({ push, proxy, cache: new XdsCache() }, "*");
      return new Map(generated.map((g) => [g.name, decode(g.resource, TypeUrl.Listener, Listener)]));
    };
    const clusterOf = (chain: { filters: Array<{ typedConfig: { typeUrl: string; value: string } }> }) =>
      inner(chain.filters[0]!.typedConfig, TcpProxy).cluster;
    const rdsOf = (chain: { filters: Array<{ typedConfig: { typeUrl: string; value: string } }> }) =>
      inner(chain.filters[0]!.typedConfig, HttpConnectionManager).rds.routeConfigName;

    it("sniffs an unnamed port: on its VIP by RDS <host>:<port>, on the wildcard by RDS <port>", () => {
      const services = [
        kube("metrics", "10.96.0.70", [{ name: "metrics", number: 9153, protocol: "PROTOCOL_UNSPECIFIED" }]),
        external("legacy.example.com", [{ name: "legacy", number: 7000, protocol: "PROTOCOL_UNSPECIFIED" }]),
      ];
      const sniffed = outbound(services);
      const vip = sniffed.get("10.96.0.70_9153")!;
      assert.deepEqual(
        vip.listenerFilters.map((f: { name: string }) => f.name),
        ["envoy.filters.listener.http_inspector"],
      );
      assert.equal(vip.filterChains.length, 1);
      assert.deepEqual(vip.filterChains[0].filterChainMatch, {
        transportProtocol: "raw_buffer",
        applicationProtocols: ["http/1.1", "h2c"],
      });
      assert.equal(rdsOf(vip.filterChains[0]), "metrics.default.svc.cluster.local:9153");
      // The TCP chain matches everything: it is the default chain, not PassthroughFilterChain.
      assert.equal(vip.defaultFilterChain.name, undefined);
      assert.equal(clusterOf(vip.defaultFilterChain), "outbound|9153||metrics.default.svc.cluster.local");
      const wildcard = sniffed.get("0.0.0.0_7000")!;
      assert.equal(rdsOf(wildcard.filterChains[0]), "7000");
      assert.equal(clusterOf(wildcard.defaultFilterChain), "outbound|7000||legacy.example.com");
    });

    it("merges a TCP service without a VIP into the HTTP listener of its port, as the default chain", () => {
      const listeners = outbound([
        external("legacy.example.com", [{ name: "tcp", number: 8000, protocol: "PROTOCOL_TCP" }]),
        kube("web", "10.96.0.20", [{ name: "http", number: 8000, protocol: "PROTOCOL_HTTP" }]),
      ]);
      const merged = listeners.get("0.0.0.0_8000")!;
      assert.equal(rdsOf(merged.filterChains[0]), "8000");
      assert.equal(clusterOf(merged.defaultFilterChain), "outbound|8000||legacy.example.com");
    });

    it("keeps MySQL off a port another protocol holds (server-first protocols break behind an inspector)", () => {
      const listeners = outbound([
        external("a.example.com", [{ name: "http", number: 3306, protocol: "PROTOCOL_HTTP" }]),
        external("b.example.com", [{ name: "mysql", number: 3306, protocol: "PROTOCOL_MYSQL" }]),
      ]);
      const listener = listeners.get("0.0.0.0_3306")!;
      assert.equal(listener.filterChains.length, 1);
      assert.equal(listener.defaultFilterChain.name, "PassthroughFilterChain");
    });

    it("gives a TCP route on destination subnets its own chain, and the service's chain the rest", () => {
      const config = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: default}
spec:
  hosts: [db.default.svc.cluster.local]
  tcp:
  - match:
    - destinationSubnets: [10.96.0.0/16]
    route:
    - destination: {host: db.default.svc.cluster.local, subset: v2}
`;
      const listeners = outbound(
        [kube("db", "10.96.0.90", [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }])],
        "10.1.0.9",
        config,
      );
      const listener = listeners.get("10.96.0.90_5432")!;
      assert.deepEqual(listener.filterChains[0].filterChainMatch, {
        prefixRanges: [{ addressPrefix: "10.96.0.0", prefixLen: 16 }],
      });
      assert.equal(clusterOf(listener.filterChains[0]), "outbound|5432|v2|db.default.svc.cluster.local");
      // As Istio: a chain on a route's destination subnets carries no config metadata.
      assert.equal(listener.filterChains[0].metadata, undefined);
      assert.equal(clusterOf(listener.defaultFilterChain), "outbound|5432||db.default.svc.cluster.local");
    });

    it("keeps the first of equal SNI matches, VirtualServices by name then namespace (Istio: creation time first)", () => {
      const vs = (name: string, namespace: string, destination: string) => `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespace}}
spec:
  hosts: [secure.default.svc.cluster.local]
  tls:
  - match:
    - sniHosts: [secure.default.svc.cluster.local]
    route:
    - destination: {host: ${destination}.default.svc.cluster.local}
`;
      const listeners = outbound(
        [
          kube("secure", "10.96.0.30", [{ name: "tls", number: 8443, protocol: "PROTOCOL_TLS" }]),
          kube("one", "10.96.0.31", [{ name: "tls", number: 8443, protocol: "PROTOCOL_TLS" }]),
          kube("two", "10.96.0.32", [{ name: "tls", number: 8443, protocol: "PROTOCOL_TLS" }]),
        ],
        "10.1.0.9",
        [vs("b", "alpha", "two"), vs("a", "zeta", "one")].join("---\n"),
      );
      const listener = listeners.get("10.96.0.30_8443")!;
      assert.equal(listener.filterChains.length, 1);
      assert.equal(clusterOf(listener.filterChains[0]), "outbound|8443||one.default.svc.cluster.local");
      assert.equal(
        listener.filterChains[0].metadata.filterMetadata.istio.config,
        "/apis/networking.istio.io/v1/namespaces/zeta/virtual-service/a",
      );
    });

    it("binds an IPv6-only proxy's wildcard listeners to ::", () => {
      const listeners = outbound([], "fd00::9");
      assert.deepEqual([...listeners.keys()], ["virtualInbound", "virtualOutbound"]);
      assert.equal(listeners.get("virtualOutbound")!.address.socketAddress.address, "::");
      const http = outbound(
        [kube("web", "fd00:96::20", [{ name: "http", number: 8000, protocol: "PROTOCOL_HTTP" }])],
        "fd00::9",
      );
      assert.ok(http.has("::_8000"));
      assert.equal(http.get("::_8000")!.additionalAddresses, undefined);
      // A ServiceEntry without addresses takes the proxy's family, and its TLS port the host's SNI.
      const tls = outbound(
        [external("api.example.com", [{ name: "tls", number: 443, protocol: "PROTOCOL_TLS" }])],
        "fd00::9",
      ).get("::_443")!;
      assert.deepEqual(tls.filterChains[0].filterChainMatch, { serverNames: ["api.example.com"] });
      assert.equal(tls.defaultFilterChain.name, "PassthroughFilterChain");
    });

    it("binds a dual-stack proxy's wildcard listeners on 0.0.0.0 with :: as an additional address", () => {
      type Decoded = ReturnType<typeof outbound> extends Map<string, infer L> ? L : never;
      const binds = (listener: Decoded) => [
        listener.address.socketAddress.address,
        ...(listener.additionalAddresses ?? []).map(
          (extra: { address: { socketAddress: { address: string } } }) => extra.address.socketAddress.address,
        ),
      ];
      const services = [
        kube("web", "10.96.0.20", [{ name: "http", number: 8000, protocol: "PROTOCOL_HTTP" }]),
        external("api.example.com", [{ name: "tls", number: 443, protocol: "PROTOCOL_TLS" }]),
      ];
      const dual = outbound(services, "10.1.0.9,fd00::9");
      for (const name of ["virtualOutbound", "virtualInbound", "0.0.0.0_8000", "0.0.0.0_443"])
        assert.deepEqual(binds(dual.get(name)!), ["0.0.0.0", "::"], name);
      assert.equal(
        dual.get("virtualOutbound")!.additionalAddresses[0].address.socketAddress.portValue,
        15001,
      );
      // IPv4-only proxies are unchanged; what is not an IP address in INSTANCE_IPS counts for no family.
      for (const ips of ["10.1.0.9", "10.1.0.9,client.local"]) {
        const ipv4 = outbound(services, ips);
        for (const name of ["virtualOutbound", "virtualInbound", "0.0.0.0_8000", "0.0.0.0_443"])
          assert.deepEqual(binds(ipv4.get(name)!), ["0.0.0.0"], `${ips}: ${name}`);
      }
    });

    it("binds a dual-stack Kubernetes service's cluster IPs of the proxy's families", () => {
      // IPv6 listed first (an IPv6-primary service): an IPv4-only proxy still binds the IPv4 one.
      const services = [
        {
          ...kube("db", "fd00:96::41", [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }]),
          addresses: ["fd00:96::41", "10.96.0.41"],
        },
        kube("v6only", "fd00:96::42", [{ name: "tcp", number: 5433, protocol: "PROTOCOL_TCP" }]),
      ];
      const names = (ips: string) =>
        [...outbound(services, ips).entries()]
          .filter(([name]) => !name.startsWith("virtual"))
          .map(([name, listener]) => [
            name,
            (listener.additionalAddresses ?? []).map(
              (extra: { address: { socketAddress: { address: string } } }) =>
                extra.address.socketAddress.address,
            ),
          ]);
      assert.deepEqual(names("10.1.0.9"), [
        ["10.96.0.41_5432", []],
        // A service without an address of the proxy's family keeps its first (Istio's default address).
        ["fd00:96::42_5433", []],
      ]);
      assert.deepEqual(names("fd00::9"), [
        ["fd00:96::41_5432", []],
        ["fd00:96::42_5433", []],
      ]);
      assert.deepEqual(names("10.1.0.9,fd00::9"), [
        ["fd00:96::41_5432", ["10.96.0.41"]],
        ["fd00:96::42_5433", []],
      ]);
    });

    it("binds no HTTP listener on the proxy's status port, but a TCP one on its service's VIP", () => {
      const listeners = outbound([
        kube("status", "10.96.0.21", [
          { name: "http", number: 15021, protocol: "PROTOCOL_HTTP" },
          { name: "tcp", number: 15001, protocol: "PROTOCOL_TCP" },
        ]),
      ]);
      assert.deepEqual(
        [...listeners.keys()].filter((name) => name.startsWith("0.0.0.0") || name.startsWith("10.96")),
        ["10.96.0.21_15001"],
      );
    });

    it("binds no listener of any protocol on a wildcard address at the proxy's own ports", () => {
      // Services without an address bind the wildcard whatever their protocol; Envoy would reject
      // such a listener as a duplicate of virtualOutbound, virtualInbound or a bootstrap listener.
      const services = [
        external("capture.example.com", [
          { name: "sniffed", number: 15001, protocol: "PROTOCOL_UNSPECIFIED" },
          { name: "tcp", number: 15006, protocol: "PROTOCOL_TCP" },
          { name: "tls", number: 15021, protocol: "PROTOCOL_TLS" },
          // The node names no Prometheus port: Istio's 15090 is the bootstrap's.
          { name: "tcp-metrics", number: 15090, protocol: "PROTOCOL_TCP" },
          { name: "tcp-other", number: 15002, protocol: "PROTOCOL_TCP" },
        ]),
        {
          ...kube("pods", undefined, [{ name: "tcp", number: 15001, protocol: "PROTOCOL_TCP" }]),
          resolution: "RESOLUTION_PASSTHROUGH",
        },
      ];
      for (const ips of ["10.1.0.9", "fd00::9", "10.1.0.9,fd00::9"]) {
        const push = contextOf({
          services,
          endpoints: [
            {
              hostname: "pods.default.svc.cluster.local",
              endpoints: [{ address: "10.244.0.7", ports: { tcp: 15001 } }],
            },
          ],
        });
        const proxy = parseProxy({
          id: `sidecar~${ips.split(",")[0]}~client-xyz.default~default.svc.cluster.local`,
          metadata: { NAMESPACE: "default", LABELS: { app: "client" }, INSTANCE_IPS: ips },
        } as never);
        const names = generateSidecarListeners({ push, proxy, cache: new XdsCache() }, "*").map(
          (g) => g.name,
        );
        const wildcard = ips.startsWith("fd00") ? "::" : "0.0.0.0";
        // A headless service's pod address is not the wildcard: its listener stays.
        assert.deepEqual(
          names.sort(),
          [`${wildcard}_15002`, "10.244.0.7_15001", "virtualInbound", "virtualOutbound"].sort(),
          ips,
        );
      }
    });

    it("merges a port whose address another listener binds into that listener, and binds no address twice", () => {
      const tcp = [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }];
      const dual = { ...kube("db", "fd00:96::41", tcp), addresses: ["fd00:96::41", "10.96.0.41"] };
      const addressesOf = (listeners: ReturnType<typeof outbound>) =>
        [...listeners.entries()]
          .filter(([name]) => !name.startsWith("virtual"))
          .map(([name, listener]) => [
            name,
            (listener.additionalAddresses ?? []).map(
              (extra: { address: { socketAddress: { address: string } } }) =>
                extra.address.socketAddress.address,
            ),
            listener.filterChains.map(clusterOf),
          ]);
      // The dual-stack service first: the IPv4-only one on its second address joins its listener,
      // where its chain, with the same match, loses to the first (as two services on one VIP).
      assert.deepEqual(addressesOf(outbound([dual, kube("dbv4", "10.96.0.41", tcp)], "10.1.0.9,fd00::9")), [
        ["fd00:96::41_5432", ["10.96.0.41"], ["outbound|5432||db.default.svc.cluster.local"]],
      ]);
      // The IPv4-only one first: the dual-stack one keeps its own address, not the one already bound.
      assert.deepEqual(addressesOf(outbound([kube("a", "10.96.0.41", tcp), dual], "10.1.0.9,fd00::9")), [
        ["10.96.0.41_5432", [], ["outbound|5432||a.default.svc.cluster.local"]],
        ["fd00:96::41_5432", [], ["outbound|5432||db.default.svc.cluster.local"]],
      ]);
      // A cluster IP listed twice is bound once.
      const twice = { ...kube("twice", "10.96.0.43", tcp), addresses: ["10.96.0.43", "10.96.0.43"] };
      assert.deepEqual(addressesOf(outbound([twice])), [
        ["10.96.0.43_5432", [], ["outbound|5432||twice.default.svc.cluster.local"]],
      ]);
    });

    it("keeps of each chain only what no earlier chain of its listener matches (Envoy's overlap rule)", () => {
      const config = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: secure, namespace: default}
spec:
  hosts: [secure.default.svc.cluster.local, db.default.svc.cluster.local]
  tls:
  - match:
    - sniHosts: [a.example.com]
      destinationSubnets: [10.0.0.0/8]
    route:
    - destination: {host: one.default.svc.cluster.local}
  - match:
    - sniHosts: [A.example.com, b.example.com]
      destinationSubnets: [10.1.2.3/8, 192.168.0.0/16]
    route:
    - destination: {host: two.default.svc.cluster.local}
  - match:
    - sniHosts: [b.example.com, c.example.com]
      destinationSubnets: [10.0.0.0/8]
    route:
    - destination: {host: three.default.svc.cluster.local}
  tcp:
  - match:
    - destinationSubnets: [10.0.0.0/8]
    route:
    - destination: {host: one.default.svc.cluster.local}
  - match:
    - destinationSubnets: [10.0.0.0/8, 172.16.0.0/12]
    route:
    - destination: {host: two.default.svc.cluster.local}
  - match:
    - destinationSubnets: [192.168.0.0/16, 192.168.1.0/16]
    route:
    - destination: {host: three.default.svc.cluster.local}
`;
      const listeners = outbound(
        [
          kube("secure", "10.96.0.30", [{ name: "tls", number: 8443, protocol: "PROTOCOL_TLS" }]),
          kube("db", "10.96.0.31", [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }]),
        ],
        "10.1.0.9",
        config,
      );
      const chains = (name: string) =>
        listeners
          .get(name)!
          .filterChains.map((chain: { filterChainMatch: Record<string, unknown> }) => [
            chain.filterChainMatch,
            clusterOf(chain as never).split("|")[3],
          ]);
      const range = (addressPrefix: string, prefixLen: number) => ({ addressPrefix, prefixLen });
      // The second route keeps b on 10/8 and both names on 192.168/16 (not one match's product: two
      // chains); the third keeps c only; A.example.com is a.example.com to Envoy.
      assert.deepEqual(chains("10.96.0.30_8443"), [
        [
          { serverNames: ["a.example.com"], prefixRanges: [range("10.0.0.0", 8)] },
          "one.default.svc.cluster.local",
        ],
        [
          { serverNames: ["b.example.com"], prefixRanges: [range("10.0.0.0", 8)] },
          "two.default.svc.cluster.local",
        ],
        [
          { serverNames: ["A.example.com", "b.example.com"], prefixRanges: [range("192.168.0.0", 16)] },
          "two.default.svc.cluster.local",
        ],
        [
          { serverNames: ["c.example.com"], prefixRanges: [range("10.0.0.0", 8)] },
          "three.default.svc.cluster.local",
        ],
      ]);
      // 192.168.1.0/16 is 192.168.0.0/16 to Envoy, which rejects a chain listing a range twice.
      assert.deepEqual(chains("10.96.0.31_5432"), [
        [{ prefixRanges: [range("10.0.0.0", 8)] }, "one.default.svc.cluster.local"],
        [{ prefixRanges: [range("172.16.0.0", 12)] }, "two.default.svc.cluster.local"],
        [{ prefixRanges: [range("192.168.0.0", 16)] }, "three.default.svc.cluster.local"],
      ]);
    });
  });
});
