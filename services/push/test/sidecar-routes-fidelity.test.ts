// Routes a real Envoy accepts: config that validation refuses (or that a
// route configuration cannot hold) never reaches a RouteConfiguration, since
// Envoy rejects the whole configuration and with it every route in it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Service } from "@sextant/proto";
import { CorsPolicy } from "@sextant/proto/envoy";
import { PushContext } from "../src/model/push-context.js";
import { bookinfo, productpageRoutes, ratingsVirtualService } from "./sidecar-routes.fixtures.test.js";

// biome-ignore lint/suspicious/noExplicitAny: decoded JSON, checked by the assertions
type Json = Record<string, any>;

/** The routes of ratings' virtual host under a VirtualService for ratings with these HTTP routes. */
function ratingsRoutes(http: unknown[]): Json[] {
  const { json } = productpageRoutes(bookinfo([ratingsVirtualService(http)]));
  return json.virtualHosts.find((v: Json) => v.name.startsWith("ratings.")).routes;
}

const ratings = [{ destination: { host: "ratings" } }];

describe("sidecar RDS fidelity", () => {
  it("never emits Host or a pseudo-header as a header operation; the request authority is the host rewrite", () => {
    const [route] = ratingsRoutes([
      {
        headers: {
          request: {
            set: { HOST: "h.example", ":path": "/x", "x-a": "1" },
            add: { ":authority": "add-loses-to-set", "x-b": "2" },
            remove: ["host", ":authority", "x-c"],
          },
          response: { set: { host: "r.example", ":status": "500", "x-d": "3" }, remove: [":status", "x-e"] },
        },
        route: ratings,
      },
    ]);
    assert.equal(route!.route.hostRewriteLiteral, "h.example");
    assert.deepEqual(
      route!.requestHeadersToAdd.map((h: Json) => h.header.key),
      ["x-a", "x-b"],
    );
    assert.deepEqual(route!.requestHeadersToRemove, ["x-c"]);
    assert.deepEqual(
      route!.responseHeadersToAdd.map((h: Json) => h.header.key),
      ["x-d"],
    );
    assert.deepEqual(route!.responseHeadersToRemove, ["x-e"]);
  });

  it("takes the authority as Istio: rewrite.authority, then the route's header, then its one destination's", () => {
    const [rewrite, routeHeader, destinationHeader, redirect] = ratingsRoutes([
      {
        match: [{ uri: { prefix: "/a" } }],
        rewrite: { authority: "rewrite.example" },
        headers: { request: { set: { host: "header.example" } } },
        route: ratings,
      },
      {
        match: [{ uri: { prefix: "/b" } }],
        headers: { request: { set: { host: "route.example" } } },
        route: [
          { destination: { host: "ratings" }, headers: { request: { set: { host: "dest.example" } } } },
        ],
      },
      {
        match: [{ uri: { prefix: "/c" } }],
        route: [
          { destination: { host: "ratings" }, headers: { request: { add: { Host: "dest.example" } } } },
        ],
      },
      { headers: { request: { set: { host: "ignored.example" } } }, redirect: { uri: "/moved" } },
    ]);
    assert.equal(rewrite!.route.hostRewriteLiteral, "rewrite.example");
    assert.equal(routeHeader!.route.hostRewriteLiteral, "route.example");
    assert.equal(destinationHeader!.route.hostRewriteLiteral, "dest.example");
    assert.equal(destinationHeader!.requestHeadersToAdd, undefined);
    assert.equal(redirect!.redirect.hostRedirect, undefined);
    assert.equal(redirect!.requestHeadersToAdd, undefined);
  });

  it('turns a regex "*" into a present match for headers, method and query parameters', () => {
    const [route] = ratingsRoutes([
      {
        match: [
          {
            headers: { "x-a": { regex: "*" } },
            method: { regex: "*" },
            queryParams: { debug: { regex: "*" } },
          },
        ],
        route: ratings,
      },
    ]);
    assert.deepEqual(route!.match.headers, [
      { name: "x-a", presentMatch: true },
      { name: ":method", presentMatch: true },
    ]);
    assert.deepEqual(route!.match.queryParameters, [{ name: "debug", presentMatch: true }]);
  });

  it("turns an empty prefix, which Envoy's StringMatcher rejects, into a present match (not the uri's)", () => {
    const [route] = ratingsRoutes([
      {
        match: [
          {
            uri: { prefix: "" },
            headers: { "x-a": { prefix: "" } },
            withoutHeaders: { "x-b": { prefix: "" } },
            method: { prefix: "" },
            authority: { prefix: "" },
            scheme: { prefix: "" },
            queryParams: { debug: { prefix: "" } },
          },
        ],
        route: ratings,
      },
    ]);
    assert.equal(route!.match.prefix, "");
    assert.deepEqual(route!.match.headers, [
      { name: "x-a", presentMatch: true },
      { name: "x-b", presentMatch: true, invertMatch: true },
      { name: ":method", presentMatch: true },
      { name: ":authority", presentMatch: true },
      { name: ":scheme", presentMatch: true },
    ]);
    assert.deepEqual(route!.match.queryParameters, [{ name: "debug", presentMatch: true }]);
  });

  it("never emits a regex RE2 refuses: the match or route carrying it is left out", () => {
    const routes = ratingsRoutes([
      {
        name: "lookahead",
        match: [{ headers: { "x-user": { regex: "(?=admin).*" } } }, { uri: { prefix: "/ok" } }],
        route: ratings,
      },
      { name: "empty", match: [{ uri: { regex: "" } }], route: ratings },
      { name: "star-uri", match: [{ uri: { regex: "*" } }], route: ratings },
      {
        name: "bad-rewrite",
        rewrite: { uriRegexRewrite: { match: "[a-", rewrite: "/x" } },
        route: ratings,
      },
      { name: "last", route: ratings },
    ]);
    assert.deepEqual(
      routes.map((r) => [r.name, r.match.prefix]),
      [
        ["lookahead", "/ok"],
        ["last", "/"],
      ],
    );
  });

  it("never emits a CORS origin regex RE2 refuses", () => {
    const [route] = ratingsRoutes([
      {
        corsPolicy: {
          allowOrigins: [{ regex: "https://(?!evil).*" }, { regex: "https://.*\\.example\\.com" }],
        },
        route: ratings,
      },
    ]);
    const packed = route!.typedPerFilterConfig["envoy.filters.http.cors"];
    const cors = CorsPolicy.toJSON(CorsPolicy.decode(Buffer.from(packed.value, "base64"))) as Json;
    assert.deepEqual(cors.allowOriginStringMatch, [{ safeRegex: { regex: "https://.*\\.example\\.com" } }]);
  });

  it("never emits a direct response over 1 MiB, and allows up to 1 MiB on the route configuration", () => {
    const push = bookinfo([
      ratingsVirtualService([
        {
          name: "huge",
          match: [{ uri: { prefix: "/huge" } }],
          directResponse: { status: 200, body: { string: "x".repeat(1024 * 1024 + 1) } },
        },
        {
          name: "large",
          match: [{ uri: { prefix: "/large" } }],
          directResponse: { status: 200, body: { string: "x".repeat(1024 * 1024) } },
        },
        { name: "rest", route: ratings },
      ]),
    ]);
    const { json } = productpageRoutes(push);
    assert.equal(json.maxDirectResponseBodySizeBytes, 1024 * 1024);
    const routes = json.virtualHosts.find((v: Json) => v.name.startsWith("ratings.")).routes;
    assert.deepEqual(
      routes.map((r: Json) => r.name),
      ["large", "rest"],
    );
  });

  it("never emits a forwarding route without a cluster", () => {
    const routes = ratingsRoutes([
      { name: "nothing", match: [{ uri: { prefix: "/nothing" } }] },
      {
        name: "zero-weights",
        route: [
          { destination: { host: "ratings" }, weight: 0 },
          { destination: { host: "ratings" }, weight: 0 },
        ],
      },
      { name: "missing-delegate", delegate: { name: "no-such-delegate" } },
      { name: "last", route: ratings },
    ]);
    assert.deepEqual(
      routes.map((r) => r.name),
      ["last"],
    );
  });

  it("gives a domain to one virtual host only, dropping a virtual host left without domains", () => {
    const service = (hostname: string) =>
      Service.fromJSON({
        hostname,
        namespace: "default",
        ports: [{ name: "http", number: 9080, protocol: "PROTOCOL_HTTP" }],
        registry: "serviceentry",
      });
    // Hostnames differing in case only: Envoy matches domains case-insensitively.
    const services = new Map(["Reviews.example", "reviews.example"].map((h) => [h, service(h)]));
    const push = PushContext.build({
      config: new Map(),
      services,
      endpointShards: new Map(),
      domainSuffix: "cluster.local",
    });
    const { json } = productpageRoutes(push);
    assert.deepEqual(
      json.virtualHosts.map((v: Json) => [v.name, v.domains]),
      [
        ["Reviews.example:9080", ["Reviews.example", "Reviews.example."]],
        ["allow_any", ["*"]],
      ],
    );
  });

  it("never emits a fault with nothing left to inject", () => {
    const [route] = ratingsRoutes([{ fault: { delay: { exponentialDelay: "1s" } }, route: ratings }]);
    assert.equal(route!.typedPerFilterConfig, undefined);
  });
});
