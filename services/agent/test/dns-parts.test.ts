// The DNS proxy's parts on their own: the lookup table built from a
// NameTable, resolv.conf parsing, reply truncation, and its settings.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import { parseSettings, SettingsError } from "@sextant/runtime";
import { listenAddresses } from "../src/dns/dns-runner.js";
import { dnsPlan, ISTIO_RESOLV_CONF } from "../src/dns/from-settings.js";
import { LookupTable } from "../src/dns/lookup-table.js";
import { parseResolvConf } from "../src/dns/resolv-conf.js";
import { encodeWithin, packet } from "../src/dns/wire.js";
import { agentSettings } from "../src/settings.js";

const CONTEXT = {
  namespace: "default",
  domainSuffix: "cluster.local",
  search: ["default.svc.cluster.local"],
};

const names = (table: LookupTable, type: string, name: string) =>
  table.lookup(type, name)?.answers.map((answer) => `${answer.type} ${answer.name} ${answer.data}`);

describe("lookup table", () => {
  test("a Kubernetes host of another domain (a remote cluster's) answers only to its full name", () => {
    const table = new LookupTable(
      NameTable.fromPartial({
        table: {
          "reviews.default.svc.other.local": {
            ips: ["10.0.0.1"],
            registry: "Kubernetes",
            shortname: "reviews",
            namespace: "default",
          },
        },
      }),
      CONTEXT,
    );
    assert.deepEqual(names(table, "A", "reviews.default.svc.other.local"), [
      "A reviews.default.svc.other.local 10.0.0.1",
    ]);
    assert.equal(table.lookup("A", "reviews"), undefined);
    assert.equal(table.lookup("A", "reviews.default"), undefined);
  });

  test("a ServiceEntry host gets no short forms, even with a shortname", () => {
    const table = new LookupTable(
      NameTable.fromPartial({
        table: {
          "db.corp": { ips: ["240.240.0.1"], registry: "External", shortname: "db", namespace: "default" },
        },
      }),
      CONTEXT,
    );
    assert.equal(table.lookup("A", "db"), undefined);
    assert.deepEqual(names(table, "A", "db.corp."), ["A db.corp 240.240.0.1"]);
  });

  test("hosts without a valid address are left to upstream; malformed addresses are dropped", () => {
    const table = new LookupTable(
      NameTable.fromPartial({
        table: {
          "none.example": { ips: ["not-an-ip"], registry: "External" },
          "some.example": { ips: ["bad", "192.0.2.1"], registry: "External" },
        },
      }),
      CONTEXT,
    );
    assert.equal(table.lookup("A", "none.example"), undefined);
    assert.deepEqual(names(table, "A", "some.example"), ["A some.example 192.0.2.1"]);
  });

  test("no search list, no CNAME aliases; a type other than A and AAAA is not answered", () => {
    const table = new LookupTable(
      NameTable.fromPartial({ table: { "api.example": { ips: ["192.0.2.1"], registry: "External" } } }),
      { ...CONTEXT, search: [] },
    );
    assert.equal(table.lookup("A", "api.example.default.svc.cluster.local"), undefined);
    assert.equal(table.lookup("MX", "api.example"), undefined);
    assert.equal(table.size, 1);
  });

  test("a wildcard host answers under it with the name asked; its search alias chains a CNAME to the entry", () => {
    const table = new LookupTable(
      NameTable.fromPartial({ table: { "*.wild.example": { ips: ["192.0.2.9"], registry: "External" } } }),
      CONTEXT,
    );
    assert.deepEqual(names(table, "A", "x.wild.example"), ["A x.wild.example 192.0.2.9"]);
    // As Istio chains it: the CNAME names the wildcard entry, and the records keep that owner.
    assert.deepEqual(names(table, "A", "x.wild.example.default.svc.cluster.local"), [
      "CNAME x.wild.example.default.svc.cluster.local *.wild.example",
      "A *.wild.example 192.0.2.9",
    ]);
  });

  test("every address of a headless service, in random order", () => {
    const ips = Array.from({ length: 8 }, (_, i) => `10.0.0.${i + 1}`);
    const table = new LookupTable(
      NameTable.fromPartial({ table: { "h.example": { ips, registry: "External" } } }),
      CONTEXT,
    );
    const orders = new Set(
      Array.from({ length: 20 }, () =>
        table
          .lookup("A", "h.example")!
          .answers.map((a) => a.data)
          .join(),
      ),
    );
    for (const order of orders) assert.deepEqual(order.split(",").sort(), [...ips].sort());
    assert.ok(orders.size > 1, "the order changes between answers");
  });
});

describe("resolv.conf", () => {
  test("nameservers in order, the last search or domain line, comments, ports", () => {
    const conf = parseResolvConf(
      [
        "# generated",
        "nameserver 10.96.0.10",
        "; another comment",
        "search a.example b.example",
        "nameserver fd00::10",
        "nameserver not-an-address",
        "nameserver 127.0.0.1:5353",
        "nameserver [::1]:5354",
        "domain only.example",
        "search default.svc.cluster.local svc.cluster.local cluster.local",
        "options ndots:5",
      ].join("\n"),
    );
    assert.deepEqual(conf.nameservers, [
      { host: "10.96.0.10", port: 53 },
      { host: "fd00::10", port: 53 },
      { host: "127.0.0.1", port: 5353 },
      { host: "::1", port: 5354 },
    ]);
    assert.deepEqual(conf.search, ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"]);
  });
});

describe("listen addresses", () => {
  const v4 = { host: "10.96.0.10", port: 53 };
  const v6 = { host: "fd00::10", port: 53 };

  test("localhost is 127.0.0.1, ::1 or both, by the families of resolv.conf's nameservers, as Istio binds it", () => {
    assert.deepEqual(listenAddresses("localhost", [v4]), ["127.0.0.1"]);
    assert.deepEqual(listenAddresses("localhost", [v6]), ["::1"]);
    assert.deepEqual(listenAddresses("localhost", [v6, v4]), ["127.0.0.1", "::1"]);
    assert.deepEqual(listenAddresses("localhost", []), ["127.0.0.1"]);
  });

  test("an IP address is used as given", () => {
    assert.deepEqual(listenAddresses("0.0.0.0", [v6]), ["0.0.0.0"]);
  });
});

describe("port 53 (Istio's mode without iptables)", () => {
  const exists = (path: string) => path === ISTIO_RESOLV_CONF;
  const none = () => false;

  test("another port: as configured, SERVFAIL until the first table", () => {
    assert.deepEqual(dnsPlan({ host: "localhost", port: 15053 }, "/etc/resolv.conf", { uid: 0, exists }), {
      address: { host: "localhost", port: 15053 },
      resolvConfPath: "/etc/resolv.conf",
      forwardBeforeTable: false,
    });
  });

  test("as root: forwards before the first table, and reads the host's saved resolv.conf when it exists", () => {
    const plan = dnsPlan({ host: "127.0.0.1", port: 53 }, "/etc/resolv.conf", { uid: 0, exists });
    assert.deepEqual(plan, {
      address: { host: "127.0.0.1", port: 53 },
      resolvConfPath: ISTIO_RESOLV_CONF,
      forwardBeforeTable: true,
    });
    assert.equal(
      dnsPlan({ host: "127.0.0.1", port: 53 }, "/etc/resolv.conf", { uid: 0, exists: none }).resolvConfPath,
      "/etc/resolv.conf",
    );
    assert.equal(
      dnsPlan({ host: "127.0.0.1", port: 53 }, "/tmp/r.conf", { uid: 0, exists }).resolvConfPath,
      "/tmp/r.conf",
    );
  });

  test("not root: back to localhost:15053, with a warning", () => {
    const plan = dnsPlan({ host: "127.0.0.1", port: 53 }, "/etc/resolv.conf", { uid: 1337, exists });
    assert.deepEqual(plan.address, { host: "localhost", port: 15053 });
    assert.equal(plan.forwardBeforeTable, false);
    assert.match(plan.warning ?? "", /not run as root/);
  });
});

describe("truncation", () => {
  const answers = Array.from({ length: 40 }, (_, i) => ({
    type: "A" as const,
    name: "many.example",
    ttl: 30,
    data: `10.0.0.${i + 1}`,
  }));
  const opt = {
    type: "OPT" as const,
    name: ".",
    udpPayloadSize: 1232,
    extendedRcode: 0,
    ednsVersion: 0,
    flags: 0,
    flag_do: false,
    options: [],
  };

  test("keeps the question, the answers that fit and the OPT record; drops authority and additional records; sets TC", () => {
    const reply = {
      id: 7,
      type: "response" as const,
      flags: 0,
      questions: [{ type: "A" as const, name: "many.example" }],
      answers,
      authorities: [{ type: "NS" as const, name: "example", data: "ns.example" }],
      additionals: [{ type: "A" as const, name: "ns.example", data: "10.9.9.9" }, opt],
    };
    const bytes = encodeWithin(reply, 512);
    assert.ok(bytes.length <= 512);
    const decoded = packet.decode(bytes);
    assert.equal(decoded.flag_tc, true);
    assert.equal(decoded.questions?.length, 1);
    assert.ok((decoded.answers?.length ?? 0) > 0 && (decoded.answers?.length ?? 0) < answers.length);
    assert.deepEqual(decoded.authorities, []);
    assert.deepEqual(
      decoded.additionals?.map((a) => a.type),
      ["OPT"],
    );
  });

  test("a reply that fits is sent whole, without TC", () => {
    const reply = {
      id: 7,
      type: "response" as const,
      questions: [{ type: "A" as const, name: "x" }],
      answers: answers.slice(0, 2),
    };
    const decoded = packet.decode(encodeWithin(reply, 512));
    assert.equal(decoded.flag_tc, false);
    assert.equal(decoded.answers?.length, 2);
  });
});

describe("DNS settings", () => {
  const parse = (env: Record<string, string>) =>
    parseSettings(agentSettings, { INSTANCE_IP: "10.0.0.5", ...env });

  test("off by default, as in Istio; on with ISTIO_META_DNS_CAPTURE in Go's boolean forms", () => {
    assert.equal(parse({}).DNS_CAPTURE, false);
    for (const value of ["true", "1", "True", "TRUE", "t"])
      assert.equal(parse({ ISTIO_META_DNS_CAPTURE: value }).DNS_CAPTURE, true);
    assert.equal(parse({ ISTIO_META_DNS_CAPTURE: "false" }).DNS_CAPTURE, false);
    assert.equal(parse({ ISTIO_META_DNS_CAPTURE: "true" }).NODE_METADATA.DNS_CAPTURE, "true");
  });

  test("PROXY_CONFIG's proxyMetadata turns it on too (mesh config's defaultConfig), the environment winning", () => {
    const proxyConfig = JSON.stringify({ proxyMetadata: { ISTIO_META_DNS_CAPTURE: "true" } });
    assert.equal(parse({ PROXY_CONFIG: proxyConfig }).DNS_CAPTURE, true);
    assert.equal(parse({ PROXY_CONFIG: proxyConfig, ISTIO_META_DNS_CAPTURE: "false" }).DNS_CAPTURE, false);
  });

  test("a value that is not a boolean is refused, naming the variable", () => {
    assert.throws(
      () => parse({ ISTIO_META_DNS_CAPTURE: "yes" }),
      (error: unknown) => {
        assert.ok(error instanceof SettingsError);
        assert.match(error.message, /ISTIO_META_DNS_CAPTURE/);
        return true;
      },
    );
  });

  test("DNS_PROXY_ADDR: Istio's localhost:15053 by default; bad values refused", () => {
    assert.deepEqual(parse({}).DNS_PROXY_ADDR, { host: "localhost", port: 15053 });
    assert.deepEqual(parse({ DNS_PROXY_ADDR: "[::1]:5353" }).DNS_PROXY_ADDR, { host: "::1", port: 5353 });
    assert.deepEqual(parse({ DNS_PROXY_ADDR: "0.0.0.0:53" }).DNS_PROXY_ADDR, { host: "0.0.0.0", port: 53 });
    for (const bad of ["15053", "dns.local:53", "127.0.0.1:70000"])
      assert.throws(() => parse({ DNS_PROXY_ADDR: bad }), /DNS_PROXY_ADDR/);
    assert.equal(parse({}).DNS_RESOLV_CONF, "/etc/resolv.conf");
    assert.equal(parse({}).DNS_FORWARD_PARALLEL, false);
    assert.equal(parse({ DNS_FORWARD_PARALLEL: "true" }).DNS_FORWARD_PARALLEL, true);
    assert.throws(() => parse({ DNS_FORWARD_PARALLEL: "sometimes" }), /DNS_FORWARD_PARALLEL/);
  });
});
