import type { RequestHandler } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";

/** A runner that serves a request handler on the service's HTTP port while it runs. */
export function httpApiRunner(
  http: { mount(handler: RequestHandler | undefined): void },
  handler: () => RequestHandler,
): Runner {
  return {
    name: "http-api",
    start: async () => http.mount(handler()),
    close: async () => http.mount(undefined),
  };
}
