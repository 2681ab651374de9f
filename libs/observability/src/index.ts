export {
  type HealthServer,
  type HealthServerOptions,
  JsonAnswer,
  type JsonRoute,
  ReadinessGate,
  type RequestHandler,
  startHealthServer,
} from "./health-server.js";
export { createLogger, LOG_LEVELS, type Logger, type LoggerOptions } from "./logger.js";
export { Counter, createMetricsRegistry, Gauge, Histogram, Registry, Summary } from "./metrics.js";
export { startTelemetry, type Telemetry } from "./telemetry.js";
