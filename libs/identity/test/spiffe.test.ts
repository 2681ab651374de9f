import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { PeerCertificate } from "node:tls";
import { formatSpiffeId, parseSpiffeId, spiffeIdOfPeer } from "../src/index.js";

const WEB = { trustDomain: "cluster.local", namespace: "default", serviceAccount: "web" };
const peer = (subjectaltname?: string) => ({ subjectaltname }) as PeerCertificate;

describe("SPIFFE ids", () => {
  test("format and parse Istio's form, both ways", () => {
    assert.equal(formatSpiffeId(WEB), "spiffe://cluster.local/ns/default/sa/web");
    assert.deepEqual(parseSpiffeId("spiffe://cluster.local/ns/default/sa/web"), WEB);
    assert.deepEqual(parseSpiffeId("spiffe://td/ns/my.ns/sa/a_b-c"), {
      trustDomain: "td",
      namespace: "my.ns",
      serviceAccount: "a_b-c",
    });
  });

  test("parse refuses anything but spiffe://<td>/ns/<ns>/sa/<sa>", () => {
    for (const uri of [
      "",
      "spiffe://cluster.local",
      "spiffe://cluster.local/ns/default",
      "spiffe://cluster.local/ns/default/sa/web/extra",
      "spiffe://cluster.local/sa/web/ns/default",
      "spiffe://cluster.local/ns//sa/web",
      "spiffe://cluster.local/ns/default/sa/",
      "spiffe:///ns/default/sa/web",
      "SPIFFE://cluster.local/ns/default/sa/web",
      "spiffe://Cluster.Local/ns/default/sa/web",
      "spiffe://cluster.local/ns/default/sa/web?x=1",
      "spiffe://cluster.local/ns/default/sa/web#x",
      "spiffe://cluster.local/ns/de%2Ffault/sa/web",
      "spiffe://cluster.local/ns/../sa/web",
      "https://cluster.local/ns/default/sa/web",
    ])
      assert.equal(parseSpiffeId(uri), undefined, uri);
  });

  test("format refuses parts that would not parse, naming the part", () => {
    assert.throws(
      () => formatSpiffeId({ ...WEB, trustDomain: "Cluster.local" }),
      /invalid SPIFFE trust domain/,
    );
    assert.throws(() => formatSpiffeId({ ...WEB, namespace: "a/b" }), /invalid SPIFFE namespace "a\/b"/);
    assert.throws(() => formatSpiffeId({ ...WEB, serviceAccount: "" }), /invalid SPIFFE service account ""/);
  });

  test("spiffeIdOfPeer reads the single SPIFFE URI SAN of node's subjectaltname", () => {
    assert.deepEqual(spiffeIdOfPeer(peer("URI:spiffe://cluster.local/ns/default/sa/web")), WEB);
    assert.deepEqual(
      spiffeIdOfPeer(
        peer("DNS:web.default.svc, URI:spiffe://cluster.local/ns/default/sa/web, IP Address:10.0.0.1"),
      ),
      WEB,
    );
    // Node quotes values that hold a comma: such a value is one entry, not two.
    assert.equal(
      spiffeIdOfPeer(peer('URI:"spiffe://cluster.local/ns/default/sa/web\\u002c URI:x"')),
      undefined,
    );
    assert.deepEqual(
      spiffeIdOfPeer(
        peer('URI:"https://example.com/a\\u002cb", URI:spiffe://cluster.local/ns/default/sa/web'),
      ),
      WEB,
    );
  });

  test("spiffeIdOfPeer: undefined without a certificate, without a SPIFFE URI, or with two", () => {
    assert.equal(spiffeIdOfPeer(undefined), undefined);
    assert.equal(spiffeIdOfPeer({} as PeerCertificate), undefined);
    assert.equal(spiffeIdOfPeer(peer("DNS:localhost")), undefined);
    assert.equal(spiffeIdOfPeer(peer("URI:spiffe://cluster.local/web")), undefined);
    assert.equal(
      spiffeIdOfPeer(peer("URI:spiffe://cluster.local/ns/a/sa/b, URI:spiffe://cluster.local/ns/c/sa/d")),
      undefined,
    );
  });
});
