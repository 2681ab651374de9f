import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Service } from "@sextant/proto";
import { HTTPFault, TypeUrl } from "@sextant/proto/envoy";
import { XdsCache } from "../src/cache/xds-cache.js";
import { generateSidecarRoutes, virtualHostDomains } from "../src/translate/sidecar/routes.js";
import {
  bookinfo,
  productpageRoutes,
  ratingsVirtualService,
  sidecarProxy,
} from "./sidecar-routes.fixtures.test.js";

const reviews9010 = {
  kind: "VirtualService",
  name: "reviews",
  spec: {
    hosts: ["reviews"],
    http: [
      {
        route: [
          { destination: { host: "reviews", subset: "v1" }, weight: 90 },
          { destination: { host: "reviews", subset: "v2" }, weight: 10 },
        ],
      },
    ],
  },
};

describe("sidecar RDS", () => {
  it("routes Bookinfo's virtual-service-reviews-90-10 as Istio: weighted clusters 90/10", () => {
    const { json, generated } = productpageRoutes(bookinfo([reviews9010]));
    assert.equal(json.name, "9080");
    const names = json.virtualHosts.map((v: { name: string }) => v.name);
    assert.deepEqual(names, [
      "productpage.default.svc.cluster.local:9080",
      "ratings.default.svc.cluster.local:9080",
      "reviews.default.svc.cluster.local:9080",
      "allow_any",
    ]);
    const vhost = json.virtualHosts[2];
    assert.deepEqual(vhost.routes[0].route.weightedClusters.clusters, [
      { name: "outbound|9080|v1|reviews.default.svc.cluster.local", weight: 90 },
      { name: "outbound|9080|v2|reviews.default.svc.cluster.local", weight: 10 },
    ]);
    assert.equal(vhost.routes[0].decorator.operation, "reviews:9080/*");
    assert.equal(vhost.routes[0].route.retryPolicy.numRetries, 2);
    assert.deepEqual(generated.sources, [{ kind: "VirtualService", namespace: "default", name: "reviews" }]);
    // The others keep the default route.
    const ratings = json.virtualHosts[1];
    assert.equal(ratings.routes[0].name, "default");
    assert.equal(ratings.routes[0].route.cluster, "outbound|9080||ratings.default.svc.cluster.local");
    assert.equal(
      ratings.routes[0].route.retryPolicy.retryOn,
      "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes",
    );
    assert.equal(
      ratings.routes[0].route.retryPolicy.retryHostPredicate[0].name,
      "envoy.retry_host_predicates.previous_hosts",
    );
    // Istio >= 1.24: no retriable status codes by default (a 503 is not retried).
    assert.equal(ratings.routes[0].route.retryPolicy.retriableStatusCodes, undefined);
    assert.deepEqual(ratings.routes[0].route.maxGrpcTimeout, {});
    assert.equal(ratings.routes[0].decorator.operation, "ratings.default.svc.cluster.local:9080/*");
  });

  it("gives virtual hosts Istio's domains: FQDN, short names of the proxy's namespace, VIP, with and without the port", () => {
    const service = Service.fromJSON({
      hostname: "reviews.default.svc.cluster.local",
      namespace: "default",
      addresses: ["10.96.0.10"],
      ports: [{ name: "http", number: 9080, protocol: "PROTOCOL_HTTP" }],
    });
    assert.deepEqual(virtualHostDomains(service, 9080, "default"), [
      "reviews.default.svc.cluster.local",
      "reviews.default.svc.cluster.local:9080",
      "reviews",
      "reviews:9080",
      "reviews.default.svc",
      "reviews.default.svc:9080",
      "reviews.default",
      "reviews.default:9080",
      "10.96.0.10",
      "10.96.0.10:9080",
    ]);
    assert.deepEqual(virtualHostDomains(service, 9080, "other").slice(2, 6), [
      "reviews.default",
      "reviews.default:9080",
      "reviews.default.svc",
      "reviews.default.svc:9080",
    ]);
  });

  it("translates matches, sourceLabels, fault, retries, timeouts, mirrors, rewrite, headers and CORS", () => {
    const push = bookinfo([
      ratingsVirtualService([
        {
          name: "only-v2",
          match: [{ sourceLabels: { version: "v2" } }],
          route: [{ destination: { host: "ratings" } }],
        },
        {
          name: "jason",
          match: [
            {
              name: "m",
              uri: { prefix: "/ratings" },
              headers: { "end-user": { exact: "jason" } },
              queryParams: { debug: { exact: "" } },
              method: { exact: "GET" },
              withoutHeaders: { "x-skip": {} },
            },
          ],
          fault: { delay: { fixedDelay: "7s", percentage: { value: 50 } }, abort: { httpStatus: 500 } },
          timeout: "2s",
          retries: { attempts: 3, perTryTimeout: "1s", retryOn: "5xx,503" },
          mirror: { host: "reviews", subset: "v2" },
          mirrorPercentage: { value: 25 },
          rewrite: { uri: "/v2/ratings", authority: "ratings-v2" },
          headers: { request: { set: { "x-a": "1" }, add: { "x-b": "2" }, remove: ["x-c"] } },
          corsPolicy: { allowOrigins: [{ exact: "https://example.com" }], allowMethods: ["GET", "POST"] },
          route: [{ destination: { host: "ratings", subset: "v1" } }],
        },
        { redirect: { uri: "/moved", redirectCode: 302 } },
        { route: [{ destination: { host: "ratings" } }] },
      ]),
    ]);
    const { json } = productpageRoutes(push);
    const vhost = json.virtualHosts.find((v: { name: string }) => v.name.startsWith("ratings."));
    // The sourceLabels route is not for a v1 proxy; the redirect is a catch-all, so the last route goes.
    assert.equal(vhost.routes.length, 2);
    const [jason, redirect] = vhost.routes;
    assert.equal(jason.name, "jason.m");
    assert.equal(jason.match.prefix, "/ratings");
    assert.deepEqual(
      jason.match.headers.map((h: { name: string }) => h.name),
      ["end-user", "x-skip", ":method"],
    );
    assert.equal(jason.match.headers[1].invertMatch, true);
    assert.deepEqual(jason.match.queryParameters, [{ name: "debug", presentMatch: true }]);
    assert.equal(jason.route.cluster, "outbound|9080|v1|ratings.default.svc.cluster.local");
    assert.deepEqual(jason.route.timeout, { seconds: 2 });
    assert.equal(jason.route.maxStreamDuration, undefined);
    assert.deepEqual(jason.route.maxGrpcTimeout, { seconds: 2 });
    assert.equal(jason.route.retryPolicy.numRetries, 3);
    assert.equal(jason.route.retryPolicy.retryOn, "5xx,retriable-status-codes");
    assert.deepEqual(jason.route.retryPolicy.retriableStatusCodes, [503]);
    assert.deepEqual(jason.route.retryPolicy.perTryTimeout, { seconds: 1 });
    assert.deepEqual(jason.route.requestMirrorPolicies, [
      {
        cluster: "outbound|9080|v2|reviews.default.svc.cluster.local",
        runtimeFraction: { defaultValue: { numerator: 250000, denominator: "MILLION" } },
        traceSampled: false,
      },
    ]);
    assert.equal(jason.route.prefixRewrite, "/v2/ratings");
    assert.equal(jason.route.hostRewriteLiteral, "ratings-v2");
    assert.deepEqual(jason.requestHeadersToRemove, ["x-c"]);
    assert.deepEqual(
      jason.requestHeadersToAdd.map((h: { header: { key: string }; appendAction: string }) => [
        h.header.key,
        h.appendAction,
      ]),
      [
        ["x-a", "OVERWRITE_IF_EXISTS_OR_ADD"],
        ["x-b", undefined], // APPEND_IF_EXISTS_OR_ADD is the enum's zero value
      ],
    );
    const fault = jason.typedPerFilterConfig["envoy.filters.http.fault"];
    assert.equal(fault.typeUrl, TypeUrl.HTTPFault);
    const decodedFault = HTTPFault.decode(Buffer.from(fault.value, "base64"));
    assert.equal(decodedFault.delay?.percentage?.numerator, 500000);
    assert.equal(decodedFault.abort?.httpStatus, 500);
    assert.equal(jason.typedPerFilterConfig["envoy.filters.http.cors"].typeUrl, TypeUrl.CorsPolicy);
    assert.deepEqual(redirect.redirect, { pathRedirect: "/moved", responseCode: "FOUND" });

    // A v2 proxy gets the sourceLabels route first, and it is a catch-all.
    const v2 = productpageRoutes(push, { app: "productpage", version: "v2" }).json.virtualHosts.find(
      (v: { name: string }) => v.name.startsWith("ratings."),
    );
    assert.deepEqual(
      v2.routes.map((r: { name: string }) => r.name),
      ["only-v2"],
    );
  });

  it("ends with block_all under REGISTRY_ONLY", () => {
    const push = bookinfo([
      { kind: "Sidecar", name: "default", spec: { outboundTrafficPolicy: { mode: "REGISTRY_ONLY" } } },
    ]);
    const { json } = productpageRoutes(push);
    const last = json.virtualHosts.at(-1);
    assert.equal(last.name, "block_all");
    assert.deepEqual(last.routes[0].directResponse, { status: 502 });
  });

  it("is deterministic and equal from the cache", () => {
    const push = bookinfo([reviews9010]);
    const proxy = sidecarProxy("10.1.0.4", { app: "productpage" });
    const cache = new XdsCache();
    const first = generateSidecarRoutes({ push, proxy, cache }, new Set(["9080", "nope"]));
    const second = generateSidecarRoutes({ push, proxy, cache }, new Set(["9080", "nope"]));
    const fresh = generateSidecarRoutes({ push, proxy, cache: new XdsCache() }, new Set(["9080"]));
    assert.deepEqual(second, first);
    assert.deepEqual(fresh, first);
  });
});
