import { z } from "zod";
import { jsonSetting } from "../util/json-setting.js";

/**
 * The paths istio-agent serves for rewritten probes: `/app-health/<container>/<probe>`
 * (and Istio's lifecycle hooks under `/app-lifecycle/`).
 */
const APP_PROBER_PATH = /^\/(app-health|app-lifecycle)\/[^/]+\/(livez|readyz|startupz|prestopz|poststartz)$/;

/** Istio requires a number: the injector resolves named ports before it writes the prober. */
const portNumber = z.number().int().min(1).max(65535);

const httpGetAction = z.object({
  path: z.string().default("/"),
  port: portNumber,
  host: z.string().optional(),
  scheme: z.enum(["HTTP", "HTTPS"]).default("HTTP"),
  httpHeaders: z.array(z.object({ name: z.string().min(1), value: z.string() })).default([]),
});

const prober = z
  .object({
    httpGet: httpGetAction.optional(),
    tcpSocket: z.object({ port: portNumber, host: z.string().optional() }).optional(),
    grpc: z.object({ port: portNumber, service: z.string().optional() }).optional(),
    timeoutSeconds: z.number().int().min(0).optional(),
  })
  .refine(
    (value) =>
      [value.httpGet, value.tcpSocket, value.grpc].filter((action) => action !== undefined).length === 1,
    { message: "must have exactly one of httpGet, tcpSocket or grpc" },
  );

/** One rewritten probe, as the injector wrote it into ISTIO_KUBE_APP_PROBERS. */
export type AppProber = z.infer<typeof prober>;

/** The probers by the path the kubelet now asks on the status port. */
export type AppProbers = Map<string, AppProber>;

/**
 * ISTIO_KUBE_APP_PROBERS: Istio's JSON object from a status-port path to the
 * container's original probe. Every entry is checked at start, as
 * istio-agent refuses to start on a bad one: a probe that cannot be performed
 * would otherwise fail the pod later with no hint why.
 */
export const appProbersSetting = jsonSetting(z.record(z.string(), prober)).transform(
  (entries, ctx): AppProbers => {
    const probers: AppProbers = new Map();
    for (const [path, value] of Object.entries(entries ?? {})) {
      if (!APP_PROBER_PATH.test(path)) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          message: `"${path}" is not a prober path: /app-health/<container>/(livez|readyz|startupz)`,
        });
        return z.NEVER;
      }
      probers.set(path, value);
    }
    return probers;
  },
);
