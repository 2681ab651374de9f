import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ConfigResource } from "@sextant/proto";
import { decodeStoredOfKind, decodeStoredSpec, KINDS } from "../src/index.js";

function stored(kind: string, name: string, spec: Record<string, unknown> | undefined): ConfigResource {
  return ConfigResource.fromPartial({ kind, namespace: "default", name, spec });
}

describe("decoding stored config", () => {
  it("decodes a spec with the codec KINDS has for its kind", () => {
    const spec = decodeStoredSpec(
      "DestinationRule",
      stored("DestinationRule", "reviews", { host: "reviews", subsets: [{ name: "v1" }] }),
    );
    assert.equal(spec.host, "reviews");
    assert.equal(spec.subsets[0]?.name, "v1");
    assert.deepEqual(spec.exportTo, []);
  });

  it("reads a missing spec as the kind's empty message", () => {
    assert.deepEqual(
      decodeStoredSpec("Sidecar", stored("Sidecar", "default", undefined)),
      KINDS.get("Sidecar")?.codec.fromJSON({}),
    );
  });

  it("keeps the resources of one kind, in their order, with their metadata", () => {
    const resources = [
      stored("VirtualService", "b", { hosts: ["b"] }),
      stored("DestinationRule", "a", { host: "a" }),
      stored("VirtualService", "a", { hosts: ["a"] }),
    ];
    const decoded = decodeStoredOfKind(resources, "VirtualService");
    assert.deepEqual(
      decoded.map(({ resource, spec }) => [resource.name, spec.hosts]),
      [
        ["b", ["b"]],
        ["a", ["a"]],
      ],
    );
    assert.equal(decoded[0]?.resource, resources[0]);
  });
});
