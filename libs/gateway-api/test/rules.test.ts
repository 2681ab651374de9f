// The rule conversion, case by case; each expectation is what istiod
// 1.30.3 writes for the same input (its testdata goldens: http, grpc,
// route-precedence, mirror, redirect, rewrite, weighted, tcp, tls, invalid).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HTTPRedirect_RedirectPortSelection } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import {
  convertGrpcRoute,
  convertHttpRoute,
  convertTcpRoute,
  convertTlsRoute,
  sortHttpRoutes,
} from "../src/rules/index.js";
import { context, dest, httpRoute, route } from "./rule-fixtures.js";

const cart = { name: "cart", port: 8080 };
const only = <T>(routes: T[]): T => {
  assert.equal(routes.length, 1);
  return routes[0] as T;
};

describe("HTTPRoute matches", () => {
  it("writes each path type; a prefix loses its trailing slash, '/' stays", () => {
    const { routes } = convertHttpRoute(
      httpRoute({
        matches: [
          { path: { type: "PathPrefix", value: "/books/" } },
          { path: { type: "PathPrefix", value: "/" } },
          { path: { type: "Exact", value: "/login" } },
          { path: { type: "RegularExpression", value: "/v[0-9]+/.*" } },
        ],
        backendRefs: [cart],
      }),
      context(),
    );
    assert.deepEqual(
      routes.map((r) => r.match[0]?.uri),
      [{ prefix: "/books" }, { prefix: "/" }, { exact: "/login" }, { regex: "/v[0-9]+/.*" }],
    );
    // A rule is split per match; every part keeps the rule's name.
    assert.deepEqual(
      routes.map((r) => r.name),
      ["shop.web.0", "shop.web.0", "shop.web.0", "shop.web.0"],
    );
  });

  it("defaults a rule without matches, and a match without a path, to PathPrefix '/' as the API server does", () => {
    const rules = [
      { backendRefs: [cart] },
      { name: "by-header", matches: [{ headers: [{ name: "x", value: "1" }] }], backendRefs: [cart] },
    ];
    const { routes } = convertHttpRoute(route("HTTPRoute", { rules }), context());
    assert.deepEqual(
      routes.map((r) => [r.name, r.match[0]?.uri]),
      [
        ["shop.web.0", { prefix: "/" }],
        ["by-header", { prefix: "/" }],
      ],
    );
  });

  it("matches headers and query parameters exactly by default or by regex, and the method exactly", () => {
    const match = only(
      convertHttpRoute(
        httpRoute({
          matches: [
            {
              headers: [
                { name: "version", value: "v2" },
                { type: "RegularExpression", name: "user", value: "^j.*" },
              ],
              queryParams: [
                { name: "debug", value: "1" },
                { type: "RegularExpression", name: "page", value: "[0-9]+" },
              ],
              method: "POST",
            },
          ],
          backendRefs: [cart],
        }),
        context(),
      ).routes,
    ).match[0];
    assert.deepEqual(match?.headers, { version: { exact: "v2" }, user: { regex: "^j.*" } });
    assert.deepEqual(match?.queryParams, { debug: { exact: "1" }, page: { regex: "[0-9]+" } });
    assert.deepEqual(match?.method, { exact: "POST" });
  });
});

describe("GRPCRoute matches", () => {
  const grpc = (method: object) =>
    only(
      convertGrpcRoute(
        route("GRPCRoute", { rules: [{ matches: [{ method }], backendRefs: [cart] }] }),
        context(),
      ).routes,
    ).match[0]?.uri;

  it("turns service and method into path matches on /<service>/<method>", () => {
    assert.deepEqual(grpc({ service: "shop.Cart", method: "Add" }), { exact: "/shop.Cart/Add" });
    assert.deepEqual(grpc({ service: "shop.Cart" }), { prefix: "/shop.Cart/" });
    assert.deepEqual(grpc({ method: "Add" }), { regex: "/[^/]+/Add" });
    assert.deepEqual(grpc({ type: "RegularExpression", service: "shop\\..*", method: "A.*" }), {
      regex: "/shop\\..*/A.*",
    });
    assert.deepEqual(grpc({ type: "RegularExpression", service: "shop.Cart" }), { regex: "/shop.Cart/.+" });
  });

  it("leaves a rule without matches unmatched, and matches headers", () => {
    const rules = [
      { backendRefs: [cart] },
      { matches: [{ headers: [{ name: "tenant", value: "a" }] }], backendRefs: [cart] },
    ];
    const { routes } = convertGrpcRoute(route("GRPCRoute", { rules }), context());
    assert.deepEqual(routes[0]?.match, []);
    assert.deepEqual(routes[1]?.match[0]?.headers, { tenant: { exact: "a" } });
    assert.equal(routes[1]?.match[0]?.uri, undefined);
  });

  it("rejects a method match with neither service nor method, and filters other than headers and mirrors", () => {
    const empty = convertGrpcRoute(
      route("GRPCRoute", { rules: [{ matches: [{ method: {} }], backendRefs: [cart] }] }),
      context(),
    );
    assert.equal(empty.fatal, true);
    assert.equal(empty.resolvedRefs.reason, "InvalidConfiguration");
    const redirect = convertGrpcRoute(
      route("GRPCRoute", {
        rules: [{ filters: [{ type: "RequestRedirect", requestRedirect: {} }], backendRefs: [cart] }],
      }),
      context(),
    );
    assert.equal(redirect.fatal, true);
    assert.deepEqual(redirect.error, {
      reason: "InvalidFilter",
      message: 'unsupported filter type "RequestRedirect"',
    });
  });
});

describe("filters", () => {
  const filtered = (...filters: object[]) =>
    convertHttpRoute(httpRoute({ filters, backendRefs: [cart] }), context());

  it("sets, adds and removes request and response headers; names lower-cased, the first of equal names wins", () => {
    const out = only(
      filtered(
        {
          type: "RequestHeaderModifier",
          requestHeaderModifier: {
            set: [
              { name: "X-Env", value: "prod" },
              { name: "x-env", value: "dev" },
            ],
            remove: ["cookie"],
          },
        },
        {
          type: "ResponseHeaderModifier",
          responseHeaderModifier: { add: [{ name: "X-Served-By", value: "cart" }] },
        },
      ).routes,
    );
    assert.deepEqual(out.headers?.request, { set: { "x-env": "prod" }, add: {}, remove: ["cookie"] });
    assert.deepEqual(out.headers?.response, { set: {}, add: { "x-served-by": "cart" }, remove: [] });
  });

  it("rejects a header value with control characters (InvalidFilter), dropping the route", () => {
    const out = filtered({
      type: "RequestHeaderModifier",
      requestHeaderModifier: { set: [{ name: "x", value: "a\nb" }] },
    });
    assert.equal(out.fatal, true);
    assert.deepEqual(out.routes, []);
    assert.equal(out.resolvedRefs.status, "False");
    assert.equal(out.resolvedRefs.reason, "InvalidFilter");
  });

  it("redirects: keeps the request's port unless the scheme changes, or to the given port", () => {
    const redirect = (requestRedirect: object) =>
      only(
        convertHttpRoute(httpRoute({ filters: [{ type: "RequestRedirect", requestRedirect }] }), context())
          .routes,
      );
    const toHttps = redirect({ scheme: "https", statusCode: 301 });
    assert.equal(toHttps.redirect?.scheme, "https");
    assert.equal(toHttps.redirect?.redirectCode, 301);
    assert.equal(toHttps.redirect?.derivePort, HTTPRedirect_RedirectPortSelection.FROM_PROTOCOL_DEFAULT);
    // A redirect needs no backend: no 500 direct response.
    assert.equal(toHttps.directResponse, undefined);
    const host = redirect({ hostname: "shop.example.com" });
    assert.equal(host.redirect?.authority, "shop.example.com");
    assert.equal(host.redirect?.derivePort, HTTPRedirect_RedirectPortSelection.FROM_REQUEST_PORT);
    const full = redirect({ port: 8443, path: { type: "ReplaceFullPath", replaceFullPath: "/new" } });
    assert.equal(full.redirect?.port, 8443);
    assert.equal(full.redirect?.derivePort, undefined);
    assert.equal(full.redirect?.uri, "/new");
  });

  it("redirects a prefix with the redirect's prefix rewrite, as written", () => {
    const out = convertHttpRoute(
      httpRoute({
        matches: [{ path: { value: "/v1/" } }],
        filters: [
          {
            type: "RequestRedirect",
            requestRedirect: { path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/v2/" } },
          },
        ],
      }),
      context(),
    );
    assert.equal(out.resolvedRefs.status, "True");
    assert.equal(out.routes[0]?.redirect?.prefixRewrite, "/v2/");
    assert.equal(out.routes[0]?.redirect?.uri, "");
  });

  it("rewrites a prefix (a trailing '/' dropped, '/' strips it), a full path as a regex, the host", () => {
    const rewrite = (urlRewrite: object) =>
      only(
        convertHttpRoute(
          httpRoute({ filters: [{ type: "URLRewrite", urlRewrite }], backendRefs: [cart] }),
          context(),
        ).routes,
      ).rewrite;
    assert.deepEqual(rewrite({ path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/" } }), {
      uri: "/",
      authority: "",
      uriRegexRewrite: undefined,
    });
    assert.equal(rewrite({ path: { type: "ReplacePrefixMatch", replacePrefixMatch: "/v2/" } })?.uri, "/v2");
    assert.deepEqual(
      rewrite({ hostname: "cart.internal", path: { type: "ReplaceFullPath", replaceFullPath: "/x" } }),
      {
        uri: "",
        authority: "cart.internal",
        uriRegexRewrite: { match: "/.*", rewrite: "/x" },
      },
    );
    assert.equal(rewrite({}), undefined);
  });

  it("mirrors to several backends, with percent or fraction (denominator 100 by default)", () => {
    const out = only(
      filtered(
        { type: "RequestMirror", requestMirror: { backendRef: { name: "mirror", port: 80 }, percent: 50 } },
        {
          type: "RequestMirror",
          requestMirror: {
            backendRef: { name: "cart-v2", port: 80 },
            fraction: { numerator: 1, denominator: 4 },
          },
        },
        {
          type: "RequestMirror",
          requestMirror: { backendRef: { name: "mirror", port: 81 }, fraction: { numerator: 30 } },
        },
        { type: "RequestMirror", requestMirror: { backendRef: { name: "mirror", port: 82 } } },
      ).routes,
    );
    assert.deepEqual(
      out.mirrors.map((m) => [m.destination?.host, m.destination?.port?.number, m.percentage?.value]),
      [
        ["mirror.shop.svc.cluster.local", 80, 50],
        ["cart-v2.shop.svc.cluster.local", 80, 25],
        ["mirror.shop.svc.cluster.local", 81, 30],
        ["mirror.shop.svc.cluster.local", 82, undefined],
      ],
    );
  });

  it("drops a mirror to a missing backend and reports it, keeping the route", () => {
    const out = filtered({
      type: "RequestMirror",
      requestMirror: { backendRef: { name: "gone", port: 80 } },
    });
    assert.equal(out.fatal, false);
    assert.deepEqual(only(out.routes).mirrors, []);
    assert.equal(out.resolvedRefs.reason, "BackendNotFound");
    assert.equal(out.resolvedRefs.message, "backend(gone.shop.svc.cluster.local) not found");
  });

  it("writes CORS origins as exact, prefix or regex matches; preflights it does not match go on", () => {
    const policy = only(
      filtered({
        type: "CORS",
        cors: {
          allowOrigins: ["https://shop.example.com", "https://*.example.com", "https://shop.example.*", "*"],
          allowCredentials: true,
          allowMethods: ["GET"],
          maxAge: 60,
        },
      }).routes,
    ).corsPolicy;
    assert.deepEqual(policy?.allowOrigins, [
      { exact: "https://shop.example.com" },
      { regex: "^https://.*\\.example\\.com$" },
      { prefix: "https://shop.example." },
      { regex: "^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\\s?#]+$" },
    ]);
    assert.equal(policy?.allowCredentials, true);
    assert.deepEqual(policy?.maxAge, { seconds: 60, nanos: 0 });
    assert.equal(policy?.unmatchedPreflights, 2);
  });

  it("reports ExtensionRef and other filters it does not implement (InvalidFilter), dropping the route", () => {
    const out = filtered({
      type: "ExtensionRef",
      extensionRef: { group: "example.com", kind: "Auth", name: "a" },
    });
    assert.equal(out.fatal, true);
    assert.deepEqual(out.error, {
      reason: "InvalidFilter",
      message: 'unsupported filter type "ExtensionRef"',
    });
  });
});

describe("backendRefs", () => {
  const backends = (backendRefs: object[], ctx = context(), target: "gateway" | "mesh" = "gateway") =>
    convertHttpRoute(httpRoute({ backendRefs }), ctx, target);

  it("keeps the weights, drops weight 0, and gives a single backend weight 0 (all traffic)", () => {
    const split = only(
      backends([
        { ...cart, weight: 90 },
        { name: "cart-v2", port: 8080, weight: 10 },
        { name: "mirror", port: 80, weight: 0 },
      ]).routes,
    );
    assert.deepEqual(
      split.route.map((d) => [d.destination, d.weight]),
      [
        [dest("cart.shop.svc.cluster.local", 8080), 90],
        [dest("cart-v2.shop.svc.cluster.local", 8080), 10],
      ],
    );
    const single = only(
      backends([
        { ...cart, weight: 0 },
        { name: "cart-v2", port: 8080, weight: 5 },
      ]).routes,
    );
    assert.deepEqual(
      single.route.map((d) => d.weight),
      [0],
    );
  });

  it("answers 500 when no backend has weight (or there are none)", () => {
    for (const refs of [[], [{ ...cart, weight: 0 }]]) {
      const out = only(backends(refs).routes);
      assert.equal(out.directResponse?.status, 500);
      assert.deepEqual(out.route, []);
    }
  });

  it("keeps a missing Service as a destination (its share gets a 500) and reports BackendNotFound", () => {
    const out = backends([cart, { name: "gone", port: 80 }]);
    assert.equal(out.fatal, false);
    assert.deepEqual(only(out.routes).route[1]?.destination, dest("gone.shop.svc.cluster.local", 80));
    assert.deepEqual(out.resolvedRefs, {
      type: "ResolvedRefs",
      status: "False",
      reason: "BackendNotFound",
      message: "backend(gone.shop.svc.cluster.local) not found",
      observedGeneration: 3,
    });
  });

  it("needs a ReferenceGrant for another namespace's Service from a Gateway's route, not from a mesh route", () => {
    const ledger = { name: "ledger", namespace: "billing", port: 9000 };
    const denied = backends([ledger]);
    assert.deepEqual(only(denied.routes).route[0]?.destination, { host: "", subset: "", port: undefined });
    assert.equal(denied.resolvedRefs.reason, "RefNotPermitted");
    assert.equal(
      denied.resolvedRefs.message,
      'backendRef ledger/billing not accessible to a HTTPRoute in namespace "shop" (missing a ReferenceGrant?)',
    );
    assert.equal(backends([ledger], context(), "mesh").resolvedRefs.status, "True");
    const grant = route("ReferenceGrant", {
      from: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: "shop" }],
      to: [{ group: "", kind: "Service" }],
    });
    grant.namespace = "billing";
    const allowed = backends([ledger], context({ grants: [grant] }));
    assert.equal(allowed.resolvedRefs.status, "True");
    assert.deepEqual(
      only(allowed.routes).route[0]?.destination,
      dest("ledger.billing.svc.cluster.local", 9000),
    );
  });

  it("resolves an Istio Hostname backend against the registry's hosts", () => {
    const out = backends([
      { group: "networking.istio.io", kind: "Hostname", name: "api.example.com", port: 443 },
    ]);
    assert.deepEqual(only(out.routes).route[0]?.destination, dest("api.example.com", 443));
    assert.equal(out.resolvedRefs.status, "True");
  });

  it("reports an unsupported kind (InvalidKind) with an empty destination; a missing port or a hostname as name drops the route", () => {
    const kind = backends([{ group: "example.com", kind: "Bucket", name: "b" }]);
    assert.equal(kind.fatal, false);
    assert.deepEqual(kind.error, {
      reason: "InvalidKind",
      message: 'referencing unsupported backendRef: group "example.com" kind "Bucket"',
    });
    const port = backends([{ name: "cart" }]);
    assert.equal(port.fatal, true);
    assert.deepEqual(port.error, { reason: "InvalidDestination", message: "port is required in backendRef" });
    assert.equal(backends([{ name: "cart.shop", port: 80 }]).error?.reason, "InvalidDestination");
  });

  it("applies a backendRef's header filters to that destination only", () => {
    const out = only(
      backends([
        {
          ...cart,
          weight: 1,
          filters: [
            { type: "RequestHeaderModifier", requestHeaderModifier: { set: [{ name: "x-v", value: "1" }] } },
          ],
        },
        { name: "cart-v2", port: 8080, weight: 1 },
      ]).routes,
    );
    assert.deepEqual(out.route[0]?.headers?.request?.set, { "x-v": "1" });
    assert.equal(out.route[1]?.headers, undefined);
  });
});

describe("timeouts and retries", () => {
  it("makes request the route timeout, and backendRequest the per-try timeout when retrying", () => {
    const out = only(
      convertHttpRoute(
        httpRoute({
          backendRefs: [cart],
          timeouts: { request: "10s", backendRequest: "500ms" },
          retry: { attempts: 3, backoff: "100ms", codes: [503, 429] },
        }),
        context(),
      ).routes,
    );
    assert.deepEqual(out.timeout, { seconds: 10, nanos: 0 });
    assert.deepEqual(out.retries, {
      attempts: 3,
      perTryTimeout: { seconds: 0, nanos: 500_000_000 },
      retryOn: "connect-failure,refused-stream,unavailable,cancelled,503,429",
      retryRemoteLocalities: undefined,
      retryIgnorePreviousHosts: undefined,
      backoff: { seconds: 0, nanos: 100_000_000 },
    });
  });

  it("without retry, backendRequest is the route timeout; 0s is no timeout; 0 attempts retry on nothing", () => {
    const backend = only(
      convertHttpRoute(
        httpRoute({ backendRefs: [cart], timeouts: { request: "0s", backendRequest: "2s" } }),
        context(),
      ).routes,
    );
    assert.deepEqual(backend.timeout, { seconds: 2, nanos: 0 });
    assert.equal(backend.retries, undefined);
    const none = only(
      convertHttpRoute(httpRoute({ backendRefs: [cart], retry: { attempts: 0 } }), context()).routes,
    );
    assert.equal(none.retries?.attempts, 0);
    assert.equal(none.retries?.retryOn, "");
    const defaults = only(convertHttpRoute(httpRoute({ backendRefs: [cart], retry: {} }), context()).routes);
    assert.equal(defaults.retries?.attempts, 2);
  });
});

describe("sortHttpRoutes", () => {
  it("orders Exact, then longer prefixes, then regexes; then method, header count, query count; unmatched last", () => {
    const rules = [
      { name: "catch-all" },
      { name: "regex", matches: [{ path: { type: "RegularExpression", value: "/.*/long-regex" } }] },
      { name: "short", matches: [{ path: { value: "/a" } }] },
      { name: "long", matches: [{ path: { value: "/a/b" } }] },
      { name: "exact", matches: [{ path: { type: "Exact", value: "/a" } }] },
      { name: "header", matches: [{ path: { value: "/a" }, headers: [{ name: "h", value: "1" }] }] },
      { name: "query", matches: [{ path: { value: "/a" }, queryParams: [{ name: "q", value: "1" }] }] },
      { name: "method", matches: [{ path: { value: "/a" }, method: "GET" }] },
    ].map((rule) => ({ ...rule, backendRefs: [cart] }));
    const { routes } = convertHttpRoute(route("HTTPRoute", { rules }), context());
    routes.push({ ...structuredClone(routes[0] as (typeof routes)[number]), name: "no-match", match: [] });
    sortHttpRoutes(routes);
    assert.deepEqual(
      routes.map((r) => r.name),
      ["exact", "long", "method", "header", "query", "short", "catch-all", "regex", "no-match"],
    );
  });
});

describe("TCPRoute and TLSRoute", () => {
  it("splits TCP traffic by weight; a rule without weight refuses connections", () => {
    const { routes } = convertTcpRoute(
      route("TCPRoute", {
        rules: [
          {
            backendRefs: [
              { ...cart, weight: 3 },
              { name: "cart-v2", port: 8080, weight: 1 },
            ],
          },
          { backendRefs: [] },
        ],
      }),
      context(),
    );
    assert.deepEqual(
      routes[0]?.route.map((d) => [d.destination?.host, d.weight]),
      [
        ["cart.shop.svc.cluster.local", 3],
        ["cart-v2.shop.svc.cluster.local", 1],
      ],
    );
    assert.deepEqual(routes[1]?.route, [
      {
        destination: { host: "internal.cluster.local", subset: "zero-weight", port: { number: 65535 } },
        weight: 0,
      },
    ]);
  });

  it("matches TLS by SNI from the hostnames, '*' without any", () => {
    const named = convertTlsRoute(
      route("TLSRoute", {
        hostnames: ["a.example.com", "*.b.example.com"],
        rules: [{ backendRefs: [cart] }],
      }),
      context(),
    );
    assert.deepEqual(
      named.routes[0]?.match.map((m) => m.sniHosts),
      [["a.example.com", "*.b.example.com"]],
    );
    assert.deepEqual(named.routes[0]?.route, [
      { destination: dest("cart.shop.svc.cluster.local", 8080), weight: 0 },
    ]);
    const any = convertTlsRoute(route("TLSRoute", { rules: [{ backendRefs: [cart] }] }), context());
    assert.deepEqual(
      any.routes[0]?.match.map((m) => m.sniHosts),
      [["*"]],
    );
  });

  it("reports a missing TCP backend, keeping its destination", () => {
    const out = convertTcpRoute(
      route("TCPRoute", { rules: [{ backendRefs: [{ name: "gone", port: 1 }] }] }),
      context(),
    );
    assert.equal(out.fatal, false);
    assert.equal(out.resolvedRefs.reason, "BackendNotFound");
    assert.equal(out.routes[0]?.route[0]?.destination?.host, "gone.shop.svc.cluster.local");
  });
});
