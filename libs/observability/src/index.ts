export { createLogger, LOG_LEVELS, type Logger, type LoggerOptions } from "./logger.js";
export { createMetricsRegistry, Counter, Gauge, Histogram, Registry, Summary } from "./metrics.js";
export {
  ReadinessGate,
  startHealthServer,
  type HealthServer,
  type HealthServerOptions,
} from "./health-server.js";
export { startTelemetry, type Telemetry } from "./telemetry.js";
