import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseDocuments, validateResource } from "../src/index.js";

const limits = { maxDocuments: 10 };

describe("parseDocuments", () => {
  it("reads several YAML documents, skipping empty ones but keeping their index", () => {
    const result = parseDocuments("a: 1\n---\n---\nb: [1, 2]\n", limits);
    assert.deepEqual(result.errors, []);
    assert.deepEqual(result.documents, [
      { index: 0, value: { a: 1 } },
      { index: 2, value: { b: [1, 2] } },
    ]);
  });

  it("reads JSON", () => {
    const result = parseDocuments('{"kind": "Gateway", "spec": {"servers": []}}', limits);
    assert.deepEqual(result.documents, [{ index: 0, value: { kind: "Gateway", spec: { servers: [] } } }]);
  });

  it("reports text that is not YAML with the document index and position", () => {
    const result = parseDocuments("kind: Gateway\n---\nspec: {servers: [\n", limits);
    assert.equal(result.documents.length, 1);
    assert.equal(result.errors.length, 1);
    assert.equal(result.errors[0]?.index, 1);
    assert.match(result.errors[0]?.message ?? "", /invalid YAML at line \d+, column \d+/);
  });

  it("rejects binary input", () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0xff, 0xfe]);
    const result = parseDocuments(png, limits);
    assert.deepEqual(result.documents, []);
    assert.match(result.errors[0]?.message ?? "", /not valid UTF-8|binary/);
  });

  it("rejects text with NUL bytes", () => {
    const result = parseDocuments("kind: Gateway\u0000\u0001", limits);
    assert.deepEqual(result.documents, []);
    assert.match(result.errors[0]?.message ?? "", /control characters/);
  });

  it("rejects deeply nested flow YAML without overflowing the stack", () => {
    const result = parseDocuments(`a: ${"[".repeat(50_000)}`, limits);
    assert.deepEqual(result.documents, []);
    assert.match(result.errors[0]?.message ?? "", /nested too deeply/);
  });

  it("rejects nesting deeper than maxDepth", () => {
    const nested = `${"{a: ".repeat(20)}1${"}".repeat(20)}`;
    const result = parseDocuments(nested, { maxDocuments: 1, maxDepth: 10 });
    assert.deepEqual(result.documents, []);
    assert.match(result.errors[0]?.message ?? "", /at most 10 levels/);
    assert.equal(parseDocuments(nested, { maxDocuments: 1, maxDepth: 30 }).errors.length, 0);
  });

  it("rejects an alias bomb", () => {
    const lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]'];
    for (let i = 1; i < 8; i++) {
      const prev = String.fromCharCode(96 + i);
      const name = String.fromCharCode(97 + i);
      lines.push(`${name}: &${name} [${Array(9).fill(`*${prev}`).join(",")}]`);
    }
    const result = parseDocuments(lines.join("\n"), limits);
    assert.deepEqual(result.documents, []);
    assert.match(result.errors[0]?.message ?? "", /alias/);
  });

  it("rejects more documents than the caller allows", () => {
    const result = parseDocuments("a: 1\n---\nb: 2\n---\nc: 3\n", { maxDocuments: 2 });
    assert.equal(result.documents.length, 2);
    assert.deepEqual(result.errors, [{ index: 2, message: "too many documents: at most 2 are accepted" }]);
  });

  it("rejects input larger than maxBytes", () => {
    const result = parseDocuments("a: 1\n".repeat(100), { maxDocuments: 1, maxBytes: 64 });
    assert.match(result.errors[0]?.message ?? "", /too large/);
  });

  it("rejects duplicate keys", () => {
    const result = parseDocuments("kind: Gateway\nkind: Sidecar\n", limits);
    assert.equal(result.errors.length, 1);
  });
});

describe("hostile or broken resources", () => {
  it("names an unknown field by its path", () => {
    const [doc] = parseDocuments(
      "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec:\n  hosts: [r]\n  http:\n  - rout: []\n    route: [{destination: {host: r}}]\n",
      limits,
    ).documents;
    const result = validateResource(doc?.value as Record<string, unknown>);
    assert.deepEqual(result.errors, [{ path: "spec.http[0].rout", message: 'unknown field "rout"' }]);
  });

  it("names a wrong kind", () => {
    const result = validateResource({
      apiVersion: "networking.istio.io/v1",
      kind: "Ingress",
      metadata: { name: "a" },
    });
    assert.equal(result.errors[0]?.path, "kind");
    assert.match(result.errors[0]?.message ?? "", /"Ingress" is not supported/);
  });

  it("requires metadata.name", () => {
    const result = validateResource({
      apiVersion: "security.istio.io/v1",
      kind: "PeerAuthentication",
      metadata: {},
      spec: {},
    });
    assert.deepEqual(result.errors, [{ path: "metadata.name", message: "metadata.name is required" }]);
  });

  it("rejects a document that is not an object", () => {
    const result = validateResource(["not", "a", "resource"] as never);
    assert.equal(result.errors.length, 1);
  });
});
