import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Any } from "@sextant/proto";
import type { GeneratedResource } from "../src/model/types.js";
import { inconsistencies, type Snapshot } from "./snapshot-consistency.js";

// Resources whose "bytes" are their JSON, so that the check can be fed any shape.
const resource = (name: string, json: object): GeneratedResource => ({
  name,
  resource: { typeUrl: "test", value: Buffer.from(JSON.stringify(json)) },
  sources: [],
});
const decode = (any: Any) => JSON.parse(Buffer.from(any.value).toString()) as unknown;

describe("the snapshot consistency check (Snapshot.Consistent)", () => {
  const listener = resource("0.0.0.0_9080", {
    filterChains: [{ filters: [{ typedConfig: { rds: { routeConfigName: "9080" } } }, { cluster: "tcp" }] }],
  });
  const route = resource("9080", {
    virtualHosts: [
      { routes: [{ route: { weightedClusters: { clusters: [{ name: "v1" }, { name: "v2" }] } } }] },
    ],
  });
  const eds = (name: string) => resource(name, { name, type: "EDS" });
  const consistent: Snapshot = {
    listeners: [listener],
    routes: [route],
    clusters: [eds("v1"), eds("v2"), resource("tcp", { name: "tcp", type: "STATIC" })],
    endpoints: [resource("v1", {}), resource("v2", {})],
  };
  const wildcard = { listeners: "*", clusters: "*" } as const;

  it("accepts a snapshot where every name has its resource and every resource is named", () => {
    assert.deepEqual(inconsistencies(consistent, wildcard, decode), []);
  });

  it("reports names without their resource, and resources nothing names", () => {
    const broken: Snapshot = {
      ...consistent,
      routes: [resource("other", {})],
      clusters: [eds("v1")],
      endpoints: [resource("v1", {}), resource("stray", {})],
    };
    assert.deepEqual(inconsistencies(broken, wildcard, decode), [
      "listeners 0.0.0.0_9080 names routes 9080, which does not exist",
      "routes other is orphaned: nothing names it and it was not asked for",
      "listeners 0.0.0.0_9080 names clusters tcp, which does not exist",
      "endpoints stray is orphaned: nothing names it and it was not asked for",
    ]);
  });

  it("takes a resource asked for by name as wanted, and lets the caller excuse a missing name", () => {
    const asked: Snapshot = { ...consistent, endpoints: [...consistent.endpoints, resource("stray", {})] };
    assert.deepEqual(inconsistencies(asked, { ...wildcard, endpoints: new Set(["stray"]) }, decode), []);
    const missing: Snapshot = {
      ...consistent,
      clusters: consistent.clusters.filter((c) => c.name !== "tcp"),
    };
    assert.deepEqual(
      inconsistencies(missing, wildcard, decode, (type, name) => type === "clusters" && name === "tcp"),
      [],
    );
  });
});
