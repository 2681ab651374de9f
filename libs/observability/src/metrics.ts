import { collectDefaultMetrics, Registry } from "prom-client";

/** A Prometheus registry for one service, with Node's process metrics. */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

export { Counter, Gauge, Histogram, Registry, Summary } from "prom-client";
