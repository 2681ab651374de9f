import { z } from "zod";

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
export const prometheusAnnotationsSetting = z
  .string()
  .optional()
  .transform((text, ctx): AppMetricsTarget | undefined => {
    if (text === undefined || text.trim() === "") return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: `not JSON: ${(error as Error).message}` });
      return z.NEVER;
    }
    const fields = z
      .object({ scrape: z.string().optional(), path: z.string().optional(), port: z.string().optional() })
      .safeParse(parsed);
    if (!fields.success) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: "must be a JSON object of strings (scrape, path, port)",
      });
      return z.NEVER;
    }
    if (fields.data.scrape === "false") return undefined;
    const port = Number(fields.data.port || "80");
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        message: `port "${fields.data.port}" is not a port number`,
      });
      return z.NEVER;
    }
    return { port, path: fields.data.path || "/metrics" };
  });
