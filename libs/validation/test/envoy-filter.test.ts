import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { validateResource } from "../src/index.js";

const envoyFilter = (spec: Record<string, unknown>) =>
  validateResource({
    apiVersion: "networking.istio.io/v1alpha3",
    kind: "EnvoyFilter",
    metadata: { name: "ef", namespace: "default" },
    spec,
  });

describe("EnvoyFilter validation beyond the corpus", () => {
  it("warns, as Istio does, that EnvoyFilter exposes implementation details", () => {
    const result = envoyFilter({ configPatches: [{ applyTo: "CLUSTER", patch: { operation: "REMOVE" } }] });
    assert.deepEqual(result.errors, []);
    assert.ok(result.warnings.some((w) => w.path === "spec" && /implementation details/.test(w.message)));
  });

  it("accepts an unknown field of the Envoy value with a warning (Istio's strict second pass)", () => {
    const result = envoyFilter({
      configPatches: [{ applyTo: "CLUSTER", patch: { operation: "MERGE", value: { not_a_field: 1 } } }],
    });
    assert.deepEqual(result.errors, []);
    assert.ok(
      result.warnings.some(
        (w) => w.path === "spec.configPatches[0].patch.value" && /not_a_field/.test(w.message),
      ),
    );
  });

  it("refuses a typed_config of a type it does not know, saying so", () => {
    const result = envoyFilter({
      configPatches: [
        {
          applyTo: "NETWORK_FILTER",
          patch: {
            operation: "ADD",
            value: { name: "x", typed_config: { "@type": "type.googleapis.com/x.y.Unknown" } },
          },
        },
      ],
    });
    assert.deepEqual(
      result.errors.map((e) => e.path),
      ["spec.configPatches[0].patch.value"],
    );
    assert.match(result.errors[0]?.message ?? "", /^referenced type unknown/);
  });

  it("does not check WAYPOINT patches, as Istio does not, and refuses EnvoyFilter at networking v1", () => {
    const waypoint = envoyFilter({ configPatches: [{ applyTo: "INVALID", match: { context: "WAYPOINT" } }] });
    assert.deepEqual(waypoint.errors, []);
    const v1 = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "EnvoyFilter",
      metadata: { name: "ef" },
      spec: {},
    });
    assert.ok(v1.errors.length > 0);
  });
});
