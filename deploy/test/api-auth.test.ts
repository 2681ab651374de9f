// Who may call ingest's config API (/v1/*): how each overlay configures its
// authentication, and who reaches the port in production.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DEFAULT_PORTS } from "@sextant/runtime";
import { containerOf, deploymentOf, envValue, find, type KubeObject, ofKind, render } from "./helpers.js";

/** The parts of a NetworkPolicy this test reads. */
interface NetworkPolicy extends KubeObject {
  spec: {
    podSelector: { matchLabels: Record<string, string> };
    policyTypes: string[];
    ingress: Array<{
      from?: Array<{
        podSelector?: { matchLabels?: Record<string, string> };
        namespaceSelector?: { matchLabels?: Record<string, string> };
      }>;
      ports?: Array<{ port: number | string }>;
    }>;
  };
}

describe("ingest's API authentication in deploy/", () => {
  it("production authenticates through Kubernetes (TokenReview, SubjectAccessReview); dev says explicitly it does not", () => {
    const auth = (env: string) =>
      envValue(containerOf(deploymentOf(render(`overlays/${env}`), "ingest")), "API_AUTH");
    assert.equal(auth("production"), "kubernetes");
    assert.equal(auth("dev"), "none");
  });

  it("production lets only discovery and labelled clients reach port 8080", () => {
    const objects = render("overlays/production");
    const policy = find<NetworkPolicy>(objects, "NetworkPolicy", "sextant-ingest");
    const ingest = deploymentOf(objects, "ingest");
    assert.deepEqual(policy.spec.podSelector.matchLabels, ingest.spec.selector.matchLabels);
    assert.deepEqual(policy.spec.policyTypes, ["Ingress"]);
    // Every rule is for the API's port; no rule admits everyone.
    for (const rule of policy.spec.ingress) {
      assert.deepEqual(rule.ports, [{ port: DEFAULT_PORTS.ingest.http }]);
      assert.ok((rule.from ?? []).length > 0, "a rule without `from` admits every pod");
      for (const peer of rule.from ?? [])
        assert.ok(Object.keys(peer.podSelector?.matchLabels ?? {}).length > 0, "each peer names pod labels");
    }
    const peers = policy.spec.ingress.flatMap((rule) => rule.from ?? []);
    assert.ok(
      peers.some(
        (peer) =>
          peer.namespaceSelector === undefined &&
          peer.podSelector?.matchLabels?.["app.kubernetes.io/name"] === "sextant-discovery",
      ),
      "discovery's pods (auto-registration)",
    );
  });

  it("dev leaves the port open (and its API unauthenticated, above)", () => {
    assert.deepEqual(
      ofKind(render("overlays/dev"), "NetworkPolicy").filter((p) => p.metadata.name === "sextant-ingest"),
      [],
    );
  });
});
