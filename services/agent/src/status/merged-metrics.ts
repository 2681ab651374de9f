import type { IncomingMessage, ServerResponse } from "node:http";
import { Counter, type Logger, type Registry } from "@sextant/observability";
import type { AppMetricsTarget } from "./prometheus-annotations.js";

/** Where the merged `/stats/prometheus` takes its three parts from. */
export interface MergedMetricsOptions {
  /** The agent's own registry. */
  registry: Registry;
  /** Envoy's exposition, given the scrape's query string (`?...` or empty). */
  envoyUrl: (query: string) => string;
  /** The application's metrics (ISTIO_PROMETHEUS_ANNOTATIONS), with the loopback host to reach it on. */
  app: (AppMetricsTarget & { host: string }) | undefined;
  logger: Logger;
}

const TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8";
const OPENMETRICS = "application/openmetrics-text";

/** The headers of Prometheus's scrape that istio-agent passes on to Envoy and the application. */
const PASSED_HEADERS = ["accept", "user-agent", "x-prometheus-scrape-timeout-seconds"];

/**
 * The format of the merged answer: the application's when it answered in
 * OpenMetrics (1.0.0 or 0.0.1), else Prometheus text, as istio-agent picks it.
 */
function mergedFormat(appContentType: string | undefined): string {
  if (!appContentType) return TEXT_FORMAT;
  const [mediaType, ...parameters] = appContentType.split(";").map((part) => part.trim());
  if (mediaType?.toLowerCase() !== OPENMETRICS) return TEXT_FORMAT;
  const version = parameters.find((part) => part.startsWith("version="))?.slice("version=".length);
  if (version === "1.0.0") return `${OPENMETRICS}; version=1.0.0; charset=utf-8`;
  if (version === undefined || version === "" || version === "0.0.1")
    return `${OPENMETRICS}; version=0.0.1; charset=utf-8`;
  return TEXT_FORMAT;
}

/** A text that ends its last line, so that the next part starts on its own. */
const endLine = (text: string) => (text === "" || text.endsWith("\n") ? text : `${text}\n`);

/**
 * `/stats/prometheus` on the status port (istio-agent's metrics merging):
 * the agent's own metrics, then Envoy's, then the application's, last
 * because an OpenMetrics exposition ends with `# EOF`. A part that fails is
 * logged and counted and left out; the others are still served.
 */
export function mergedMetricsHandler(
  options: MergedMetricsOptions,
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const scrapes = new Counter({
    name: "istio_agent_scrapes_total",
    help: "Scrapes of the merged /stats/prometheus.",
    registers: [options.registry],
  });
  const failures = new Counter({
    name: "istio_agent_scrape_failures_total",
    help: "Parts of the merged /stats/prometheus that could not be read, by source.",
    labelNames: ["type"],
    registers: [options.registry],
  });
  return async (request, response) => {
    scrapes.inc();
    const query = new URL(request.url ?? "/", "http://agent").search;
    const headers: Record<string, string> = {};
    for (const name of PASSED_HEADERS) {
      const value = request.headers[name];
      if (typeof value === "string" && value !== "") headers[name] = value;
    }
    const timeoutSeconds = Number(headers["x-prometheus-scrape-timeout-seconds"]);
    const signal = timeoutSeconds > 0 ? AbortSignal.timeout(timeoutSeconds * 1000) : undefined;
    const scrape = async (type: string, url: string) => {
      try {
        const answer = await fetch(url, { headers, signal });
        if (answer.status !== 200) throw new Error(`status ${answer.status}`);
        return { text: await answer.text(), contentType: answer.headers.get("content-type") ?? undefined };
      } catch (error) {
        failures.inc({ type });
        options.logger.warn({ url, err: error }, `failed scraping ${type} metrics`);
        return undefined;
      }
    };
    const appUrl = options.app && `http://${options.app.host}:${options.app.port}${options.app.path}`;
    const [envoy, app] = await Promise.all([
      scrape("envoy", options.envoyUrl(query)),
      appUrl ? scrape("application", appUrl) : undefined,
    ]);
    let agent = "";
    try {
      agent = await options.registry.metrics();
    } catch (error) {
      failures.inc({ type: "agent" });
      options.logger.warn({ err: error }, "failed writing the agent's metrics");
    }
    response.writeHead(200, { "content-type": mergedFormat(app?.contentType) });
    response.end(endLine(agent) + endLine(envoy?.text ?? "") + (app?.text ?? ""));
  };
}
