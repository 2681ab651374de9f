import { createLogger, type Logger } from "@sextant/observability";

/** Logs of the code under test: silent unless TEST_LOG_LEVEL says otherwise. */
export const testLogger: Logger = createLogger({
  service: "agent-test",
  level: (process.env.TEST_LOG_LEVEL ?? "silent") as "silent",
});
