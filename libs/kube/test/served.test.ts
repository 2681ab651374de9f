import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { startFakeKubeApiServer } from "@sextant/testing";
import { customResourceServed } from "../src/index.js";

const GATEWAYS = { group: "gateway.networking.k8s.io", version: "v1", plural: "gateways" };
const backoff = { initialMs: 10, maxMs: 50 };

describe("customResourceServed, against the fake kube-apiserver", () => {
  it("is true when the CRD is installed, false on a 404, and retries any other failure", async () => {
    const server = await startFakeKubeApiServer({
      resources: [{ ...GATEWAYS, versions: ["v1"], kind: "Gateway", namespaced: true }],
    });
    try {
      const kubeConfig = server.kubeConfig(KubeConfig);
      assert.equal(await customResourceServed(kubeConfig, GATEWAYS, { backoff }), true);
      assert.equal(
        await customResourceServed(kubeConfig, { ...GATEWAYS, plural: "grpcroutes" }, { backoff }),
        false,
      );
      server.injectFailure({ resource: "gateways" }, { code: 503, reason: "ServiceUnavailable" }, 2);
      const retried: unknown[] = [];
      assert.equal(
        await customResourceServed(kubeConfig, GATEWAYS, {
          backoff,
          onRetry: (error) => retried.push(error),
        }),
        true,
      );
      assert.equal(retried.length, 2, "two 503s, then the answer");
      // Aborted while the API server keeps failing: not served, and no more attempts.
      server.injectFailure({ resource: "gateways" }, { code: 503, reason: "ServiceUnavailable" }, 1000);
      const stop = new AbortController();
      const answer = customResourceServed(kubeConfig, GATEWAYS, {
        backoff,
        signal: stop.signal,
        onRetry: () => stop.abort(),
      });
      assert.equal(await answer, false);
    } finally {
      await server.close();
    }
  });
});
