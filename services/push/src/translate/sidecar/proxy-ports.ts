import type { MeshProxy } from "../../model/proxy.js";

/** The outbound capture listener's port (virtualOutbound). */
export const VIRTUAL_OUTBOUND_PORT = 15001;
/** The inbound capture listener's port (virtualInbound). */
export const VIRTUAL_INBOUND_PORT = 15006;

/** The node metadata naming the bootstrap's static listeners, and Istio's port for each (the agent always sends them). */
const STATUS_PORTS: ReadonlyArray<[key: string, fallback: number]> = [
  ["ENVOY_STATUS_PORT", 15021],
  ["ENVOY_PROMETHEUS_PORT", 15090],
];
const SECURE_METRICS_PORTS = ["ENVOY_SECURE_METRICS_PORT", "ENVOY_SECURE_MERGED_METRICS_PORT"];

/**
 * The ports of the static listeners in the agent's Envoy bootstrap, as the
 * node's metadata announces them (Istio's EnvoyStatusPort and
 * EnvoyPrometheusPort). Outbound wildcard listeners avoid more: with
 * `assumeDefaults` Istio's 15021 and 15090 when the node names none (a
 * duplicate address is rejected whatever the node said), with
 * `secureMetrics` the secure metrics ports; Istio's inbound side checks
 * only what the node names.
 */
export function staticListenerPorts(
  proxy: MeshProxy,
  options: { assumeDefaults?: boolean; secureMetrics?: boolean } = {},
): number[] {
  const values: unknown[] = STATUS_PORTS.map(
    ([key, fallback]) => proxy.metadata[key] ?? (options.assumeDefaults ? fallback : undefined),
  );
  if (options.secureMetrics) values.push(...SECURE_METRICS_PORTS.map((key) => proxy.metadata[key]));
  return values.map(Number).filter((port) => Number.isInteger(port) && port > 0);
}
