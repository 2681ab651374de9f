import { z } from "zod";

/**
 * The parts of Istio's ProxyConfig (mesh.v1alpha1, as the injector writes it
 * into PROXY_CONFIG: the mesh's defaultConfig merged with the pod's
 * `proxy.istio.io/config`) that the agent acts on, with Istio's defaults.
 */
export interface ProxyConfigView {
  /** push's address (ProxyConfig.discoveryAddress); undefined when PROXY_CONFIG does not set it. */
  discoveryAddress: string | undefined;
  /** How long Envoy drains on SIGTERM before it is stopped (default 5 s). */
  terminationDrainDurationMs: number;
  /** How long Envoy drains on a hot restart (default 45 s). */
  drainDurationMs: number;
  /** Envoy's admin port on the loopback address (default 15000). */
  proxyAdminPort: number;
  /** The agent's status port (default 15020). */
  statusPort: number;
  /** Envoy's worker threads; undefined when unset or 0 (then from the CPU limit, as Istio). */
  concurrency: number | undefined;
  /** Extra environment for the proxy; its ISTIO_META_* entries become node metadata. */
  proxyMetadata: Readonly<Record<string, string>>;
  /** Start the app only once the proxy is ready (default false). */
  holdApplicationUntilProxyStarts: boolean;
  /** The whole object as given (fields the agent does not use included), for the node's PROXY_CONFIG metadata. */
  raw: Readonly<Record<string, unknown>>;
}

/** Istio's defaults (mesh DefaultProxyConfig) for the fields above. */
export const PROXY_CONFIG_DEFAULTS = {
  terminationDrainDuration: "5s",
  drainDuration: "45s",
  proxyAdminPort: 15000,
  statusPort: 15020,
} as const;

/** A google.protobuf.Duration in proto JSON: seconds with up to nine decimals and an "s". */
const DURATION = /^(\d+)(?:\.(\d{1,9}))?s$/;

const duration = z.string().transform((text, ctx) => {
  const match = DURATION.exec(text);
  if (!match) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      message: `must be a duration such as "5s" or "0.5s" (got "${text}")`,
    });
    return z.NEVER;
  }
  return Number(match[1]) * 1000 + Math.round(Number(`0.${match[2] ?? "0"}`) * 1000);
});

// Proto JSON writes int32 as a number and accepts a numeric string.
const int32 = z
  .union([
    z.number(),
    z
      .string()
      .regex(/^-?\d+$/)
      .transform(Number),
  ])
  .pipe(z.number().int());
const port = int32.pipe(z.number().min(1).max(65535));

const proxyConfigSchema = z
  .object({
    discoveryAddress: z.string().min(1).optional(),
    terminationDrainDuration: duration.default(PROXY_CONFIG_DEFAULTS.terminationDrainDuration),
    drainDuration: duration.default(PROXY_CONFIG_DEFAULTS.drainDuration),
    proxyAdminPort: port.default(PROXY_CONFIG_DEFAULTS.proxyAdminPort),
    statusPort: port.default(PROXY_CONFIG_DEFAULTS.statusPort),
    concurrency: int32.pipe(z.number().min(0)).optional(),
    proxyMetadata: z.record(z.string()).default({}),
    holdApplicationUntilProxyStarts: z.boolean().default(false),
  })
  // ProxyConfig has many more fields (tracing, stats matchers...); they are
  // kept for the node metadata, not refused.
  .passthrough();

/** The outcome of {@link parseProxyConfig}: the view, or messages naming each bad field. */
export type ProxyConfigResult = { ok: true; config: ProxyConfigView } | { ok: false; problems: string[] };

/** Reads PROXY_CONFIG's JSON; empty or unset gives Istio's defaults. */
export function parseProxyConfig(text: string | undefined): ProxyConfigResult {
  let raw: unknown = {};
  if (text !== undefined && text.trim() !== "") {
    try {
      raw = JSON.parse(text);
    } catch (error) {
      return { ok: false, problems: [`must be ProxyConfig as JSON (${(error as Error).message})`] };
    }
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return { ok: false, problems: ["must be ProxyConfig as a JSON object"] };
  const parsed = proxyConfigSchema.safeParse(raw);
  if (!parsed.success)
    return {
      ok: false,
      problems: parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`),
    };
  const value = parsed.data;
  return {
    ok: true,
    config: {
      discoveryAddress: value.discoveryAddress,
      terminationDrainDurationMs: value.terminationDrainDuration,
      drainDurationMs: value.drainDuration,
      proxyAdminPort: value.proxyAdminPort,
      statusPort: value.statusPort,
      // 0 is kept: Istio's "one worker per core", not "unset" (which falls back to the CPU limit).
      concurrency: value.concurrency,
      proxyMetadata: value.proxyMetadata,
      holdApplicationUntilProxyStarts: value.holdApplicationUntilProxyStarts,
      raw: raw as Record<string, unknown>,
    },
  };
}
