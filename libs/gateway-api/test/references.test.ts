import assert from "node:assert/strict";
import { test } from "node:test";
import type { ConfigResource } from "@sextant/proto";
import { ReferenceGrants } from "../src/index.js";

const grant = (namespace: string, spec: object): ConfigResource => ({
  kind: "ReferenceGrant",
  apiVersion: "gateway.networking.k8s.io/v1",
  namespace,
  name: "grant",
  labels: {},
  annotations: {},
  generation: 1,
  revision: 0,
  spec: spec as ConfigResource["spec"],
});

const routeToService = {
  from: { group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: "web" },
  to: { group: "", kind: "Service", namespace: "backends", name: "reviews" },
};

test("a reference within one namespace needs no grant", () => {
  const grants = new ReferenceGrants([]);
  assert.equal(grants.allows({ ...routeToService, to: { ...routeToService.to, namespace: "web" } }), true);
  assert.equal(grants.allows(routeToService), false);
});

test("a grant in the target's namespace allows the referrer's kind and namespace, and only the named object", () => {
  const any = new ReferenceGrants([
    grant("backends", {
      from: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: "web" }],
      to: [{ group: "", kind: "Service" }],
    }),
  ]);
  assert.equal(any.allows(routeToService), true);
  assert.equal(any.allows({ ...routeToService, from: { ...routeToService.from, kind: "GRPCRoute" } }), false);
  assert.equal(
    any.allows({ ...routeToService, from: { ...routeToService.from, namespace: "other" } }),
    false,
  );
  const named = new ReferenceGrants([
    grant("backends", {
      from: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: "web" }],
      to: [{ group: "", kind: "Service", name: "ratings" }],
    }),
  ]);
  assert.equal(named.allows(routeToService), false);
  assert.equal(named.allows({ ...routeToService, to: { ...routeToService.to, name: "ratings" } }), true);
  const elsewhere = new ReferenceGrants([
    grant("web", {
      from: [{ group: "gateway.networking.k8s.io", kind: "HTTPRoute", namespace: "web" }],
      to: [{ group: "", kind: "Service" }],
    }),
  ]);
  assert.equal(elsewhere.allows(routeToService), false);
});
