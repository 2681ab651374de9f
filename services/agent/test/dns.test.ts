// The DNS proxy against real DNS clients: node's resolver (c-ares) and dig,
// with push played by a fake ADS server that sends NameTables, and the pod's
// nameserver played by a test resolver on loopback. Nothing leaves 127.0.0.1.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { Resolver } from "node:dns/promises";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { IncomingMessage } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { type ServerDuplexStream, status } from "@grpc/grpc-js";
import { JsonAnswer, ReadinessGate, Registry } from "@sextant/observability";
import { packAny } from "@sextant/proto";
import {
  AggregatedDiscoveryServiceService,
  type DiscoveryRequest,
  DiscoveryResponse,
} from "@sextant/proto/envoy";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import {
  eventually,
  freePort,
  type GrpcServerFixture,
  insecureClientCredentials,
  metricValue,
  startGrpcServer,
} from "@sextant/testing";
import { DNS_READY, type DnsProxyRunner, dnsProxyRunner } from "../src/dns/dns-runner.js";
import { NAME_TABLE_TYPE_URL } from "../src/dns/nds-client.js";
import { ndszRoute } from "../src/dns/ndsz.js";
import { proxyNode } from "../src/node/proxy-node.js";
import { queryTcp, queryUdp, startTestResolver, type TestResolver } from "./helpers/dns.js";
import { testLogger } from "./helpers/logger.js";

const run = promisify(execFile);

/** 60 addresses: over 512 bytes and over c-ares's 1232-byte EDNS size, well under 64 KiB. */
const MANY_IPS = Array.from({ length: 60 }, (_, i) => `10.1.${Math.floor(i / 250)}.${(i % 250) + 1}`);

const TABLE = NameTable.fromPartial({
  table: {
    "reviews.default.svc.cluster.local": {
      ips: ["10.96.0.20"],
      registry: "Kubernetes",
      shortname: "reviews",
      namespace: "default",
    },
    "ratings.other.svc.cluster.local": {
      ips: ["10.96.0.30"],
      registry: "Kubernetes",
      shortname: "ratings",
      namespace: "other",
    },
    "dual.default.svc.cluster.local": {
      ips: ["10.96.0.40", "fd00::40"],
      registry: "Kubernetes",
      shortname: "dual",
      namespace: "default",
    },
    "big.default.svc.cluster.local": {
      ips: MANY_IPS,
      registry: "Kubernetes",
      shortname: "big",
      namespace: "default",
    },
    "api.external.com": { ips: ["240.240.0.7"], registry: "External" },
    "*.wild.example": { ips: ["240.240.0.8"], registry: "External" },
  },
});

/** The part of push this test needs: an ADS server that sends the NameTable it is given and records requests. */
class FakePush {
  readonly requests: DiscoveryRequest[] = [];
  readonly #streams = new Set<ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>>();
  #fixture: GrpcServerFixture | undefined;
  #version = 0;
  /** What a new stream gets first; undefined sends nothing until send() is called. */
  table: NameTable | undefined;

  get address(): string {
    return this.#fixture!.address;
  }

  async start(): Promise<void> {
    this.#fixture = await startGrpcServer([
      {
        definition: AggregatedDiscoveryServiceService,
        implementation: {
          streamAggregatedResources: (call: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>) => {
            this.#streams.add(call);
            call.on("data", (request: DiscoveryRequest) => {
              this.requests.push(request);
              // The first request of a stream (no nonce) is answered with the current table.
              if (request.responseNonce === "" && this.table) this.#send(call, [this.table]);
            });
            call.on("error", () => {});
            call.on("cancelled", () => this.#streams.delete(call));
          },
          deltaAggregatedResources: () => {},
        },
      },
    ]);
  }

  /** Sends a table (or raw resources) on every open stream. */
  send(table: NameTable): void {
    this.table = table;
    for (const call of this.#streams) this.#send(call, [table]);
  }

  sendRaw(resources: DiscoveryResponse["resources"]): string {
    const nonce = `raw-${++this.#version}`;
    for (const call of this.#streams)
      call.write(
        DiscoveryResponse.fromPartial({ typeUrl: NAME_TABLE_TYPE_URL, versionInfo: nonce, nonce, resources }),
      );
    return nonce;
  }

  /** Ends every stream with UNAVAILABLE, as a push going away does. */
  dropStreams(): void {
    for (const call of this.#streams)
      call.emit("error", { code: status.UNAVAILABLE, details: "push restarting" });
    this.#streams.clear();
  }

  get streams(): number {
    return this.#streams.size;
  }

  #send(call: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>, tables: NameTable[]): void {
    const version = `v${++this.#version}`;
    call.write(
      DiscoveryResponse.fromPartial({
        typeUrl: NAME_TABLE_TYPE_URL,
        versionInfo: version,
        nonce: version,
        resources: tables.map((table) => packAny(NAME_TABLE_TYPE_URL, NameTable, table)),
      }),
    );
  }

  async close(): Promise<void> {
    await this.#fixture?.close();
  }
}

const node = proxyNode(
  {
    podName: "productpage-1",
    namespace: "default",
    serviceAccount: "bookinfo-productpage",
    instanceIp: "10.0.0.9",
    trustDomain: "cluster.local",
    domainSuffix: "cluster.local",
    labels: { app: "productpage" },
    envMetadata: { DNS_AUTO_ALLOCATE: "true" },
  },
  "envoy",
);

/** A DNS proxy on a free loopback port, forwarding to the given nameserver lines. */
async function startProxy(
  push: FakePush,
  nameserverLines: string[],
  options: {
    forwardBeforeTable?: boolean;
    readiness?: ReadinessGate;
    metrics?: Registry;
    forwardParallel?: boolean;
    host?: string;
    port?: number;
  } = {},
): Promise<DnsProxyRunner> {
  const dir = mkdtempSync(join(tmpdir(), "agent-dns-"));
  const resolvConf = join(dir, "resolv.conf");
  writeFileSync(
    resolvConf,
    [
      ...nameserverLines,
      "search default.svc.cluster.local svc.cluster.local cluster.local",
      "options ndots:5",
      "",
    ].join("\n"),
  );
  const runner = dnsProxyRunner({
    address: { host: options.host ?? "127.0.0.1", port: options.port ?? 0 },
    resolvConfPath: resolvConf,
    namespace: "default",
    domainSuffix: "cluster.local",
    node,
    xdsAddress: push.address,
    credentials: insecureClientCredentials,
    logger: testLogger,
    ...options,
    upstreamTimeoutMs: 2_000,
  });
  await runner.start();
  return runner;
}

/** /debug/ndsz as a caller at `remoteAddress` gets it. */
async function ndsz(proxy: DnsProxyRunner, remoteAddress: string): Promise<unknown> {
  const request = { socket: { remoteAddress } } as IncomingMessage;
  return ndszRoute(() => proxy.started)(new URLSearchParams(), request);
}

function resolverFor(port: number, host = "127.0.0.1"): Resolver {
  // One try and a short timeout: a missing reply fails the test rather than retrying.
  const resolver = new Resolver({ timeout: 3_000, tries: 1 });
  resolver.setServers([host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`]);
  return resolver;
}

describe("DNS proxy", () => {
  const push = new FakePush();
  let upstream: TestResolver;
  let proxy: DnsProxyRunner;
  let resolver: Resolver;
  const readiness = new ReadinessGate();
  const metrics = new Registry();

  before(async () => {
    await push.start();
    upstream = await startTestResolver({
      "example.org": [
        { type: "A", data: "192.0.2.10" },
        { type: "AAAA", data: "2001:db8::10" },
      ],
      // The test resolver never truncates: over UDP it sends all 60 records, past any limit.
      "many.example.org": MANY_IPS.map((data) => ({ type: "A" as const, data })),
    });
    // The table is held back: the first queries see the proxy before it has one.
    proxy = await startProxy(push, [`nameserver 127.0.0.1:${upstream.port}`], { readiness, metrics });
    resolver = resolverFor(proxy.port);
  });

  after(async () => {
    await proxy?.close();
    await upstream?.close();
    await push.close();
  });

  test("before the first table: SERVFAIL for every name and the agent is not ready; then it is", async () => {
    const reply = await queryUdp(proxy.port, "reviews.default.svc.cluster.local", "A");
    assert.equal(reply.rcode, "SERVFAIL");
    assert.deepEqual(readiness.pending, [DNS_READY]);
    assert.deepEqual(upstream.queries, [], "nothing is forwarded before the table");
    assert.deepEqual(await ndsz(proxy, "127.0.0.1"), new JsonAnswer(404, {}));
    push.send(TABLE);
    await eventually(() => proxy.proxy.hasTable, { message: "table received" });
    assert.deepEqual(readiness.pending, []);
  });

  test("the stream asks for the NameTable only, as a DNS-capturing node with its own metadata, and ACKs", async () => {
    const first = push.requests[0]!;
    assert.equal(first.typeUrl, NAME_TABLE_TYPE_URL);
    assert.deepEqual(first.resourceNames, []);
    assert.equal(first.node?.id, "sidecar~10.0.0.9~productpage-1.default~default.svc.cluster.local");
    assert.equal(first.node?.metadata?.DNS_CAPTURE, "true");
    assert.equal(first.node?.metadata?.DNS_AUTO_ALLOCATE, "true");
    const ack = await eventually(() => push.requests.find((r) => r.responseNonce !== ""));
    assert.equal(ack.typeUrl, NAME_TABLE_TYPE_URL);
    assert.equal(ack.versionInfo, ack.responseNonce);
    assert.equal(ack.errorDetail, undefined);
  });

  test("A and AAAA of a Kubernetes service by FQDN: authoritative, TTL 30", async () => {
    assert.deepEqual(await resolver.resolve4("reviews.default.svc.cluster.local", { ttl: true }), [
      { address: "10.96.0.20", ttl: 30 },
    ]);
    assert.deepEqual(await resolver.resolve6("dual.default.svc.cluster.local"), ["fd00::40"]);
    const reply = await queryUdp(proxy.port, "reviews.default.svc.cluster.local", "A");
    assert.equal(reply.authoritative, true);
    assert.equal(reply.recursionDesired, true, "RD is copied from the query");
    assert.equal(reply.rcode, "NOERROR");
  });

  test("short names as a pod's search list produces them: name, name.ns, name.ns.svc", async () => {
    assert.deepEqual(await resolver.resolve4("reviews"), ["10.96.0.20"]);
    assert.deepEqual(await resolver.resolve4("reviews.default"), ["10.96.0.20"]);
    assert.deepEqual(await resolver.resolve4("reviews.default.svc"), ["10.96.0.20"]);
    // Another namespace's service: by name.ns, not by its bare name (that would be this namespace's).
    assert.deepEqual(await resolver.resolve4("ratings.other"), ["10.96.0.30"]);
    assert.deepEqual(await resolver.resolve4("REVIEWS.Default.svc.cluster.local"), ["10.96.0.20"]);
    await assert.rejects(resolver.resolve4("ratings"), { code: "ENOTFOUND" });
    assert.ok(
      upstream.queries.some((q) => q.name === "ratings"),
      "an unknown bare name goes upstream",
    );
  });

  test("a ServiceEntry host, and its first search-domain form as a CNAME to it", async () => {
    assert.deepEqual(await resolver.resolve4("api.external.com"), ["240.240.0.7"]);
    const reply = await queryUdp(proxy.port, "api.external.com.default.svc.cluster.local", "A");
    assert.deepEqual(
      reply.answers.map((a) => [a.type, a.name, a.data, a.ttl]),
      [
        ["CNAME", "api.external.com.default.svc.cluster.local", "api.external.com", 30],
        ["A", "api.external.com", "240.240.0.7", 30],
      ],
    );
    assert.deepEqual(await resolver.resolve4("api.external.com.default.svc.cluster.local"), ["240.240.0.7"]);
  });

  test("a wildcard host answers any name under it with the name asked", async () => {
    const reply = await queryUdp(proxy.port, "a.b.wild.example", "A");
    assert.deepEqual(
      reply.answers.map((a) => [a.name, a.data]),
      [["a.b.wild.example", "240.240.0.8"]],
    );
  });

  test("a known name without an address of the asked family: NOERROR with no answer, never NXDOMAIN", async () => {
    const before = upstream.queries.length;
    const reply = await queryUdp(proxy.port, "reviews.default.svc.cluster.local", "AAAA");
    assert.equal(reply.rcode, "NOERROR");
    assert.equal(reply.authoritative, true);
    assert.deepEqual(reply.answers, []);
    await assert.rejects(resolver.resolve6("reviews.default.svc.cluster.local"), { code: "ENODATA" });
    assert.equal(upstream.queries.length, before, "not forwarded");
  });

  test("other names go to resolv.conf's nameserver: its answers, and its NXDOMAIN", async () => {
    assert.deepEqual(await resolver.resolve4("example.org", { ttl: true }), [
      { address: "192.0.2.10", ttl: 300 },
    ]);
    assert.deepEqual(await resolver.resolve6("example.org"), ["2001:db8::10"]);
    await assert.rejects(resolver.resolve4("nothing.example.org"), { code: "ENOTFOUND" });
    const reply = await queryUdp(proxy.port, "nothing.example.org", "A");
    assert.equal(reply.rcode, "NXDOMAIN");
    assert.equal(reply.authoritative, false);
    // A type the table does not answer goes upstream even for a known name (Istio's rule).
    await assert.rejects(resolver.resolveTxt("reviews.default.svc.cluster.local"), { code: "ENOTFOUND" });
    assert.ok(
      upstream.queries.some((q) => q.name === "reviews.default.svc.cluster.local" && q.type === "TXT"),
    );
  });

  test("TCP: several queries on one connection, table and forwarded, forwarded over TCP", async () => {
    const replies = await queryTcp(proxy.port, [
      { name: "reviews", type: "A" },
      { name: "example.org", type: "A" },
    ]);
    const byName = new Map(replies.map((r) => [r.question, r]));
    assert.deepEqual(
      byName.get("reviews")!.answers.map((a) => a.data),
      ["10.96.0.20"],
    );
    assert.deepEqual(
      byName.get("example.org")!.answers.map((a) => a.data),
      ["192.0.2.10"],
    );
    assert.ok(upstream.queries.some((q) => q.name === "example.org" && q.transport === "tcp"));
  });

  test("a big answer is truncated over UDP (TC, at most 512 bytes or the EDNS size) and whole over TCP", async () => {
    const plain = await queryUdp(proxy.port, "big.default.svc.cluster.local", "A");
    assert.equal(plain.truncated, true);
    assert.ok(plain.size <= 512, `${plain.size} bytes`);
    assert.ok(plain.answers.length > 0 && plain.answers.length < MANY_IPS.length);
    const edns = await queryUdp(proxy.port, "big.default.svc.cluster.local", "A", { ednsSize: 4096 });
    assert.equal(edns.truncated, false);
    assert.equal(edns.answers.length, MANY_IPS.length);
    const [tcp] = await queryTcp(proxy.port, [{ name: "big.default.svc.cluster.local", type: "A" }]);
    assert.equal(tcp!.truncated, false);
    assert.equal(tcp!.answers.length, MANY_IPS.length);
    // c-ares retries a truncated reply over TCP and gets every address.
    assert.deepEqual((await resolver.resolve4("big.default.svc.cluster.local")).sort(), [...MANY_IPS].sort());
  });

  test("an upstream reply over the client's UDP limit is cut down with TC; over TCP it passes whole", async () => {
    const udp = await queryUdp(proxy.port, "many.example.org", "A");
    assert.equal(udp.truncated, true);
    assert.ok(udp.size <= 512, `${udp.size} bytes`);
    assert.ok(udp.answers.length > 0 && udp.answers.length < MANY_IPS.length);
    const [tcp] = await queryTcp(proxy.port, [{ name: "many.example.org", type: "A" }]);
    assert.equal(tcp!.answers.length, MANY_IPS.length);
    assert.equal(tcp!.truncated, false);
  });

  test("dig: A, short name, AAAA, TCP, truncation and forwarding", async (t) => {
    const digAt = async (...args: string[]) =>
      (await run("dig", [`@127.0.0.1`, "-p", String(proxy.port), "+time=3", "+tries=1", ...args])).stdout;
    try {
      await run("dig", ["-v"]);
    } catch {
      t.skip("dig is not installed (Debian: dnsutils)");
      return;
    }
    assert.equal((await digAt("+short", "reviews.default.svc.cluster.local", "A")).trim(), "10.96.0.20");
    assert.equal((await digAt("+short", "reviews", "A")).trim(), "10.96.0.20");
    assert.equal((await digAt("+short", "dual.default.svc.cluster.local", "AAAA")).trim(), "fd00::40");
    assert.equal((await digAt("+short", "+tcp", "reviews", "A")).trim(), "10.96.0.20");
    assert.equal((await digAt("+short", "example.org", "A")).trim(), "192.0.2.10");
    const noData = await digAt("reviews.default.svc.cluster.local", "AAAA");
    assert.match(noData, /status: NOERROR/);
    assert.match(noData, /flags: qr aa rd;/);
    assert.match(noData, /ANSWER: 0,/);
    assert.match(await digAt("nothing.example.org", "A"), /status: NXDOMAIN/);
    const truncated = await digAt("+noedns", "+ignore", "big.default.svc.cluster.local", "A");
    assert.match(truncated, /flags: qr aa tc rd;/);
    const retried = await digAt("+noedns", "+short", "big.default.svc.cluster.local", "A");
    assert.equal(retried.trim().split("\n").length, MANY_IPS.length, "dig retries over TCP");
  });

  test("Istio's metrics count queries, forwarded queries and their duration", async () => {
    const text = await metrics.metrics();
    const requests = metricValue(text, "istio_agent_dns_requests_total");
    const forwarded = metricValue(text, "istio_agent_dns_upstream_requests_total");
    assert.ok(requests > forwarded && forwarded > 0, `${requests} requests, ${forwarded} forwarded`);
    assert.equal(metricValue(text, "istio_agent_dns_upstream_failures_total"), 0);
    assert.equal(metricValue(text, "istio_agent_dns_upstream_request_duration_seconds_count"), forwarded);
    await resolver.resolve4("reviews");
    const after = await metrics.metrics();
    assert.equal(metricValue(after, "istio_agent_dns_requests_total"), requests + 1);
    assert.equal(
      metricValue(after, "istio_agent_dns_upstream_requests_total"),
      forwarded,
      "a table answer is not forwarded",
    );
  });

  test("/debug/ndsz: the table with each host's other names, to local callers only", async () => {
    const view = (await ndsz(proxy, "::ffff:127.0.0.1")) as {
      table: Record<string, { altHosts?: string[]; ips: string[] }>;
    };
    assert.deepEqual(view.table["reviews.default.svc.cluster.local"], {
      ips: ["10.96.0.20"],
      registry: "Kubernetes",
      shortname: "reviews",
      namespace: "default",
      altHosts: ["reviews", "reviews.default", "reviews.default.svc"],
    });
    assert.deepEqual(view.table["ratings.other.svc.cluster.local"]?.altHosts, [
      "ratings.other",
      "ratings.other.svc",
    ]);
    assert.deepEqual(view.table["api.external.com"]?.altHosts ?? [], []);
    const refused = await ndsz(proxy, "10.0.0.7");
    assert.ok(refused instanceof JsonAnswer && refused.status === 403);
  });

  test("a new table replaces the old one", async () => {
    push.send(
      NameTable.fromPartial({
        table: {
          ...TABLE.table,
          "reviews.default.svc.cluster.local": {
            ...TABLE.table["reviews.default.svc.cluster.local"]!,
            ips: ["10.96.0.21"],
          },
        },
      }),
    );
    await eventually(async () => (await resolver.resolve4("reviews")).includes("10.96.0.21") || undefined, {
      message: "new address",
    });
  });

  test("a table that cannot be decoded is NACKed with the reason, and the last good table stays", async () => {
    const nonce = push.sendRaw([
      { typeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", value: Buffer.alloc(0) },
    ]);
    const nack = await eventually(() => push.requests.find((r) => r.responseNonce === nonce));
    assert.equal(nack.errorDetail?.code, status.INVALID_ARGUMENT);
    assert.match(
      nack.errorDetail?.message ?? "",
      /expected an Any of type\.googleapis\.com\/istio\.networking\.nds\.v1\.NameTable/,
    );
    assert.notEqual(nack.versionInfo, nonce, "the NACK names the last accepted version");
    assert.deepEqual(await resolver.resolve4("reviews"), ["10.96.0.21"]);
  });

  test("a stream push ends is opened again, and the table keeps answering meanwhile", async () => {
    const streamsBefore = push.requests.filter((r) => r.node !== undefined).length;
    push.table = TABLE;
    push.dropStreams();
    assert.deepEqual(await resolver.resolve4("reviews"), ["10.96.0.21"]);
    await eventually(
      () => push.requests.filter((r) => r.node !== undefined).length > streamsBefore || undefined,
      {
        message: "reconnected",
      },
    );
    await eventually(async () => (await resolver.resolve4("reviews")).includes("10.96.0.20") || undefined, {
      message: "table of the new stream",
    });
  });
});

describe("DNS proxy with its nameserver down", () => {
  const push = new FakePush();
  const metrics = new Registry();
  let proxy: DnsProxyRunner;

  before(async () => {
    await push.start();
    push.table = TABLE;
    // A port nothing listens on: UDP gets ICMP port unreachable, TCP a refused connection.
    proxy = await startProxy(push, [`nameserver 127.0.0.1:${await freePort()}`], { metrics });
    await eventually(() => proxy.proxy.hasTable);
  });

  after(async () => {
    await proxy?.close();
    await push.close();
  });

  test("forwarded names get SERVFAIL over UDP and TCP; table names still answer", async () => {
    const resolver = resolverFor(proxy.port);
    await assert.rejects(resolver.resolve4("example.org"), { code: "ESERVFAIL" });
    assert.equal((await queryUdp(proxy.port, "example.org", "A")).rcode, "SERVFAIL");
    const [tcp] = await queryTcp(proxy.port, [{ name: "example.org", type: "A" }]);
    assert.equal(tcp!.rcode, "SERVFAIL");
    assert.deepEqual(await resolver.resolve4("reviews"), ["10.96.0.20"]);
    assert.equal(metricValue(await metrics.metrics(), "istio_agent_dns_upstream_failures_total"), 3);
  });
});

describe("DNS proxy with two nameservers", () => {
  const push = new FakePush();
  const resolvers: TestResolver[] = [];
  const proxies: DnsProxyRunner[] = [];
  const zone = { "example.org": [{ type: "A" as const, data: "192.0.2.10" }] };

  before(async () => {
    await push.start();
    push.table = TABLE;
    resolvers.push(await startTestResolver(zone), await startTestResolver(zone));
  });

  after(async () => {
    for (const proxy of proxies) await proxy.close();
    for (const resolver of resolvers) await resolver.close();
    await push.close();
  });

  const start = async (options: { forwardParallel?: boolean }, servers: Array<number>) => {
    const proxy = await startProxy(
      push,
      servers.map((port) => `nameserver 127.0.0.1:${port}`),
      options,
    );
    proxies.push(proxy);
    await eventually(() => proxy.proxy.hasTable);
    return proxy;
  };

  test("one after the other by default: the second is asked only when the first fails", async () => {
    const [first, second] = resolvers as [TestResolver, TestResolver];
    const proxy = await start({}, [first.port, second.port]);
    assert.deepEqual(await resolverFor(proxy.port).resolve4("example.org"), ["192.0.2.10"]);
    assert.equal(first.queries.length, 1);
    assert.equal(second.queries.length, 0);
    const down = await freePort();
    const fallback = await start({}, [down, second.port]);
    assert.deepEqual(await resolverFor(fallback.port).resolve4("example.org"), ["192.0.2.10"]);
    assert.equal(second.queries.length, 1);
  });

  test("on localhost with an IPv4 and an IPv6 nameserver: listens on 127.0.0.1 and ::1, both answering", async () => {
    const [first] = resolvers as [TestResolver, TestResolver];
    const port = await freePort();
    const proxy = await startProxy(
      push,
      [`nameserver 127.0.0.1:${first.port}`, `nameserver [::1]:${await freePort()}`],
      {
        host: "localhost",
        port,
      },
    );
    proxies.push(proxy);
    await eventually(() => proxy.proxy.hasTable);
    assert.deepEqual(proxy.addresses, [`127.0.0.1:${port}`, `[::1]:${port}`]);
    assert.deepEqual(await resolverFor(port, "::1").resolve4("reviews"), ["10.96.0.20"]);
    assert.deepEqual(await resolverFor(port, "127.0.0.1").resolve4("reviews"), ["10.96.0.20"]);
  });

  test("in the port-53 mode, queries are forwarded until the first table, then the table answers", async () => {
    const [first] = resolvers as [TestResolver, TestResolver];
    const held = new FakePush();
    await held.start();
    try {
      const proxy = await startProxy(held, [`nameserver 127.0.0.1:${first.port}`], {
        forwardBeforeTable: true,
      });
      proxies.push(proxy);
      const resolver = resolverFor(proxy.port);
      assert.deepEqual(await resolver.resolve4("example.org"), ["192.0.2.10"]);
      await assert.rejects(resolver.resolve4("reviews"), { code: "ENOTFOUND" }, "upstream's answer for now");
      held.send(TABLE);
      await eventually(() => proxy.proxy.hasTable);
      assert.deepEqual(await resolver.resolve4("reviews"), ["10.96.0.20"]);
    } finally {
      await held.close();
    }
  });

  test("DNS_FORWARD_PARALLEL: every nameserver is asked at once", async () => {
    const [first, second] = resolvers as [TestResolver, TestResolver];
    const before = [first.queries.length, second.queries.length];
    const proxy = await start({ forwardParallel: true }, [first.port, second.port]);
    assert.deepEqual(await resolverFor(proxy.port).resolve4("example.org"), ["192.0.2.10"]);
    await eventually(
      () => first.queries.length === before[0]! + 1 && second.queries.length === before[1]! + 1,
    );
  });
});
