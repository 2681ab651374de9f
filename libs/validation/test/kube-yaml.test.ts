import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDocuments, validateResource } from "../src/index.js";

/** The value of a one-document input, asserting it parsed. */
function read(text: string): unknown {
  const result = parseDocuments(text, { maxDocuments: 1 });
  assert.deepEqual(result.errors, []);
  return result.documents[0]?.value;
}

/** What `v: <scalar>` reads as. */
const scalar = (text: string): unknown => (read(`v: ${text}\n`) as { v: unknown }).v;

describe("YAML read as Kubernetes reads it (sigs.k8s.io/yaml over go-yaml v2)", () => {
  it("takes go-yaml v2's YAML 1.1 booleans, in its three spellings only", () => {
    for (const t of ["y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"])
      assert.equal(scalar(t), true, t);
    for (const f of ["n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"])
      assert.equal(scalar(f), false, f);
    for (const s of ["yEs", "oN", "tRUE", "enabled"]) assert.equal(scalar(s), s);
    assert.equal(scalar('"yes"'), "yes");
    assert.equal(scalar("'on'"), "on");
  });

  it("reads octal-looking, hex, binary and underscored numbers with Go's syntax", () => {
    assert.equal(scalar("0755"), 493);
    assert.equal(scalar("0o755"), 493);
    assert.equal(scalar("0x1F"), 31);
    assert.equal(scalar("0X1f"), 31);
    assert.equal(scalar("0b101"), 5);
    assert.equal(scalar("-0b101"), -5);
    assert.equal(scalar("1_000"), 1000);
    assert.equal(scalar("+12"), 12);
    assert.equal(scalar("09"), 9); // not octal: go-yaml falls back to a float
    assert.equal(scalar("1e3"), 1000);
    assert.equal(scalar(".5"), 0.5);
    assert.equal(scalar("'0755'"), "0755");
    assert.equal(scalar("0o"), "0o");
  });

  it("keeps addresses, versions and timestamps as strings", () => {
    assert.equal(scalar("1.2.3.4"), "1.2.3.4");
    assert.equal(scalar("2001-12-14"), "2001-12-14");
    assert.equal(scalar("2001-12-14t21:59:43.10-05:00"), "2001-12-14t21:59:43.10-05:00");
    assert.equal(scalar("1.2.3"), "1.2.3");
    assert.equal(scalar("v1"), "v1");
  });

  it("reads IPv6 addresses with :: in a flow sequence as strings (YAML 1.2 would make a map)", () => {
    assert.deepEqual(read("addresses: [1.2.3.4, 001:db8::]\n"), { addresses: ["1.2.3.4", "001:db8::"] });
    assert.deepEqual(read("a: [2001:db8::1, fe80::, 10.0.0.1]\n"), {
      a: ["2001:db8::1", "fe80::", "10.0.0.1"],
    });
    assert.deepEqual(read("a: {k: 2001:db8::}\n"), { a: { k: "2001:db8::" } });
    assert.deepEqual(read("a: [\"x::\", 'y']\n"), { a: ["x::", "y"] });
    // A flow mapping's own "key: value" and JSON's "key":value are unchanged.
    assert.deepEqual(read('a: {b: c, "d":1}\n'), { a: { b: "c", d: 1 } });
  });

  it("reads IPv6 addresses in a block sequence as strings unless they end in ':' (a key there, for both readers)", () => {
    assert.deepEqual(read("a:\n- 2001:db8::1\n- fe80::1\n"), { a: ["2001:db8::1", "fe80::1"] });
    assert.deepEqual(read("a:\n- 2001:db8::\n"), { a: [{ "2001:db8:": null }] });
  });

  it("does not touch colons inside block scalars or quoted strings", () => {
    assert.deepEqual(read("a: |\n  [x::]\nb: '[y::]'\n"), { a: "[x::]\n", b: "[y::]" });
  });

  it("reads ~, null and an empty value as null", () => {
    assert.deepEqual(read("a: ~\nb: null\nc: Null\nd: NULL\ne:\n"), {
      a: null,
      b: null,
      c: null,
      d: null,
      e: null,
    });
    assert.equal(scalar("nULL"), "nULL");
  });

  it("applies << merge keys", () => {
    const text = "base: &b {app: reviews, version: v1}\nlabels:\n  <<: *b\n  version: v2\n";
    assert.deepEqual(read(text), {
      base: { app: "reviews", version: "v1" },
      labels: { app: "reviews", version: "v2" },
    });
  });

  it('turns non-string keys into strings, as sigs.k8s.io/yaml does (on: becomes "true")', () => {
    assert.deepEqual(read("8080: a\non: b\n0x10: c\n"), { "8080": "a", true: "b", "16": "c" });
  });

  it("refuses what JSON cannot hold: .inf, .nan and null keys", () => {
    for (const text of ["v: .inf\n", "v: -.Inf\n", "v: .NaN\n", "~: a\n"]) {
      const result = parseDocuments(text, { maxDocuments: 1 });
      assert.deepEqual(result.documents, [], text);
      assert.match(result.errors[0]?.message ?? "", /Kubernetes/, text);
    }
    assert.equal(scalar("'.inf'"), ".inf");
  });

  it("refuses a map key that is a collection, also through an alias (found by fuzz/: ingest-documents)", () => {
    const keys = [
      "[1, 2]: a\n",
      "? {b: 1}\n: a\n",
      "a: &x [1, 2]\n*x : 3\n",
      "a: &x {b: 1}\n? *x\n: 3\n",
      "a: &n ~\n*n : 3\n",
    ];
    for (const text of keys) {
      const result = parseDocuments(text, { maxDocuments: 1 });
      assert.deepEqual(result.documents, [], text);
      assert.match(
        result.errors[0]?.message ?? "",
        /map key .*\(Kubernetes cannot convert it to JSON\)/,
        text,
      );
    }
    assert.deepEqual(read("a: &x k\n*x : 3\n"), { a: "k", k: 3 });
  });

  it("reads a !!binary scalar as the string of its bytes, as go-yaml v2 does (found by fuzz/: ingest-documents)", () => {
    assert.deepEqual(read("v: !!binary aGVsbG8=\n!!binary a2V5 : 1\nw: !!binary /w==\n"), {
      v: "hello",
      key: 1,
      w: "\ufffd",
    });
  });

  it("a ServiceEntry with IPv6 addresses in a flow list validates", () => {
    const text = [
      "apiVersion: networking.istio.io/v1",
      "kind: ServiceEntry",
      "metadata: {name: se}",
      "spec:",
      "  hosts: [api.example.com]",
      "  addresses: [10.0.0.1, 2001:db8::, 2001:db8::/64]",
      "  resolution: STATIC",
      "  ports: [{number: 443, name: tls, protocol: TLS}]",
      "  endpoints: [{address: 2001:db8::5}]",
      "",
    ].join("\n");
    const doc = read(text) as Parameters<typeof validateResource>[0];
    assert.deepEqual(validateResource(doc).errors, []);
  });

  it("a boolean where a string is wanted is refused, as the API server's schema check refuses it", () => {
    const doc = read(
      "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: a}\nspec: {hosts: [r], exportTo: [yes], http: [{route: [{destination: {host: r}}]}]}\n",
    ) as Parameters<typeof validateResource>[0];
    assert.deepEqual(
      validateResource(doc).errors.map((e) => e.path),
      ["spec.exportTo[0]"],
    );
  });
});
