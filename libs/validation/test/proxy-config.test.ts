import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { validateResource } from "../src/index.js";

const proxyConfig = (spec: unknown) => ({
  apiVersion: "networking.istio.io/v1beta1",
  kind: "ProxyConfig",
  metadata: { name: "pc", namespace: "shop" },
  spec,
});

describe("ProxyConfig validation", () => {
  it("warns about a selector without labels (it selects nothing) but accepts it, as Istio", () => {
    const result = validateResource(proxyConfig({ selector: {}, concurrency: 2 }));
    assert.deepEqual(result.errors, []);
    assert.deepEqual(
      result.warnings.map((w) => w.path),
      ["spec.selector"],
    );
  });

  it("accepts any label syntax but wildcards and empty keys, as Istio", () => {
    const result = validateResource(proxyConfig({ selector: { matchLabels: { "not a label": "x y" } } }));
    assert.deepEqual(result.errors, []);
    const wildcard = validateResource(proxyConfig({ selector: { matchLabels: { "app*": "web" } } }));
    assert.deepEqual(
      wildcard.errors.map((e) => e.path),
      ["spec.selector.matchLabels[app*]"],
    );
  });

  it("accepts concurrency 0 and an unset one", () => {
    assert.deepEqual(validateResource(proxyConfig({ concurrency: 0 })).errors, []);
    assert.deepEqual(validateResource(proxyConfig({})).errors, []);
  });
});
