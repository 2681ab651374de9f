// Sidecar authorization filters (src/translate/sidecar/authz.ts): the ways a
// CUSTOM policy's provider can fail, each of which must deny what the policy
// matches; the goldens (testdata/sidecar/authorization-*) show the full output.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HttpRBAC, NetworkRBAC } from "@sextant/proto/envoy";
import { authzHttpFilters, authzNetworkFilters } from "../src/translate/sidecar/authz.js";
import { contextOf } from "./golden-inputs.js";
import { sidecarProxy } from "./sidecar-routes.fixtures.test.js";

const extAuthzService = {
  hostname: "ext-authz.foo.svc.cluster.local",
  namespace: "foo",
  name: "ext-authz",
  ports: [{ name: "grpc", number: 9000, protocol: "PROTOCOL_GRPC" }],
};

const customPolicy = (name: string, provider: string, { dryRun = false } = {}) => `
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ${name}, namespace: default${dryRun ? ', annotations: {istio.io/dry-run: "true"}' : ""}}
spec:
  action: CUSTOM
  provider: {name: ${provider}}
  rules:
  - to:
    - operation: {paths: ["/admin/*"]}
`;

function filtersOf(meshConfig: string, config: string) {
  const push = contextOf({ services: [extAuthzService], config, meshConfig });
  const proxy = sidecarProxy("10.1.0.1", { app: "reviews" });
  const http = authzHttpFilters(push, proxy).map((filter) => ({
    name: filter.name,
    config: filter.name.endsWith(".rbac")
      ? (HttpRBAC.toJSON(HttpRBAC.decode(filter.typedConfig!.value)) as Record<string, unknown>)
      : {},
  }));
  const network = authzNetworkFilters(push, proxy).map((filter) => ({
    name: filter.name,
    config: filter.name.endsWith(".rbac")
      ? (NetworkRBAC.toJSON(NetworkRBAC.decode(filter.typedConfig!.value)) as Record<string, unknown>)
      : {},
  }));
  return { http, network };
}

const grpcProvider = (name: string, service: string) => `
extensionProviders:
- name: ${name}
  envoyExtAuthzGrpc: {service: ${service}, port: 9000}
`;

/** The names of the denying policies of a lone enforced DENY RBAC filter, or a failure. */
function deniedPolicies(filters: Array<{ name: string; config: Record<string, unknown> }>): string[] {
  assert.equal(filters.length, 1, `one RBAC filter, got ${filters.map((f) => f.name).join(", ")}`);
  const rules = filters[0]!.config.rules as { action: string; policies: Record<string, unknown> };
  assert.equal(rules.action, "DENY");
  assert.equal(filters[0]!.config.shadowRules, undefined);
  return Object.keys(rules.policies);
}

describe("sidecar CUSTOM authorization fails closed", () => {
  it("calls ext_authz when the provider resolves (by host, or by namespace/host)", () => {
    for (const service of ["ext-authz.foo.svc.cluster.local", "foo/ext-authz.foo.svc.cluster.local"]) {
      const { http, network } = filtersOf(grpcProvider("authz", service), customPolicy("p", "authz"));
      assert.deepEqual(
        http.map((f) => f.name),
        ["envoy.filters.http.rbac", "envoy.filters.http.ext_authz"],
      );
      assert.deepEqual(
        network.map((f) => f.name),
        ["envoy.filters.network.rbac", "envoy.filters.network.ext_authz"],
      );
    }
  });

  const denied = ["istio-ext-authz-authz-ns[default]-policy[p]-rule[0]-deny-due-to-bad-CUSTOM-action"];
  const failures: Array<[string, string, string]> = [
    ["a provider MeshConfig does not define", grpcProvider("other", "ext-authz.foo.svc.cluster.local"), ""],
    [
      "a provider whose service the registry does not have",
      grpcProvider("authz", "nope.foo.svc.cluster.local"),
      "",
    ],
    [
      "a provider whose service is in another namespace",
      grpcProvider("authz", "bar/ext-authz.foo.svc.cluster.local"),
      "",
    ],
    [
      "a provider MeshConfig defines invalidly",
      "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: ext-authz.foo.svc.cluster.local, port: 0}\n",
      "",
    ],
  ];
  for (const [name, meshConfig] of failures) {
    it(`denies what the policy matches for ${name}, on HTTP and TCP chains`, () => {
      const { http, network } = filtersOf(meshConfig, customPolicy("p", "authz"));
      assert.deepEqual(deniedPolicies(http), denied);
      assert.deepEqual(deniedPolicies(network), denied);
    });
  }

  it("denies for every provider when one workload has several (Istio's default)", () => {
    const { http } = filtersOf(
      `${grpcProvider("authz", "ext-authz.foo.svc.cluster.local")}- name: second\n  envoyExtAuthzGrpc: {service: ext-authz.foo.svc.cluster.local, port: 9000}\n`,
      `${customPolicy("p", "authz")}---${customPolicy("q", "second")}`,
    );
    assert.deepEqual(
      http.map((filter) => Object.keys((filter.config.rules as { policies: object }).policies)),
      [denied, ["istio-ext-authz-second-ns[default]-policy[q]-rule[0]-deny-due-to-bad-CUSTOM-action"]],
    );
  });

  it("leaves a dry-run CUSTOM policy out, whether its provider exists or not", () => {
    for (const mesh of [grpcProvider("authz", "ext-authz.foo.svc.cluster.local"), ""]) {
      const { http, network } = filtersOf(mesh, customPolicy("p", "authz", { dryRun: true }));
      assert.deepEqual([...http, ...network], []);
    }
  });
});
