import { z } from "zod";
import { appProbersSetting } from "../status/app-probers.js";
import { prometheusAnnotationsSetting } from "../status/prometheus-annotations.js";

/** Istio's default terminationDrainDuration (ProxyConfig), in seconds. */
const DEFAULT_TERMINATION_DRAIN_SECONDS = 5;

/**
 * The settings `agent proxy` adds to the agent's: where Envoy is and how it
 * is reached, how long it drains, and the status port's application probes
 * and metrics. `agent run` reads them too but does not use them.
 */
export const envoySettingsShape = {
  /** The Envoy executable (Istio's ProxyConfig binaryPath). */
  ENVOY_BINARY: z.string().min(1).default("/usr/local/bin/envoy"),
  /** Where the bootstrap is written for Envoy's `-c` (Istio: ./etc/istio/proxy/envoy-rev.json). */
  ENVOY_BOOTSTRAP_FILE: z.string().min(1).default("./etc/istio/proxy/envoy-rev.json"),
  /**
   * How long Envoy drains after a SIGTERM before it is stopped, in whole
   * seconds (Istio's variable; PROXY_CONFIG's terminationDrainDuration wins).
   */
  TERMINATION_DRAIN_DURATION_SECONDS: z.coerce
    .number()
    .int()
    .min(0)
    .default(DEFAULT_TERMINATION_DRAIN_SECONDS),
  /** The containers' rewritten probes (Istio's JSON), served under /app-health/ on HTTP_PORT. */
  ISTIO_KUBE_APP_PROBERS: appProbersSetting,
  /** The application's metrics to merge into /stats/prometheus (Istio's JSON of prometheus.io annotations). */
  ISTIO_PROMETHEUS_ANNOTATIONS: prometheusAnnotationsSetting,
  /** Probe the application on localhost instead of INSTANCE_IP, as older Istio did. */
  REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION: z
    .enum(["true", "false", ""])
    .default("false")
    .transform((value) => value === "true"),
};
