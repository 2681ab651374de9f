import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { prepareDocuments } from "../src/apply/prepare.js";

const limits = { maxDocuments: 10 };

describe("prepareDocuments", () => {
  it("stores one canonical spec whatever the spelling", () => {
    const camel = prepareDocuments(
      "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r}\nspec:\n  hosts: [r]\n  http:\n  - route:\n    - destination: {host: r}\n    timeout: 1.5s\n    retries: {attempts: 3, perTryTimeout: 500ms}\n",
      limits,
    );
    const snake = prepareDocuments(
      '{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"r"},"spec":{"hosts":["r"],"http":[{"route":[{"destination":{"host":"r"}}],"timeout":"1.500s","retries":{"attempts":3,"per_try_timeout":"0.5s"}}]}}',
      limits,
    );
    assert.deepEqual(camel.errors, []);
    assert.deepEqual(snake.errors, []);
    assert.deepEqual(snake.resources[0]?.resource.spec, camel.resources[0]?.resource.spec);
    assert.equal(camel.resources[0]?.resource.namespace, "default");
  });

  it("rejects a resource named twice in one input, and non-string labels", () => {
    const vs =
      "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: twice}\nspec: {hosts: [a], http: [{route: [{destination: {host: a}}]}]}\n";
    const result = prepareDocuments(
      `${vs}---\n${vs}---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n  name: g\n  labels: {app: 3}\nspec: {servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]}\n`,
      limits,
    );
    assert.deepEqual(
      result.errors.map((e) => [e.document, e.path]),
      [
        [1, "metadata.name"],
        [2, "metadata.labels[app]"],
      ],
    );
    assert.match(result.errors[0]?.message ?? "", /also document 0/);
  });

  it("keeps labels and annotations and counts documents past empty ones", () => {
    const result = prepareDocuments(
      "---\n---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata:\n  name: default\n  namespace: istio-system\n  labels: {team: mesh}\n  annotations: {note: strict}\nspec:\n  mtls: {mode: STRICT}\n",
      limits,
    );
    assert.deepEqual(result.errors, []);
    const resource = result.resources[0]?.resource;
    // The first "---" opens document 0, so the resource after the second is document 1.
    assert.equal(result.resources[0]?.document, 1);
    assert.deepEqual(resource?.labels, { team: "mesh" });
    assert.deepEqual(resource?.annotations, { note: "strict" });
    assert.equal(resource?.namespace, "istio-system");
    assert.deepEqual(resource?.spec, { mtls: { mode: "STRICT" } });
  });
});
