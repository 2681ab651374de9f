import { existsSync } from "node:fs";
import { LOG_LEVELS } from "@sextant/observability";
import parseDuration from "parse-duration";
import { z } from "zod";
import { DEFAULT_NATS_URL } from "./ports.js";

/** Thrown when an environment variable has a bad value; the message names each one. */
export class SettingsError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid settings:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "SettingsError";
  }
}

/** A TCP port from an environment variable (0 lets the OS choose, for tests). */
export const portSetting = (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback);

/** A duration in milliseconds from an environment variable. */
export const millisecondsSetting = (fallback: number) => z.coerce.number().int().min(0).default(fallback);

/**
 * A duration in seconds from an environment variable: plain seconds, or Go's
 * duration syntax as Istio's variables take it (`90s`, `24h`, `1h30m`,
 * `24h0m0s`), days (`90d`) too. parse-duration reads the units; the result
 * must be a positive whole number of seconds.
 */
export const durationSecondsSetting = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const text = value.trim();
      // Digits alone are seconds; parse-duration would take them as its default unit.
      const seconds = /^\d+$/.test(text) ? Number(text) : parseDuration(text, "s");
      if (seconds === null || !Number.isInteger(seconds) || seconds <= 0) {
        ctx.addIssue({
          code: z.ZodIssueCode.custom,
          message: "must be a positive duration such as 3600, 90s, 24h or 90d",
        });
        return z.NEVER;
      }
      return seconds;
    });

/**
 * How a service connects to NATS besides NATS_URL. Unset user and password
 * mean no authentication, as a local nats-server runs; under Kubernetes they
 * come from a Secret, and the server's permissions for that user name the
 * only buckets and subjects the service may use. Part of baseSettings;
 * @sextant/bus's runner reads them (see {@link readNatsClientSettings}).
 */
export const natsClientSettings = z.object({
  /** The NATS user this service connects as; set with NATS_PASSWORD. */
  NATS_USER: z.string().min(1).optional(),
  /** That user's password. */
  NATS_PASSWORD: z.string().min(1).optional(),
  /**
   * The subject prefix of this connection's replies. A NATS user may only
   * subscribe to its own prefix, so no service can read another's replies
   * (KV reads, watch deliveries).
   */
  NATS_INBOX_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/, "must be a NATS subject without wildcards")
    .default("_INBOX"),
  /** Stream replicas of the KV buckets this service creates: 3 on a 3-node JetStream cluster. */
  NATS_KV_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /**
   * The CA (PEM) that NATS's serving certificate must chain to. Set, the
   * connection is TLS or nothing: a server that does not offer TLS, or one
   * with a certificate from anyone else, is refused, so the password is
   * never sent in the clear or to an impostor.
   */
  NATS_TLS_CA_FILE: z.string().min(1).optional(),
});

/** The parsed {@link natsClientSettings}. */
export type NatsClientSettings = z.infer<typeof natsClientSettings>;

/**
 * Reads {@link natsClientSettings} from the environment; a SettingsError
 * names a bad variable. NATS_USER and NATS_PASSWORD must come together, and
 * NATS_TLS_CA_FILE must exist: these checks cannot live in baseSettings, which services extend (a refined zod
 * object has no extend()).
 */
export function readNatsClientSettings(
  env: Record<string, string | undefined> = process.env,
): NatsClientSettings {
  return parseSettings(
    natsClientSettings
      .refine((s) => (s.NATS_USER === undefined) === (s.NATS_PASSWORD === undefined), {
        message: "NATS_USER and NATS_PASSWORD must be set together",
        path: [env.NATS_USER === undefined ? "NATS_USER" : "NATS_PASSWORD"],
      })
      // Checked here, not on the first connection: a connection that waits for
      // its server would retry a missing file forever instead of stopping.
      .refine((s) => s.NATS_TLS_CA_FILE === undefined || existsSync(s.NATS_TLS_CA_FILE), {
        message: "no such file",
        path: ["NATS_TLS_CA_FILE"],
      }),
    env,
  );
}

/** The settings every service reads. */
export const baseSettings = z.object({
  NATS_URL: z
    .string()
    .default(DEFAULT_NATS_URL)
    .refine((value) => value.split(",").every((url) => /^(nats|tls|wss?):\/\/[^\s]+$/.test(url.trim())), {
      message: "must be one or more comma-separated nats:// URLs",
    }),
  ...natsClientSettings.shape,
  LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
  /** Identifies this replica in logs, status and leases; the pod name under Kubernetes. */
  REPLICA_ID: z
    .string()
    .min(1)
    .default(`${process.env.HOSTNAME ?? "local"}-${process.pid}`),
});

/** A service's settings schema: the base settings plus at least its HTTP_PORT. */
export type ServiceSettingsSchema = z.ZodType<
  z.infer<typeof baseSettings> & { HTTP_PORT: number },
  z.ZodTypeDef,
  unknown
>;

/**
 * Reads and validates settings from the environment. Every bad variable is
 * reported at once, by name, with the value it had.
 */
export function parseSettings<Schema extends z.ZodTypeAny>(
  schema: Schema,
  env: Record<string, string | undefined> = process.env,
): z.infer<Schema> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  throw new SettingsError(
    result.error.issues.map((issue) => {
      const name = issue.path.join(".");
      const value = env[name];
      return `${name}: ${issue.message}${value === undefined ? "" : ` (got ${JSON.stringify(value)})`}`;
    }),
  );
}
