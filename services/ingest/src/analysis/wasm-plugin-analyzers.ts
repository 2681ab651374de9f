import type { ConfigResource } from "@sextant/proto";
import { FailStrategy, type WasmPlugin } from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";

/** What the WasmPlugin analysis reports: where, and what it says. */
export interface WasmPluginFinding {
  readonly resource: ConfigResource;
  /** moduleNotFetched: the module would be downloaded, which Sextant does not do; ignored: a field without effect. */
  readonly kind: "moduleNotFetched" | "ignored";
  readonly field: string;
  readonly message: string;
}

/**
 * What Sextant accepts in a WasmPlugin but does not do as Istio does.
 * Istio's agent downloads oci://, https:// and http:// modules (and those
 * without a scheme, OCI images) and hands Envoy a local file; Sextant's
 * agent passes xDS through and downloads nothing, so push serves
 * istio-agent's stand-in for a module it could not fetch. Only file://
 * modules (already on the proxy's filesystem) run. Proxyless gRPC clients
 * run no Wasm at all (gRPC has no Wasm filter); push serves them no ECDS.
 */
export function analyzeWasmPlugins(
  plugins: ReadonlyArray<{ resource: ConfigResource; spec: WasmPlugin }>,
): WasmPluginFinding[] {
  const findings: WasmPluginFinding[] = [];
  for (const { resource, spec } of plugins) {
    const local = spec.url.toLowerCase().startsWith("file://");
    if (!local) {
      const fallback =
        spec.failStrategy === FailStrategy.FAIL_OPEN
          ? "allows every request (failStrategy FAIL_OPEN), as if the plugin were not there"
          : "denies every request (failStrategy is not FAIL_OPEN)";
      findings.push({
        resource,
        kind: "moduleNotFetched",
        field: "spec.url",
        message: `Sextant's agent does not download Wasm modules, so "${spec.url}" never runs: the selected proxies get istio-agent's stand-in for a module it could not fetch, which ${fallback}. Use a file:// module present on the proxies.`,
      });
    }
    if (local && spec.failStrategy === FailStrategy.FAIL_RELOAD)
      findings.push({
        resource,
        kind: "ignored",
        field: "spec.failStrategy",
        message:
          "FAIL_RELOAD is served as FAIL_CLOSE: Envoy's reloading failure policy is not in the Envoy API Sextant generates",
      });
    if (spec.imagePullSecret || spec.verificationKey)
      findings.push({
        resource,
        kind: "ignored",
        field: spec.imagePullSecret ? "spec.imagePullSecret" : "spec.verificationKey",
        message:
          "accepted but ignored: Sextant pulls no images (and Istio does not use verificationKey either)",
      });
    findings.push({
      resource,
      kind: "ignored",
      field: "spec",
      message:
        "accepted but ignored for proxyless gRPC workloads: gRPC runs no Wasm filters; only Envoy sidecars and gateways run the plugin",
    });
  }
  return findings;
}
