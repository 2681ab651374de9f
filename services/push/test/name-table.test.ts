// NDS (the agent's DNS name table) and the auto-allocated ServiceEntry
// addresses it carries: the allocation is a pure function of the set of
// hosts, the generator follows the snapshot, and the type is served over
// both ADS variants through the type table. Its content per case is in the
// golden files testdata/sidecar/name-table-*.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Service } from "@sextant/proto";
import { RouteConfiguration, TypeUrl } from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import { XdsCache } from "../src/cache/xds-cache.js";
import {
  allocateAddresses,
  allocationKey,
  fnv1a32,
  needsAutoAllocation,
} from "../src/model/auto-allocation.js";
import { parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import { NAME_TABLE_TYPE_URL } from "../src/translate/sidecar/name-table.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { DeltaTestClient } from "./delta-client.js";
import { contextOf } from "./golden-inputs.js";
import { AdsTestClient, grpcNode, startDiscoveryServer } from "./harness.js";

/** A ServiceEntry host without an address, as discovery writes it. */
function entry(hostname: string, namespace = "default", extra: Record<string, unknown> = {}): Service {
  return Service.fromJSON({
    hostname,
    namespace,
    name: hostname.split(".")[0],
    ports: [{ name: "tcp", number: 5432, protocol: "PROTOCOL_TCP" }],
    resolution: "RESOLUTION_DNS",
    registry: "serviceentry",
    ...extra,
  });
}

/** The home slot of a host: the first slot it asks for. */
const homeSlot = (service: Service) => fnv1a32(allocationKey(service)) % (256 * 254);

/** The IPv4 address of a slot, as the range is laid out. */
const slotAddress = (slot: number) => `240.240.${Math.floor(slot / 254)}.${(slot % 254) + 1}`;

/** Two hosts of namespace default with the same home slot, found by search (the hash is fixed, so is the pair). */
function collidingPair(): [Service, Service] {
  const seen = new Map<number, Service>();
  for (let i = 0; ; i++) {
    const service = entry(`host-${i}.example.com`);
    const other = seen.get(homeSlot(service));
    if (other) return [other, service];
    seen.set(homeSlot(service), service);
  }
}

const sidecarNode = (metadata: Record<string, unknown> = {}) =>
  Node.fromPartial({
    id: "sidecar~10.244.1.10~app-1.default~default.svc.cluster.local",
    metadata: { NAMESPACE: "default", DNS_CAPTURE: "true", DNS_AUTO_ALLOCATE: "true", ...metadata },
  });

const tableOf = (any: { value: Uint8Array } | undefined) => {
  assert.ok(any, "a name table");
  return NameTable.decode(any.value).table;
};

describe("auto-allocated ServiceEntry addresses", () => {
  it("hashes with Go's FNV-1a (32 bits)", () => {
    assert.equal(fnv1a32(""), 0x811c9dc5);
    assert.equal(fnv1a32("a"), 0xe40c292c);
    assert.equal(fnv1a32("foobar"), 0xbf9cf968);
  });

  it("allocates only to ServiceEntry hosts without an address that are not wildcards or resolution NONE", () => {
    assert.equal(needsAutoAllocation(entry("db.example.com")), true);
    assert.equal(
      needsAutoAllocation(entry("db.example.com", "default", { resolution: "RESOLUTION_STATIC" })),
      true,
    );
    assert.equal(
      needsAutoAllocation(entry("db.example.com", "default", { addresses: ["203.0.113.1"] })),
      false,
    );
    assert.equal(needsAutoAllocation(entry("*.example.com")), false);
    assert.equal(
      needsAutoAllocation(entry("db.example.com", "default", { resolution: "RESOLUTION_PASSTHROUGH" })),
      false,
    );
    assert.equal(
      needsAutoAllocation(entry("db.default.svc.cluster.local", "default", { registry: "kubernetes" })),
      false,
    );
  });

  it("gives distinct addresses of 240.240.0.0/16, never a .0 or .255, and IPv6 ones of 2001:2::/48 from the same slot", () => {
    const services = Array.from({ length: 2000 }, (_, i) => entry(`svc-${i}.example.com`, `ns-${i % 7}`));
    const allocated = allocateAddresses(services);
    assert.equal(allocated.size, 2000);
    const ipv4 = [...allocated.values()].map((a) => a.ipv4);
    const ipv6 = [...allocated.values()].map((a) => a.ipv6);
    assert.equal(new Set(ipv4).size, 2000);
    assert.equal(new Set(ipv6).size, 2000);
    for (const address of ipv4) {
      const [a, b, c, d] = address.split(".").map(Number) as [number, number, number, number];
      assert.deepEqual([a, b], [240, 240], address);
      assert.ok(c >= 0 && c <= 255 && d >= 1 && d <= 254, address);
    }
    for (const address of ipv6) assert.match(address, /^2001:2::f0f0:[0-9a-f]{1,4}$/);
  });

  it("is the same in two push contexts built from the same hosts in different orders (replicas, restarts)", () => {
    const [first, second] = collidingPair();
    const hosts = [
      first,
      second,
      ...Array.from({ length: 300 }, (_, i) => entry(`h${i}.example.org`, `ns${i % 3}`)),
    ];
    const build = (ordered: Service[]) =>
      PushContext.build({
        config: new Map(),
        services: new Map(ordered.map((s) => [`${s.namespace}/${s.hostname}`, s])),
        endpointShards: new Map(),
        domainSuffix: "cluster.local",
      });
    const forward = build(hosts);
    const backward = build([...hosts].reverse());
    for (const host of hosts) {
      const address = forward.autoAllocatedAddresses(host);
      assert.ok(address, host.hostname);
      assert.deepEqual(backward.autoAllocatedAddresses(host), address, host.hostname);
    }
    // An endpoint-only change keeps the snapshot's allocation.
    assert.deepEqual(
      forward.withEndpoints(new Map()).autoAllocatedAddresses(first),
      forward.autoAllocatedAddresses(first),
    );
  });

  it("resolves a collision by key order: the smaller key keeps its home slot, the other takes the next free one", () => {
    const [first, second] = collidingPair();
    const [winner, loser] = allocationKey(first) < allocationKey(second) ? [first, second] : [second, first];
    const home = homeSlot(winner);
    for (const order of [
      [first, second],
      [second, first],
    ]) {
      const allocated = allocateAddresses(order);
      assert.equal(allocated.get(allocationKey(winner))?.ipv4, slotAddress(home));
      assert.equal(allocated.get(allocationKey(loser))?.ipv4, slotAddress((home + 1) % (256 * 254)));
    }
  });

  it("moves no existing host when an unrelated one is added, and only the colliding one when it collides", () => {
    const hosts = Array.from({ length: 500 }, (_, i) => entry(`api-${i}.partner.example`));
    const before = allocateAddresses(hosts);
    // A host whose home slot no host holds (home or probed).
    const taken = new Set([...before.values()].map((address) => address.ipv4));
    let added = entry("new-0.example.net");
    for (let i = 1; taken.has(slotAddress(homeSlot(added))); i++) added = entry(`new-${i}.example.net`);
    const after = allocateAddresses([...hosts, added]);
    for (const host of hosts)
      assert.deepEqual(after.get(allocationKey(host)), before.get(allocationKey(host)));

    // A host whose home slot an existing one holds: the one with the larger key moves, no other.
    const [first, second] = collidingPair();
    const withFirst = allocateAddresses([...hosts, first]);
    const withBoth = allocateAddresses([...hosts, first, second]);
    const moved = [...hosts, first].filter(
      (host) => withBoth.get(allocationKey(host))?.ipv4 !== withFirst.get(allocationKey(host))?.ipv4,
    );
    assert.ok(moved.length <= 1, `moved: ${moved.map((h) => h.hostname).join(", ")}`);
    if (moved.length === 1) assert.ok(allocationKey(moved[0]!) > allocationKey(second));
  });
});

describe("the NDS generator", () => {
  const headless = {
    hostname: "mysql.default.svc.cluster.local",
    namespace: "default",
    name: "mysql",
    ports: [{ name: "tcp", number: 3306, protocol: "PROTOCOL_TCP" }],
    resolution: "RESOLUTION_PASSTHROUGH",
    registry: "kubernetes",
  };
  const reviews = {
    hostname: "reviews.default.svc.cluster.local",
    namespace: "default",
    name: "reviews",
    addresses: ["10.96.0.12"],
    ports: [{ name: "http", number: 9080, protocol: "PROTOCOL_HTTP" }],
    resolution: "RESOLUTION_STATIC",
    registry: "kubernetes",
  };
  const endpoint = (address: string, port: string) => ({
    address,
    ports: { [port]: 1 },
    namespace: "default",
  });
  const contextWith = (mysql: string[], reviewsPods: string[]) =>
    contextOf({
      services: [headless, reviews],
      endpoints: [
        { hostname: headless.hostname, endpoints: mysql.map((a) => endpoint(a, "tcp")) },
        { hostname: reviews.hostname, endpoints: reviewsPods.map((a) => endpoint(a, "http")) },
      ],
    });
  const generate = (push: PushContext, node: Node, cache = new XdsCache()) =>
    XDS_TYPES.generator(parseProxy(node).kind, NAME_TABLE_TYPE_URL)!.generate(
      { push, proxy: parseProxy(node), cache },
      "*",
    );

  it("follows the endpoints of headless services, and gives the same bytes when only others' change", () => {
    const cache = new XdsCache();
    const [base] = generate(contextWith(["10.244.3.10"], ["10.244.1.12"]), sidecarNode(), cache);
    const [otherMoved] = generate(contextWith(["10.244.3.10"], ["10.244.1.13"]), sidecarNode(), cache);
    const [headlessMoved] = generate(contextWith(["10.244.3.11"], ["10.244.1.12"]), sidecarNode(), cache);
    assert.deepEqual(tableOf(base?.resource)[headless.hostname]?.ips, ["10.244.3.10"]);
    assert.deepEqual(otherMoved?.resource, base?.resource);
    assert.deepEqual(tableOf(headlessMoved?.resource)[headless.hostname]?.ips, ["10.244.3.11"]);
  });

  it("answers the same table whatever names are watched (a wildcard type), and nothing to proxyless gRPC", () => {
    const push = contextWith(["10.244.3.10"], []);
    const proxy = parseProxy(sidecarNode());
    const generator = XDS_TYPES.generator("sidecar", NAME_TABLE_TYPE_URL)!;
    assert.deepEqual(
      generator.generate({ push, proxy, cache: new XdsCache() }, new Set(["anything"])),
      generator.generate({ push, proxy, cache: new XdsCache() }, "*"),
    );
    assert.deepEqual(generate(push, grpcNode("grpc-client", { DNS_CAPTURE: "true" })), []);
    assert.equal(XDS_TYPES.wildcardWhenEmpty(NAME_TABLE_TYPE_URL), true);
    assert.equal(XDS_TYPES.label(NAME_TABLE_TYPE_URL), "nds");
    assert.equal(
      XDS_TYPES.types.at(-1)?.typeUrl,
      NAME_TABLE_TYPE_URL,
      "pushed after the types istiod orders",
    );
  });

  it("gives a proxy that uses auto-allocated addresses its own listeners and routes, a shared cache notwithstanding", () => {
    const push = contextOf({
      services: [
        Service.toJSON(entry("db.example.com")) as Record<string, unknown>,
        {
          ...(Service.toJSON(entry("httpbin.org")) as Record<string, unknown>),
          ports: [{ name: "http", number: 80, protocol: "PROTOCOL_HTTP" }],
        },
      ],
    });
    const allocated = (host: string) => push.autoAllocatedAddresses(entry(host))!.ipv4;
    const shared = new XdsCache();
    const resources = (node: Node, cache: XdsCache) => {
      const proxy = parseProxy(node);
      const listeners = XDS_TYPES.generator("sidecar", TypeUrl.Listener)!.generate(
        { push, proxy, cache },
        "*",
      );
      const routes = XDS_TYPES.generator("sidecar", TypeUrl.RouteConfiguration)!.generate(
        { push, proxy, cache },
        new Set(["80"]),
      );
      return {
        listeners: listeners.map((r) => r.name).sort(),
        domains: routes.flatMap((r) =>
          RouteConfiguration.decode(r.resource.value).virtualHosts.flatMap((host) => host.domains),
        ),
      };
    };
    const plain = sidecarNode({ DNS_CAPTURE: "false", DNS_AUTO_ALLOCATE: "false" });
    const auto = sidecarNode();
    const fromShared = [resources(plain, shared), resources(auto, shared)];
    assert.deepEqual(fromShared, [resources(plain, new XdsCache()), resources(auto, new XdsCache())]);
    const [withoutAuto, withAuto] = fromShared;
    assert.ok(withoutAuto?.listeners.includes("0.0.0.0_5432"));
    assert.ok(withAuto?.listeners.includes(`${allocated("db.example.com")}_5432`));
    assert.ok(!withAuto?.listeners.includes("0.0.0.0_5432"));
    assert.ok(withAuto?.domains.includes(allocated("httpbin.org")));
    assert.ok(!withoutAuto?.domains.includes(allocated("httpbin.org")));
  });

  it("is served over both ADS variants: the table on an empty first request, and again when it changes", async () => {
    const db = entry("db.example.com");
    let push = contextOf({ services: [reviews] });
    const server = await startDiscoveryServer({ context: () => push });
    const sotw = new AdsTestClient(server.address);
    const delta = new DeltaTestClient(server.address);
    try {
      sotw.send({ node: sidecarNode(), typeUrl: NAME_TABLE_TYPE_URL });
      const first = await sotw.next();
      assert.equal(first.typeUrl, NAME_TABLE_TYPE_URL);
      assert.deepEqual(Object.keys(tableOf(first.resources[0])), [reviews.hostname]);
      sotw.send({ typeUrl: NAME_TABLE_TYPE_URL, responseNonce: first.nonce, versionInfo: first.versionInfo });

      delta.send({ node: sidecarNode(), typeUrl: NAME_TABLE_TYPE_URL });
      const initial = await delta.next();
      assert.deepEqual(
        initial.resources.map((r) => r.name),
        [""],
      );
      delta.ack(initial);

      push = contextOf({ services: [reviews, Service.toJSON(db) as Record<string, unknown>] });
      server.discovery.push({ full: true, endpointHosts: new Set() }, Date.now());
      await server.discovery.idle();
      const [pushed, incremental] = [await sotw.next(), await delta.next()];
      const expected = push.autoAllocatedAddresses(db)?.ipv4;
      assert.ok(expected);
      assert.deepEqual(tableOf(pushed.resources[0])["db.example.com"]?.ips, [expected]);
      assert.notEqual(pushed.versionInfo, first.versionInfo);
      assert.deepEqual(tableOf(incremental.resources[0]?.resource)["db.example.com"]?.ips, [expected]);
      assert.notEqual(incremental.resources[0]?.version, initial.resources[0]?.version);
    } finally {
      sotw.close();
      delta.close();
      await server.close();
    }
  });
});
