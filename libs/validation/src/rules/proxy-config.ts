import type { ProxyConfig } from "@sextant/proto/gen/istio/networking/v1beta1/proxy_config";
import { key } from "../issues.js";
import type { RuleContext } from "./context.js";

/**
 * Istio's ProxyConfig rules (ValidateProxyConfig): the selector's keys are
 * non-empty and neither keys nor values hold a wildcard, a selector without
 * labels is only a warning, and concurrency is not negative. Label syntax is
 * not checked further, as in Istio.
 */
export function validateProxyConfig(pc: ProxyConfig, ctx: RuleContext): void {
  const { issues, path } = ctx;
  if (pc.selector) {
    const labelsPath = `${path}.selector.matchLabels`;
    const labels = Object.entries(pc.selector.matchLabels);
    for (const [k, v] of labels) {
      if (k === "") issues.error(key(labelsPath, k), `empty key is not supported in selector: "=${v}"`);
      if (k.includes("*") || v.includes("*"))
        issues.error(key(labelsPath, k), `wildcard is not supported in selector: "${k}=${v}"`);
    }
    if (labels.length === 0)
      issues.warn(`${path}.selector`, "workload selector specified without labels: it selects nothing");
  }
  if (pc.concurrency !== undefined && pc.concurrency < 0)
    issues.error(`${path}.concurrency`, "concurrency must be greater than or equal to 0");
}
