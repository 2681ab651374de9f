import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { VirtualService } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { decodeSpec, parseDuration, validateResource } from "../src/index.js";

describe("decodeSpec", () => {
  it("returns the typed message, reading durations and proto field names", () => {
    const result = decodeSpec<VirtualService>("VirtualService", {
      hosts: ["r"],
      export_to: ["."],
      http: [
        {
          timeout: "1m30s",
          route: [{ destination: { host: "r" }, weight: 7 }],
          mirror_percentage: { value: 5 },
        },
      ],
    });
    assert.deepEqual(result.errors, []);
    const vs = result.value!;
    assert.deepEqual(vs.exportTo, ["."]);
    assert.deepEqual(vs.http[0]?.timeout, { seconds: 90, nanos: 0 });
    assert.equal(vs.http[0]?.route[0]?.weight, 7);
    assert.equal(vs.http[0]?.mirrorPercentage?.value, 5);
  });

  it("reports wrong JSON types with their path", () => {
    const result = decodeSpec("DestinationRule", { host: 5, subsets: { name: "v1" } });
    assert.deepEqual(
      result.errors.map((e) => e.path),
      ["spec.host", "spec.subsets"],
    );
    assert.equal(result.value, undefined);
  });

  it("rejects a field given under both of its names", () => {
    const result = decodeSpec("VirtualService", { exportTo: ["."], export_to: ["*"] });
    assert.equal(result.errors[0]?.path, "spec.export_to");
  });

  it("rejects out-of-range integers and unknown enum values", () => {
    const result = decodeSpec("Gateway", {
      servers: [{ port: { number: -1, name: "a", protocol: "HTTP" }, tls: { mode: "SIMPLEST" } }],
    });
    assert.deepEqual(
      result.errors.map((e) => e.path),
      ["spec.servers[0].port.number", "spec.servers[0].tls.mode"],
    );
  });

  it("rejects unknown kinds", () => {
    assert.equal(decodeSpec("NoSuchKind", {}).errors[0]?.path, "kind");
  });
});

describe("parseDuration", () => {
  it("reads Go-style durations", () => {
    assert.deepEqual(parseDuration("1.5s"), { seconds: 1, nanos: 500_000_000 });
    assert.deepEqual(parseDuration("250ms"), { seconds: 0, nanos: 250_000_000 });
    assert.deepEqual(parseDuration("1h2m"), { seconds: 3720, nanos: 0 });
    assert.deepEqual(parseDuration("-2s"), { seconds: -2, nanos: 0 });
    assert.equal(parseDuration("10"), undefined);
    assert.equal(parseDuration("s"), undefined);
  });
});

describe("warnings", () => {
  it("keeps deprecated fields as warnings, not errors", () => {
    const result = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "a" },
      spec: {
        hosts: ["r"],
        http: [{ mirror: { host: "m" }, mirrorPercent: 50, route: [{ destination: { host: "r" } }] }],
      },
    });
    assert.deepEqual(result.errors, []);
    assert.deepEqual(
      result.warnings.map((w) => w.path),
      ["spec.http[0].mirrorPercent"],
    );
  });
});
