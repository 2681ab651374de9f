import { LOG_LEVELS } from "@sextant/observability";
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

/** The settings every service reads. */
export const baseSettings = z.object({
  NATS_URL: z
    .string()
    .default(DEFAULT_NATS_URL)
    .refine((value) => value.split(",").every((url) => /^(nats|tls|wss?):\/\/[^\s]+$/.test(url.trim())), {
      message: "must be one or more comma-separated nats:// URLs",
    }),
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
