import { type DestinationStream, type Logger as PinoLogger, pino } from "pino";

/** A structured JSON logger (pino). Every line carries the service name. */
export type Logger = PinoLogger;

/** Log levels accepted by LOG_LEVEL, from most to least verbose. */
export const LOG_LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  service: string;
  level?: (typeof LOG_LEVELS)[number];
  /** Where lines go; standard output by default. Tests pass a stream to read them. */
  destination?: NodeJS.WritableStream;
}

/**
 * Creates the process logger: one JSON object per line with `time`, `level`
 * (as a name, which humans and log pipelines both read), `service` and `msg`.
 */
export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level ?? "info",
      base: { service: options.service },
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
      // Credentials must never reach a log line, whatever object is logged.
      redact: {
        paths: ["token", "*.token", "authorization", "*.authorization", "privateKey", "*.privateKey"],
        censor: "[redacted]",
      },
    },
    (options.destination ?? process.stdout) as DestinationStream,
  );
}
