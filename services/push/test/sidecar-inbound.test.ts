// virtualInbound (src/translate/sidecar/inbound.ts): the chains per port
// protocol and mTLS mode, the catch-all chains, which ports each inspector
// runs on, the ALPNs matched, and the addresses of IPv6 and dual-stack
// proxies. The golden cases inbound-* show whole listeners; these check
// each rule across every mode.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { EndpointShard, Service } from "@sextant/proto";
import {
  DownstreamTlsContext,
  HttpConnectionManager,
  HttpRBAC,
  Listener,
  TypeUrl,
} from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import { generateSidecarListeners } from "../src/translate/sidecar/listeners.js";
import { decode } from "./sidecar-routes.fixtures.test.js";
import { type ConfigItem, storedConfig } from "./stored-config.js";

/** The workload under test: its Service's ports (one per kind of protocol) and its address. */
const PORTS = [
  { name: "http", number: 9080, protocol: "PROTOCOL_HTTP" },
  { name: "tcp-mongo", number: 27017, protocol: "PROTOCOL_TCP" },
  // No name, no appProtocol: discovery leaves the protocol unspecified, so it is sniffed.
  { name: "", number: 8080, protocol: "PROTOCOL_UNSPECIFIED" },
  { name: "mysql", number: 3306, protocol: "PROTOCOL_MYSQL" },
];
const IP = "10.1.0.7";
const LABELS = { app: "store", version: "v1" };
/** A port no Service declares. */
const UNDECLARED = 12345;

type Port = { name: string; number: number; protocol: string };

/** A registry with the store workload at IP (its Service's ports PORTS unless given), and config as ingest stores it. */
function pushWith(config: ConfigItem[], ports: readonly Port[] = PORTS): PushContext {
  const hostname = "store.default.svc.cluster.local";
  const service = Service.fromJSON({
    hostname,
    namespace: "default",
    name: "store",
    addresses: ["10.96.0.40"],
    ports: ports.map((port) => ({ ...port, targetPort: port.number })),
    selector: { app: "store" },
    registry: "kubernetes",
  });
  const endpoints = EndpointShard.fromJSON({
    endpoints: [{ address: IP, labels: LABELS, serviceAccount: "store", namespace: "default" }],
  }).endpoints;
  return PushContext.build({
    config: storedConfig(config),
    services: new Map([[`default/${hostname}`, service]]),
    endpointShards: new Map([[hostname, { hostname, endpoints }]]),
    domainSuffix: "cluster.local",
  });
}

const mode = (mtlsMode: string, portLevelMtls?: Record<number, { mode: string }>): ConfigItem => ({
  kind: "PeerAuthentication",
  name: "store",
  spec: {
    selector: { matchLabels: { app: "store" } },
    mtls: { mode: mtlsMode },
    portLevelMtls: portLevelMtls ?? {},
  },
});

// biome-ignore lint/suspicious/noExplicitAny: decoded JSON, checked by the assertions
type Json = Record<string, any>;

function virtualInbound(
  push: PushContext,
  instanceIps = IP,
  cache = new XdsCache(),
  metadata: Json = {},
): Json {
  const proxy = parseProxy({
    id: `sidecar~${instanceIps.split(",")[0]}~store-v1-xyz.default~default.svc.cluster.local`,
    metadata: { NAMESPACE: "default", LABELS, INSTANCE_IPS: instanceIps, ...metadata },
  } as never);
  const found = generateSidecarListeners({ push, proxy, cache }, new Set(["virtualInbound"]));
  assert.equal(found.length, 1);
  return decode(found[0]!.resource, TypeUrl.Listener, Listener);
}

/** The JSON of an Any inside decoded JSON (its value is base64 there). */
function unpacked(
  any: Json,
  codec: { decode(bytes: Uint8Array): unknown; toJSON(message: never): unknown },
): Json {
  return codec.toJSON(codec.decode(Buffer.from(any.value, "base64")) as never) as Json;
}

/** A chain as `<transport> [alpns] <mtls|-> <hcm|tcp>`, for comparing whole lists at a glance. */
function describeChain(chain: Json): string {
  const match = chain.filterChainMatch ?? {};
  const alpns = match.applicationProtocols ? ` [${match.applicationProtocols.join(",")}]` : "";
  const filter = chain.filters.at(-1).name.endsWith("http_connection_manager") ? "hcm" : "tcp";
  return `${match.transportProtocol ?? "any"}${alpns} ${chain.transportSocket ? "mtls" : "-"} ${filter}`;
}

function chainsOf(listener: Json, name: string, port?: number): string[] {
  return listener.filterChains
    .filter((chain: Json) => chain.name === name && chain.filterChainMatch?.destinationPort === port)
    .map(describeChain);
}

/** Envoy's evaluation of a ListenerFilterChainMatchPredicate for a connection to port. */
function predicateMatches(predicate: Json, port: number): boolean {
  if (predicate.destinationPortRange)
    return port >= predicate.destinationPortRange.start && port < predicate.destinationPortRange.end;
  if (predicate.orMatch) return predicate.orMatch.rules.some((rule: Json) => predicateMatches(rule, port));
  if (predicate.andMatch) return predicate.andMatch.rules.every((rule: Json) => predicateMatches(rule, port));
  if (predicate.notMatch) return !predicateMatches(predicate.notMatch, port);
  return predicate.anyMatch === true;
}

/** The ports (of those given) a listener filter runs on. */
function inspectedPorts(listener: Json, filter: string, ports: readonly number[]): number[] {
  const found = listener.listenerFilters.find((f: Json) => f.name === `envoy.filters.listener.${filter}`);
  if (!found) return [];
  return ports.filter((port) => !(found.filterDisabled && predicateMatches(found.filterDisabled, port)));
}

const ALL_PORTS = [...PORTS.map((port) => port.number), UNDECLARED, 15006].sort((a, b) => a - b);

describe("virtualInbound", () => {
  it("builds Istio's chains for each port protocol under STRICT", () => {
    const listener = virtualInbound(pushWith([mode("STRICT")]));
    assert.deepEqual(chainsOf(listener, "0.0.0.0_9080", 9080), ["tls mtls hcm"]);
    assert.deepEqual(chainsOf(listener, "0.0.0.0_27017", 27017), ["tls mtls tcp"]);
    assert.deepEqual(chainsOf(listener, "0.0.0.0_8080", 8080), [
      "tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls hcm",
      "tls mtls tcp",
    ]);
    assert.deepEqual(chainsOf(listener, "virtualInbound-catchall-http"), [
      "tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls hcm",
    ]);
    assert.deepEqual(chainsOf(listener, "virtualInbound"), ["tls mtls tcp"]);
  });

  it("builds Istio's chains for each port protocol under PERMISSIVE", () => {
    const listener = virtualInbound(pushWith([mode("PERMISSIVE")]));
    assert.deepEqual(chainsOf(listener, "0.0.0.0_9080", 9080), [
      "tls [istio,istio-http/1.0,istio-http/1.1,istio-h2] mtls hcm",
      "raw_buffer - hcm",
    ]);
    assert.deepEqual(chainsOf(listener, "0.0.0.0_27017", 27017), [
      "tls [istio,istio-http/1.0,istio-http/1.1,istio-h2] mtls tcp",
      "tls - tcp",
      "raw_buffer - tcp",
    ]);
    const sniffed = [
      "tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls hcm",
      "raw_buffer [http/1.1,h2c] - hcm",
      "tls [istio] mtls tcp",
      "raw_buffer - tcp",
      "tls - tcp",
    ];
    assert.deepEqual(chainsOf(listener, "0.0.0.0_8080", 8080), sniffed);
    // The catch-all is sniffed the same way, in the same order.
    assert.deepEqual(
      [...chainsOf(listener, "virtualInbound-catchall-http"), ...chainsOf(listener, "virtualInbound")],
      sniffed,
    );
  });

  it("builds Istio's chains for each port protocol under DISABLE: plaintext only", () => {
    const listener = virtualInbound(pushWith([mode("DISABLE")]));
    assert.deepEqual(chainsOf(listener, "0.0.0.0_9080", 9080), ["raw_buffer - hcm"]);
    assert.deepEqual(chainsOf(listener, "0.0.0.0_27017", 27017), ["raw_buffer - tcp"]);
    assert.deepEqual(chainsOf(listener, "0.0.0.0_8080", 8080), [
      "raw_buffer [http/1.1,h2c] - hcm",
      "raw_buffer - tcp",
    ]);
    assert.deepEqual(chainsOf(listener, "virtualInbound-catchall-http"), ["raw_buffer [http/1.1,h2c] - hcm"]);
    assert.deepEqual(chainsOf(listener, "virtualInbound"), ["raw_buffer - tcp"]);
  });

  it("puts the blackhole chain first, then the catch-all chains, then the ports' chains by port", () => {
    const listener = virtualInbound(pushWith([]));
    const names = listener.filterChains.map((chain: Json) => chain.name);
    assert.deepEqual(
      [...new Set(names)],
      [
        "virtualInbound-blackhole",
        "virtualInbound-catchall-http",
        "virtualInbound",
        "0.0.0.0_3306",
        "0.0.0.0_8080",
        "0.0.0.0_9080",
        "0.0.0.0_27017",
      ],
    );
    assert.equal(listener.filterChains[0].filterChainMatch.destinationPort, 15006);
  });

  it("gives a port-level mode on a port no Service declares its own catch-all chains", () => {
    const listener = virtualInbound(
      pushWith([mode("PERMISSIVE", { [UNDECLARED]: { mode: "STRICT" }, 9080: { mode: "DISABLE" } })]),
    );
    assert.deepEqual(chainsOf(listener, "virtualInbound-catchall-http", UNDECLARED), [
      "tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls hcm",
    ]);
    assert.deepEqual(chainsOf(listener, "virtualInbound", UNDECLARED), ["tls mtls tcp"]);
    // 9080 is declared: its own chains take the port-level mode, and no catch-all matches it.
    assert.deepEqual(chainsOf(listener, "0.0.0.0_9080", 9080), ["raw_buffer - hcm"]);
    assert.deepEqual(chainsOf(listener, "virtualInbound", 9080), []);
  });

  it("leaves out the workload ports the proxy's own listeners take, and gives them no catch-all chains (Istio)", () => {
    // The agent's node metadata announces its static listeners' ports.
    const agentPorts = { ENVOY_STATUS_PORT: 15021, ENVOY_PROMETHEUS_PORT: 15090 };
    const ports = [15001, 15006, 15021, 15090, 9080].map((number) => ({
      name: `port${number}`,
      number,
      protocol: number === 9080 ? "PROTOCOL_HTTP" : "PROTOCOL_UNSPECIFIED",
    }));
    const strict = Object.fromEntries([15006, 15021].map((port) => [port, { mode: "STRICT" }]));
    const push = pushWith([mode("PERMISSIVE", strict)], ports);
    const listener = virtualInbound(push, IP, new XdsCache(), agentPorts);
    const byPort = (port: number) =>
      listener.filterChains.filter((c: Json) => c.filterChainMatch?.destinationPort === port);
    // Traffic to 15006 reaches the blackhole chain alone, which matches no transport protocol.
    assert.deepEqual(
      byPort(15006).map((c: Json) => [c.name, c.filterChainMatch.transportProtocol]),
      [["virtualInbound-blackhole", undefined]],
    );
    // A port-level mode for a port a service declares makes no catch-all chains there.
    for (const port of [15001, 15021, 15090]) assert.deepEqual(byPort(port), [], `port ${port}`);
    assert.deepEqual(chainsOf(listener, "0.0.0.0_9080", 9080).length, 2);
    // Without the metadata the status and Prometheus ports are the workload's, even through a shared cache.
    const cache = new XdsCache();
    virtualInbound(push, IP, cache, agentPorts);
    const plain = virtualInbound(push, IP, cache);
    assert.deepEqual(chainsOf(plain, "0.0.0.0_15021", 15021), [
      "tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls hcm",
      "tls mtls tcp",
    ]);
    assert.equal(chainsOf(plain, "0.0.0.0_15090", 15090).length, 5);
    assert.deepEqual(chainsOf(plain, "0.0.0.0_15006", 15006), []);
    assert.deepEqual(chainsOf(plain, "0.0.0.0_15001", 15001), []);
  });

  it("leaves out Sidecar ingress listeners on 15006, and on a static listener's port where Istio does", () => {
    const ingress = (number: number, protocol: string, bind?: string) => ({
      port: { number, protocol, name: `${protocol.toLowerCase()}-${number}` },
      defaultEndpoint: "127.0.0.1:8080",
      ...(bind && { bind }),
    });
    /** The chains' names and ports of virtualInbound for a Sidecar with these ingress listeners. */
    const chainPorts = (listeners: Json[], config: ConfigItem[] = []) => {
      const sidecar: ConfigItem = {
        kind: "Sidecar",
        name: "store",
        spec: { workloadSelector: { labels: { app: "store" } }, ingress: listeners },
      };
      const agentPorts = { ENVOY_STATUS_PORT: 15021, ENVOY_PROMETHEUS_PORT: 15090 };
      const listener = virtualInbound(pushWith([sidecar, ...config]), IP, new XdsCache(), agentPorts);
      const names: string[] = listener.filterChains.map(
        (c: Json) => `${c.name}:${c.filterChainMatch?.destinationPort ?? "*"}`,
      );
      return [...new Set(names)].filter((name) => !name.startsWith("virtualInbound"));
    };
    // An HTTP listener without a bind binds the wildcard in Istio, as does one bound to it: both
    // conflict with the agent's listeners. A TCP one without a bind binds the instance address.
    assert.deepEqual(chainPorts([ingress(15021, "HTTP"), ingress(15090, "TCP"), ingress(9080, "HTTP")]), [
      `${IP}_9080:9080`,
      `${IP}_15090:15090`,
    ]);
    assert.deepEqual(chainPorts([ingress(15090, "TCP", "0.0.0.0"), ingress(15021, "TCP", IP)]), [
      `${IP}_15021:15021`,
    ]);
    // 15006 is the blackhole chain's, whatever the listener (Istio builds a chain there).
    assert.deepEqual(chainPorts([ingress(15006, "TCP", IP), ingress(9080, "HTTP")]), [`${IP}_9080:9080`]);
    // A port-level mode for 15006, which no ingress listener declares, makes no catch-all chains there either.
    const strict = mode("PERMISSIVE", { 15006: { mode: "STRICT" }, [UNDECLARED]: { mode: "STRICT" } });
    const listener = virtualInbound(
      pushWith([
        strict,
        {
          kind: "Sidecar",
          name: "store",
          spec: { workloadSelector: { labels: { app: "store" } }, ingress: [ingress(9080, "HTTP")] },
        },
      ]),
    );
    assert.deepEqual(chainsOf(listener, "virtualInbound", 15006), []);
    assert.deepEqual(chainsOf(listener, "virtualInbound", UNDECLARED), ["tls mtls tcp"]);
  });

  it("sends HTTP to undeclared ports through an HCM with the authorization filters", () => {
    const policy: ConfigItem = {
      kind: "AuthorizationPolicy",
      name: "only-get",
      spec: {
        selector: { matchLabels: { app: "store" } },
        rules: [{ to: [{ operation: { methods: ["GET"] } }] }],
      },
    };
    const listener = virtualInbound(pushWith([policy]));
    for (const chain of listener.filterChains.filter(
      (c: Json) => c.name === "virtualInbound-catchall-http",
    )) {
      const hcm = unpacked(chain.filters[0].typedConfig, HttpConnectionManager);
      assert.equal(hcm.statPrefix, "InboundPassthroughCluster");
      assert.equal(hcm.serverName, "istio-envoy");
      assert.equal(hcm.proxy100Continue, true);
      assert.equal(hcm.routeConfig.name, "InboundPassthroughCluster");
      const vhost = hcm.routeConfig.virtualHosts[0];
      assert.equal(vhost.name, "inbound|http|0");
      assert.equal(vhost.routes[0].route.cluster, "InboundPassthroughCluster");
      assert.equal(vhost.routes[0].decorator.operation, ":0/*");
      assert.deepEqual(
        hcm.httpFilters.map((f: Json) => f.name),
        [
          "envoy.filters.http.rbac",
          "envoy.filters.http.fault",
          "envoy.filters.http.cors",
          "envoy.filters.http.router",
        ],
      );
      const rbac = unpacked(hcm.httpFilters[0].typedConfig, HttpRBAC);
      assert.deepEqual(Object.keys(rbac.rules.policies), ["ns[default]-policy[only-get]-rule[0]"]);
    }
  });

  it("runs tls_inspector and http_inspector only on the ports whose chains need them", () => {
    const permissive = virtualInbound(pushWith([mode("PERMISSIVE")]));
    // TLS is told apart on every port but 15006; HTTP is sniffed only where a chain
    // matches http/1.1 or h2c: the sniffed port and undeclared ones.
    assert.deepEqual(inspectedPorts(permissive, "tls_inspector", ALL_PORTS), [
      3306,
      8080,
      9080,
      UNDECLARED,
      27017,
    ]);
    assert.deepEqual(inspectedPorts(permissive, "http_inspector", ALL_PORTS), [8080, UNDECLARED]);

    const strict = virtualInbound(pushWith([mode("STRICT")]));
    assert.deepEqual(inspectedPorts(strict, "tls_inspector", ALL_PORTS), [
      3306,
      8080,
      9080,
      UNDECLARED,
      27017,
    ]);
    // Under STRICT everything is TLS, and ALPN says what is HTTP: no sniffing anywhere.
    assert.deepEqual(
      strict.listenerFilters.map((f: Json) => f.name),
      ["envoy.filters.listener.original_dst", "envoy.filters.listener.tls_inspector"],
    );

    // DISABLE, with MySQL (the server speaks first) left DISABLE and 27017 STRICT:
    // no inspector waits on 3306; tls_inspector runs only where a chain takes TLS.
    const disable = virtualInbound(pushWith([mode("DISABLE", { 27017: { mode: "STRICT" } })]));
    assert.deepEqual(inspectedPorts(disable, "tls_inspector", ALL_PORTS), [27017]);
    assert.deepEqual(inspectedPorts(disable, "http_inspector", ALL_PORTS), [8080, UNDECLARED]);
    // Istio's protocolDetectionTimeout default: 0s, no timeout (the Duration is set, and zero).
    assert.deepEqual(disable.listenerFiltersTimeout, {});
    // Istio's MAX_CONNECTIONS_PER_SOCKET_EVENT_LOOP default.
    assert.equal(disable.maxConnectionsToAcceptPerSocketEvent, 1);
  });

  it("matches no istio-peer-exchange ALPN and offers none (no metadata exchange runs); mesh cipher suites", () => {
    for (const mtlsMode of ["STRICT", "PERMISSIVE"]) {
      const listener = virtualInbound(pushWith([mode(mtlsMode)]));
      const alpns = listener.filterChains.flatMap(
        (c: Json) => c.filterChainMatch?.applicationProtocols ?? [],
      );
      assert.ok(alpns.includes("istio-http/1.1"), mtlsMode);
      if (mtlsMode === "PERMISSIVE") assert.ok(alpns.includes("istio"));
      assert.ok(!alpns.includes("istio-peer-exchange"), mtlsMode);
      for (const chain of listener.filterChains.filter((c: Json) => c.transportSocket)) {
        const context = unpacked(chain.transportSocket.typedConfig, DownstreamTlsContext);
        assert.deepEqual(context.commonTlsContext.alpnProtocols, ["h2", "http/1.1"], chain.name);
        // Istio's default mesh cipher suites, TLS 1.2 and up.
        assert.equal(context.commonTlsContext.tlsParams.cipherSuites[0], "ECDHE-ECDSA-AES256-GCM-SHA384");
        assert.equal(context.commonTlsContext.tlsParams.tlsMinimumProtocolVersion, "TLSv1_2");
      }
    }
  });

  it("binds :: for an IPv6 proxy, and 0.0.0.0 with :: as an additional address for a dual-stack one", () => {
    const push = pushWith([]);
    const ipv6 = virtualInbound(push, "fd00::7");
    assert.deepEqual(ipv6.address.socketAddress, { address: "::", portValue: 15006 });
    assert.equal(ipv6.additionalAddresses, undefined);
    assert.deepEqual(chainsOf(ipv6, "::_9080", 9080).length, 2);

    const cache = new XdsCache();
    const ipv4 = virtualInbound(push, IP, cache);
    const dual = virtualInbound(push, `${IP},fd00::7`, cache);
    assert.deepEqual(ipv4.address.socketAddress, { address: "0.0.0.0", portValue: 15006 });
    assert.equal(ipv4.additionalAddresses, undefined);
    // Same workload, ports and labels: only the addresses tell the two apart in the cache.
    assert.deepEqual(dual.address.socketAddress, { address: "0.0.0.0", portValue: 15006 });
    assert.deepEqual(dual.additionalAddresses, [
      { address: { socketAddress: { address: "::", portValue: 15006 } } },
    ]);
    assert.deepEqual(chainsOf(dual, "0.0.0.0_9080", 9080), chainsOf(ipv4, "0.0.0.0_9080", 9080));
    // No chain matches an address: both families take the same chains.
    assert.ok(dual.filterChains.every((c: Json) => !c.filterChainMatch?.prefixRanges));
  });

  it("builds no virtualInbound for a proxy whose traffic is not redirected (INTERCEPTION_MODE NONE)", () => {
    const proxy = parseProxy({
      id: `sidecar~${IP}~store-v1-xyz.default~default.svc.cluster.local`,
      metadata: { NAMESPACE: "default", LABELS, INSTANCE_IPS: IP, INTERCEPTION_MODE: "NONE" },
    } as never);
    const push = pushWith([]);
    const cache = new XdsCache();
    // A redirected proxy of the same workload first, so a shared cache would have its listener.
    virtualInbound(push, IP, cache);
    const names = generateSidecarListeners({ push, proxy, cache }, "*").map((l) => l.name);
    assert.ok(names.includes("virtualOutbound"));
    assert.ok(!names.includes("virtualInbound"));
  });
});
