// Mesh (GAMMA) parents: the VirtualServices and conditions istiod 1.30.3
// writes for a route whose parentRef is a Service or a ServiceEntry
// (its testdata/mesh.yaml goldens, for inputs of our own).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { convertGatewayApi } from "../src/index.js";
import { convertMeshParent, isMeshParent } from "../src/mesh.js";
import { context, dest, route } from "./rule-fixtures.js";

const cartParent = { group: "", kind: "Service", name: "cart" };
const toV2 = { rules: [{ backendRefs: [{ name: "cart-v2", port: 8080 }] }] };

describe("isMeshParent", () => {
  it("is a core Service or an Istio ServiceEntry; a parentRef without group and kind is a Gateway", () => {
    assert.equal(isMeshParent(cartParent), true);
    assert.equal(isMeshParent({ group: "networking.istio.io", kind: "ServiceEntry", name: "api" }), true);
    assert.equal(isMeshParent({ name: "ingress" }), false);
    assert.equal(isMeshParent({ kind: "Service", name: "cart" }), false);
  });
});

describe("convertMeshParent", () => {
  it("binds the rules to mesh for the Service's FQDN, named by namespace and host", () => {
    const out = convertMeshParent(
      route("HTTPRoute", { ...toV2, hostnames: ["ignored.example.com"] }),
      cartParent,
      context(),
    );
    assert.equal(out.virtualServices.length, 1);
    const [vs] = out.virtualServices;
    assert.equal(vs?.key, "shop/cart.shop.svc.cluster.local");
    assert.deepEqual(vs?.config.ref, {
      kind: "VirtualService",
      namespace: "shop",
      name: "shop~cart.shop.svc.cluster.local",
    });
    assert.deepEqual(vs?.config.source, { kind: "HTTPRoute", namespace: "shop", name: "web" });
    assert.deepEqual(vs?.config.annotations, {
      "internal.istio.io/parents": "HTTPRoute/web.shop",
      "internal.istio.io/route-semantics": "gateway",
    });
    // A mesh route's hostnames are not its hosts: the parent Service is.
    assert.deepEqual(vs?.config.spec.hosts, ["cart.shop.svc.cluster.local"]);
    assert.deepEqual(vs?.config.spec.gateways, ["mesh"]);
    assert.deepEqual(
      vs?.config.spec.http[0]?.route[0]?.destination,
      dest("cart-v2.shop.svc.cluster.local", 8080),
    );
    assert.deepEqual(
      out.conditions.map((c) => [c.type, c.status, c.reason, c.message]),
      [
        ["Accepted", "True", "Accepted", "Route was valid"],
        ["ResolvedRefs", "True", "ResolvedRefs", "All references resolved"],
      ],
    );
  });

  it("restricts every match to the parentRef's port, and keys the VirtualService by it", () => {
    const rules = [
      {
        matches: [{ path: { value: "/a" } }, { path: { value: "/b" } }],
        backendRefs: [{ name: "cart-v2", port: 8080 }],
      },
    ];
    const [vs] = convertMeshParent(
      route("HTTPRoute", { rules }),
      { ...cartParent, port: 8080 },
      context(),
    ).virtualServices;
    assert.equal(vs?.config.ref.name, "shop~8080~cart.shop.svc.cluster.local");
    assert.deepEqual(
      vs?.config.spec.http.map((r) => r.match.map((m) => [m.uri?.prefix, m.port])),
      [[["/a", 8080]], [["/b", 8080]]],
    );
    const grpc = convertMeshParent(route("GRPCRoute", toV2), { ...cartParent, port: 8080 }, context());
    assert.deepEqual(
      grpc.virtualServices[0]?.config.spec.http[0]?.match.map((m) => m.port),
      [8080],
    );
  });

  it("is not accepted (NoMatchingParent) by a Service that does not exist, and makes nothing", () => {
    const out = convertMeshParent(route("HTTPRoute", toV2), { ...cartParent, name: "gone" }, context());
    assert.deepEqual(out.virtualServices, []);
    assert.deepEqual(out.conditions[0], {
      type: "Accepted",
      status: "False",
      reason: "NoMatchingParent",
      message: 'parent service: "gone" not found',
      observedGeneration: 3,
    });
  });

  it("reaches another namespace's Service and backends without a ReferenceGrant", () => {
    const rules = [{ backendRefs: [{ name: "ledger", namespace: "billing", port: 9000 }] }];
    const out = convertMeshParent(
      route("HTTPRoute", { rules }),
      { ...cartParent, name: "ledger", namespace: "billing" },
      context(),
    );
    const [vs] = out.virtualServices;
    assert.equal(vs?.config.ref.namespace, "shop");
    assert.deepEqual(vs?.config.spec.hosts, ["ledger.billing.svc.cluster.local"]);
    assert.equal(out.conditions[1]?.status, "True");
  });

  it("binds to every host of a ServiceEntry parent", () => {
    const entry = route("ServiceEntry", { hosts: ["api.example.com", "api2.example.com"] }, "api");
    const out = convertMeshParent(
      route("HTTPRoute", toV2),
      { group: "networking.istio.io", kind: "ServiceEntry", name: "api" },
      context({ serviceEntries: [entry] }),
    );
    assert.deepEqual(
      out.virtualServices.map((v) => v.config.ref.name),
      ["shop~api.example.com", "shop~api2.example.com"],
    );
    const missing = convertMeshParent(
      route("HTTPRoute", toV2),
      { group: "networking.istio.io", kind: "ServiceEntry", name: "x" },
      context(),
    );
    assert.equal(missing.conditions[0]?.message, 'parent service entry: "x" not found');
  });

  it("names TCP and TLS VirtualServices by route and index; TLS without hostnames matches the parent's host as SNI", () => {
    const tcp = convertMeshParent(route("TCPRoute", toV2, "db"), { ...cartParent, port: 5432 }, context());
    assert.equal(tcp.virtualServices[0]?.key, undefined);
    assert.equal(tcp.virtualServices[0]?.config.ref.name, "db~tcp~0~istio-autogenerated-k8s-gateway");
    assert.deepEqual(
      tcp.virtualServices[0]?.config.spec.tcp[0]?.match.map((m) => m.port),
      [5432],
    );
    const tls = convertMeshParent(route("TLSRoute", toV2, "secure"), cartParent, context(), 2);
    assert.equal(tls.virtualServices[0]?.config.ref.name, "secure~tls~2~istio-autogenerated-k8s-gateway");
    assert.deepEqual(tls.virtualServices[0]?.config.spec.tls[0]?.match[0]?.sniHosts, [
      "cart.shop.svc.cluster.local",
    ]);
  });

  it("reports the rules' errors as ResolvedRefs and still binds what works", () => {
    const rules = [
      {
        backendRefs: [
          { name: "cart-v2", port: 8080 },
          { name: "gone", port: 80 },
        ],
      },
    ];
    const out = convertMeshParent(route("HTTPRoute", { rules }), cartParent, context());
    assert.equal(out.conditions[0]?.status, "True");
    assert.equal(out.conditions[1]?.reason, "BackendNotFound");
    assert.equal(out.virtualServices.length, 1);
  });
});

describe("mesh parents in convertGatewayApi", () => {
  it("numbers a TCPRoute's VirtualServices across its mesh parents and merges HTTP ones by key", () => {
    const { services, domainSuffix } = context();
    const tcp = route(
      "TCPRoute",
      { parentRefs: [cartParent, { ...cartParent, name: "cart-v2" }], ...toV2 },
      "db",
    );
    const web = route("HTTPRoute", { parentRefs: [cartParent], ...toV2 }, "web");
    const books = route(
      "HTTPRoute",
      {
        parentRefs: [cartParent],
        rules: [{ matches: [{ path: { value: "/books" } }], backendRefs: [{ name: "cart", port: 8080 }] }],
      },
      "books",
    );
    const out = convertGatewayApi({ resources: [books, tcp, web], services, domainSuffix });
    assert.deepEqual(
      out.virtualServices.map((vs) => [vs.ref.name, vs.spec.hosts, vs.spec.http.map((r) => r.name)]),
      [
        ["db~tcp~0~istio-autogenerated-k8s-gateway", ["cart.shop.svc.cluster.local"], []],
        ["db~tcp~1~istio-autogenerated-k8s-gateway", ["cart-v2.shop.svc.cluster.local"], []],
        ["shop~cart.shop.svc.cluster.local", ["cart.shop.svc.cluster.local"], ["shop.books.0", "shop.web.0"]],
      ],
    );
    for (const vs of out.virtualServices) {
      assert.equal(vs.annotations?.["internal.istio.io/route-semantics"], "gateway");
    }
  });
});
