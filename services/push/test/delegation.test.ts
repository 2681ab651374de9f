import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { configKey } from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import {
  HTTPMatchRequest,
  HTTPRoute,
  VirtualService,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { mergeHttpRoute, mergeMatches } from "../src/model/delegation.js";
import { PushContext } from "../src/model/push-context.js";

const match = (json: unknown) => HTTPMatchRequest.fromJSON(json);
const route = (json: unknown) => HTTPRoute.fromJSON(json);

function contextOf(virtualServices: Array<{ name: string; namespace?: string; spec: unknown }>) {
  const config = new Map<string, ConfigResource>();
  for (const vs of virtualServices) {
    const resource: ConfigResource = {
      kind: "VirtualService",
      apiVersion: "networking.istio.io/v1",
      namespace: vs.namespace ?? "default",
      name: vs.name,
      labels: {},
      annotations: {},
      generation: 1,
      revision: 0,
      spec: VirtualService.toJSON(VirtualService.fromJSON(vs.spec)) as Record<string, unknown>,
    };
    config.set(configKey(resource), resource);
  }
  return PushContext.build({
    config,
    services: new Map(),
    endpointShards: new Map(),
    domainSuffix: "cluster.local",
  });
}

describe("VirtualService delegation (Istio's mergeHTTPMatchRequests)", () => {
  it("ANDs a delegate match with each root match it narrows", () => {
    const merged = mergeMatches(
      [
        match({ name: "a", uri: { prefix: "/api" } }),
        match({ name: "b", uri: { prefix: "/api" }, headers: { "x-env": { exact: "prod" } } }),
      ],
      [match({ name: "v1", uri: { prefix: "/api/v1" }, method: { exact: "GET" } })],
    );
    assert.deepEqual(
      merged?.map((m) => [m.name, m.uri?.prefix, m.method?.exact, m.headers["x-env"]?.exact]),
      [
        ["a-v1", "/api/v1", "GET", undefined],
        ["b-v1", "/api/v1", "GET", "prod"],
      ],
    );
  });

  it("conflicts when a delegate match widens or contradicts every root match", () => {
    const root = [match({ uri: { prefix: "/api" } })];
    assert.equal(mergeMatches(root, [match({ uri: { prefix: "/" } })]), undefined);
    assert.equal(mergeMatches(root, [match({ uri: { regex: "/api/.*" } })]), undefined);
    assert.ok(mergeMatches(root, [match({ uri: { exact: "/api/x" } })]));
    const exact = [match({ headers: { "end-user": { exact: "jason" } } })];
    assert.equal(mergeMatches(exact, [match({ headers: { "end-user": { exact: "kim" } } })]), undefined);
    assert.ok(mergeMatches(exact, [match({ headers: { "x-other": { exact: "kim" } } })]));
    const labels = [match({ sourceLabels: { app: "a" } })];
    assert.equal(mergeMatches(labels, [match({ sourceLabels: { app: "b" } })]), undefined);
    assert.equal(mergeMatches([match({ port: 80 })], [match({ port: 81 })]), undefined);
    assert.equal(mergeMatches([match({ ignoreUriCase: true })], [match({})]), undefined);
    // One conflicting delegate match fails the whole route, as in Istio.
    assert.equal(
      mergeMatches(root, [match({ uri: { prefix: "/api/x" } }), match({ uri: { prefix: "/y" } })]),
      undefined,
    );
    // Without matches on one side, the other side's.
    assert.deepEqual(
      mergeMatches([], [match({ name: "d" })])?.map((m) => m.name),
      ["d"],
    );
    assert.deepEqual(
      mergeMatches([match({ name: "r" })], [])?.map((m) => m.name),
      ["r"],
    );
  });

  it("takes from the root only what the delegate route leaves unset", () => {
    const merged = mergeHttpRoute(
      route({
        name: "root",
        timeout: { seconds: 5 },
        retries: { attempts: 1 },
        headers: { request: { set: { a: "1" } } },
      }),
      route({ name: "leaf", timeout: { seconds: 1 }, route: [{ destination: { host: "r" } }] }),
    );
    assert.equal(merged?.name, "root-leaf");
    assert.deepEqual(merged?.timeout, { seconds: 1, nanos: 0 });
    assert.equal(merged?.retries?.attempts, 1);
    assert.deepEqual(merged?.headers?.request?.set, { a: "1" });
    assert.equal(merged?.delegate, undefined);
  });
});

describe("VirtualService delegation in PushContext", () => {
  const root = {
    name: "root",
    spec: {
      hosts: ["reviews"],
      http: [
        { name: "local", match: [{ uri: { prefix: "/a" } }], delegate: { name: "leaf" } },
        { name: "hidden", delegate: { name: "private", namespace: "other" } },
        { name: "shared", delegate: { name: "shared", namespace: "other" } },
        { name: "rooted", delegate: { name: "not-a-delegate" } },
        { name: "rest", route: [{ destination: { host: "reviews" } }] },
      ],
    },
  };
  const push = contextOf([
    root,
    {
      name: "leaf",
      spec: {
        http: [
          { name: "x", route: [{ destination: { host: "ratings" } }] },
          { name: "nested", delegate: { name: "shared", namespace: "other" } },
        ],
      },
    },
    {
      name: "private",
      namespace: "other",
      spec: { exportTo: ["."], http: [{ route: [{ destination: { host: "a" } }] }] },
    },
    {
      name: "shared",
      namespace: "other",
      spec: { exportTo: ["default"], http: [{ name: "s", route: [{ destination: { host: "details" } }] }] },
    },
    { name: "not-a-delegate", spec: { hosts: ["x"], http: [{ route: [{ destination: { host: "x" } }] }] } },
  ]);

  it("merges exported delegates one level deep, resolving their short hosts in their own namespace", () => {
    const merged = push.virtualServiceFor("reviews.default.svc.cluster.local", "default");
    assert.ok(merged);
    assert.deepEqual(
      merged.spec.http.map((r) => [r.name, r.route[0]?.destination?.host, r.match[0]?.uri?.prefix]),
      [
        ["local-x", "ratings.default.svc.cluster.local", "/a"],
        ["shared-s", "details.other.svc.cluster.local", undefined],
        ["rest", "reviews", undefined],
      ],
    );
    assert.deepEqual(
      merged.delegates.map((ref) => `${ref.namespace}/${ref.name}`),
      ["default/leaf", "other/shared"],
    );
  });

  it("lists no delegate as a VirtualService of its own", () => {
    assert.deepEqual(
      push.virtualServices.map((vs) => vs.ref.name),
      ["not-a-delegate", "root"],
    );
  });
});
