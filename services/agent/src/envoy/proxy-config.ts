/** The ProxyConfig fields `agent proxy` needs, from PROXY_CONFIG (the pod's `proxy.istio.io/config`). */
export interface EnvoyProxyConfig {
  /** Envoy's --drain-time-s (Istio's drainDuration, default 45 s). */
  drainDurationSeconds: number;
  /** How long Envoy drains after a SIGTERM, when PROXY_CONFIG sets it. */
  terminationDrainDurationSeconds: number | undefined;
  /** Envoy's worker threads when PROXY_CONFIG sets them (0 lets Envoy use every core). */
  concurrency: number | undefined;
}

/** Istio's DefaultProxyConfig drainDuration. */
const DEFAULT_DRAIN_DURATION_SECONDS = 45;

/** A protobuf Duration in its JSON form (`5s`, `1.5s`), in seconds. */
function durationSeconds(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  const match = typeof value === "string" ? /^(\d+(?:\.\d+)?)s$/.exec(value.trim()) : null;
  if (!match) throw new Error(`PROXY_CONFIG ${field}: "${String(value)}" is not a duration such as "5s"`);
  return Number(match[1]);
}

/**
 * Reads the fields above from PROXY_CONFIG, the JSON ProxyConfig the injector
 * sets. Kept to these fields on purpose: the agent's settings own the rest of
 * PROXY_CONFIG, and this function is the one place to point at them.
 */
export function envoyProxyConfig(env: NodeJS.ProcessEnv): EnvoyProxyConfig {
  const text = env.PROXY_CONFIG?.trim();
  let config: Record<string, unknown> = {};
  if (text) {
    try {
      config = JSON.parse(text) as Record<string, unknown>;
    } catch (error) {
      throw new Error(`PROXY_CONFIG is not JSON: ${(error as Error).message}`);
    }
    if (typeof config !== "object" || config === null || Array.isArray(config))
      throw new Error("PROXY_CONFIG must be a JSON object");
  }
  const concurrency = config.concurrency ?? undefined;
  if (
    concurrency !== undefined &&
    (typeof concurrency !== "number" || !Number.isInteger(concurrency) || concurrency < 0)
  )
    throw new Error(`PROXY_CONFIG concurrency: ${JSON.stringify(concurrency)} is not a number of threads`);
  return {
    drainDurationSeconds:
      durationSeconds(config.drainDuration, "drainDuration") ?? DEFAULT_DRAIN_DURATION_SECONDS,
    terminationDrainDurationSeconds: durationSeconds(
      config.terminationDrainDuration,
      "terminationDrainDuration",
    ),
    concurrency: concurrency as number | undefined,
  };
}

/** Istio's default worker count for a sidecar (DefaultProxyConfig's concurrency). */
const SIDECAR_CONCURRENCY = 2;

/**
 * Envoy's worker threads, as pilot-agent decides them: --concurrency when
 * set, else PROXY_CONFIG's, else 2 for a sidecar; a router's default is
 * unset (every core), or one per started CPU of the pod's CPU limit when the
 * downward API gives it (in millicores). Undefined or 0: Envoy's own default.
 */
export function workerThreads(inputs: {
  flag: number;
  configured: number | undefined;
  sidecar: boolean;
  cpuLimitMillis: number | undefined;
}): number | undefined {
  if (inputs.flag > 0) return inputs.flag;
  if (inputs.configured !== undefined) return inputs.configured;
  if (inputs.sidecar) return SIDECAR_CONCURRENCY;
  return inputs.cpuLimitMillis && inputs.cpuLimitMillis > 0
    ? Math.ceil(inputs.cpuLimitMillis / 1000)
    : undefined;
}
