import type { AgentSettings } from "../settings.js";

/**
 * How long Envoy drains after a SIGTERM: PROXY_CONFIG's
 * terminationDrainDuration when the pod's ProxyConfig sets it, else Istio's
 * TERMINATION_DRAIN_DURATION_SECONDS (default 5 s).
 */
export function terminationDrainMs(
  settings: Pick<AgentSettings, "PROXY_CONFIG" | "TERMINATION_DRAIN_DURATION_SECONDS">,
): number {
  return settings.PROXY_CONFIG.raw.terminationDrainDuration !== undefined
    ? settings.PROXY_CONFIG.terminationDrainDurationMs
    : settings.TERMINATION_DRAIN_DURATION_SECONDS * 1000;
}

/** Istio's default worker count for a sidecar (DefaultProxyConfig's concurrency). */
const SIDECAR_CONCURRENCY = 2;

/**
 * Envoy's worker threads, as pilot-agent decides them: --concurrency when
 * set, else PROXY_CONFIG's (which the settings fill from ISTIO_CPU_LIMIT
 * when it has none; 0 means every core), else 2 for a sidecar; a router's
 * default is unset, so Envoy uses every core.
 */
export function workerThreads(inputs: {
  flag: number;
  configured: number | undefined;
  sidecar: boolean;
}): number | undefined {
  if (inputs.flag > 0) return inputs.flag;
  // An explicit 0 is Istio's "a worker per core": no --concurrency, Envoy's own default.
  if (inputs.configured !== undefined) return inputs.configured === 0 ? undefined : inputs.configured;
  return inputs.sidecar ? SIDECAR_CONCURRENCY : undefined;
}
