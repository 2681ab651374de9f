import { z } from "zod";
import { jsonSetting } from "../util/json-setting.js";

/** Where the application's own metrics are scraped, from its `prometheus.io/*` annotations. */
export interface AppMetricsTarget {
  port: number;
  path: string;
}

/**
 * ISTIO_PROMETHEUS_ANNOTATIONS: the pod's `prometheus.io/{scrape,path,port}`
 * annotations as the injector saved them (JSON of strings) before pointing
 * them at the agent's merged `/stats/prometheus`. As istio-agent: `scrape:
 * "false"` turns the application's metrics off, the path defaults to
 * `/metrics` and the port to 80.
 */
export const prometheusAnnotationsSetting = jsonSetting(
  z.object(
    { scrape: z.string().optional(), path: z.string().optional(), port: z.string().optional() },
    { message: "must be a JSON object of strings (scrape, path, port)" },
  ),
).transform((fields, ctx): AppMetricsTarget | undefined => {
  if (fields === undefined || fields.scrape === "false") return undefined;
  const port = Number(fields.port || "80");
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      message: `port "${fields.port}" is not a port number`,
    });
    return z.NEVER;
  }
  return { port, path: fields.path || "/metrics" };
});
