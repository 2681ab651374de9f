import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { regexProblem, validateResource } from "../src/index.js";

function directResponse(body: string) {
  return validateResource({
    apiVersion: "networking.istio.io/v1",
    kind: "VirtualService",
    metadata: { name: "a", namespace: "default" },
    spec: { hosts: ["r"], http: [{ directResponse: { status: 200, body: { string: body } } }] },
  });
}

describe("VirtualService rules", () => {
  it("takes a direct response body up to 1 MiB, warns above 100 KiB, refuses more (Istio's limits)", () => {
    assert.deepEqual(directResponse("x".repeat(100 * 1024)).warnings, []);
    const large = directResponse("x".repeat(100 * 1024 + 1));
    assert.deepEqual(large.errors, []);
    assert.deepEqual(
      large.warnings.map((w) => w.path),
      ["spec.http[0].directResponse.body"],
    );
    assert.deepEqual(directResponse("x".repeat(1024 * 1024)).errors, []);
    // Bytes, not characters: "é" is two bytes in UTF-8.
    const tooLarge = directResponse("é".repeat(512 * 1024 + 1));
    assert.deepEqual(
      tooLarge.errors.map((e) => e.path),
      ["spec.http[0].directResponse.body"],
    );
    assert.match(tooLarge.errors[0]!.message, /at most 1 MiB/);
  });

  it("names why a pseudo-header cannot be modified", () => {
    const result = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "VirtualService",
      metadata: { name: "a", namespace: "default" },
      spec: {
        hosts: ["r"],
        http: [{ headers: { request: { set: { ":path": "/x" } } }, route: [{ destination: { host: "r" } }] }],
      },
    });
    assert.equal(result.errors.length, 1);
    assert.match(result.errors[0]!.message, /":path" cannot be modified: ":"-prefixed pseudo-headers/);
  });

  it("checks regexes as Envoy does: RE2 syntax, not empty, at most 1024 characters", () => {
    assert.equal(regexProblem("^/api/v[0-9]+$"), undefined);
    assert.match(regexProblem("(?=admin).*") ?? "", /not a valid RE2/);
    assert.match(regexProblem("") ?? "", /must not be empty/);
    assert.equal(regexProblem("a".repeat(1024)), undefined);
    assert.match(regexProblem("a".repeat(1025)) ?? "", /too large/);
  });
});
