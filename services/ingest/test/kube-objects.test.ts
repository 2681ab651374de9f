import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { watchedKinds } from "../src/sources/kube-objects.js";

describe("the kinds the Kubernetes source watches", () => {
  it("watches each kind at its group's version, and EnvoyFilter at v1alpha3, the only one Istio serves it at", () => {
    const paths = new Map(watchedKinds().map((kind) => [kind.kind, kind.path]));
    assert.equal(paths.get("VirtualService"), "/apis/networking.istio.io/v1/virtualservices");
    assert.equal(paths.get("AuthorizationPolicy"), "/apis/security.istio.io/v1/authorizationpolicies");
    assert.equal(paths.get("EnvoyFilter"), "/apis/networking.istio.io/v1alpha3/envoyfilters");
  });
});
