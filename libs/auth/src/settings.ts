import { loadKubeConfig } from "@sextant/kube";
import type { Logger } from "@sextant/observability";
import { type Runner, SettingsError } from "@sextant/runtime";
import { z } from "zod";
import type { Authenticator } from "./authenticator.js";
import { AuthChain } from "./chain.js";
import { FailureLimiter } from "./failure-limiter.js";
import { KubernetesAuthenticator } from "./kubernetes.js";
import { TokenFileAuthenticator } from "./token-file.js";

const AUTHENTICATORS = ["kubernetes", "tokens"] as const;

/** The authenticator names API_AUTH lists, in the order they are tried. */
type AuthenticatorName = (typeof AUTHENTICATORS)[number];

const API_AUTH_VALUES = '"kubernetes", "tokens", "kubernetes,tokens" or "none"';

/**
 * The settings of bearer authentication, for a service's settings schema
 * (`baseSettings.extend({...authSettings}).superRefine(checkAuthSettings)`).
 */
export const authSettings = {
  /**
   * The authenticators, tried in order: "kubernetes" (TokenReview and
   * SubjectAccessReview), "tokens" (API_TOKENS_FILE), both comma-separated,
   * or "none" to serve everyone unauthenticated. Unset: "tokens" when
   * API_TOKENS_FILE is set; otherwise the service does not start.
   */
  API_AUTH: z
    .string()
    .optional()
    .transform((value, ctx): AuthenticatorName[] | "none" | undefined => {
      if (value === undefined || value.trim() === "") return undefined;
      if (value.trim() === "none") return "none";
      const names = value.split(",").map((name) => name.trim());
      const unknown = names.filter((name) => !(AUTHENTICATORS as readonly string[]).includes(name));
      if (unknown.length > 0 || new Set(names).size !== names.length) {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: `must be ${API_AUTH_VALUES}` });
        return z.NEVER;
      }
      return names as AuthenticatorName[];
    }),
  /** The token file of the "tokens" authenticator: a YAML list of {subject, token_sha256, namespaces, verbs, kinds}. */
  API_TOKENS_FILE: z.string().min(1).optional(),
  /** Failed authentications a source address may make in a row before it gets 429. */
  API_AUTH_FAILURE_BURST: z.coerce.number().int().positive().default(20),
  /** One more failed authentication is allowed back every this many milliseconds. */
  API_AUTH_FAILURE_REFILL_MS: z.coerce.number().int().positive().default(1_000),
};

const authSettingsObject = z.object(authSettings);

/** The parsed {@link authSettings}. */
type AuthSettings = z.infer<typeof authSettingsObject>;

/**
 * The checks across the auth settings, for a schema's superRefine: some
 * authentication must be configured, or turned off explicitly.
 */
export function checkAuthSettings(settings: AuthSettings, ctx: z.RefinementCtx): void {
  const names = settings.API_AUTH;
  if (names === undefined && settings.API_TOKENS_FILE === undefined) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ["API_AUTH"],
      message: `no authenticator is configured: set API_AUTH to ${API_AUTH_VALUES} (with API_TOKENS_FILE for "tokens"); "none" leaves the API open to anyone who reaches it`,
    });
  }
  if (Array.isArray(names) && names.includes("tokens") && settings.API_TOKENS_FILE === undefined) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      path: ["API_TOKENS_FILE"],
      message: 'must be set when API_AUTH includes "tokens"',
    });
  }
}

/**
 * A service's authentication, built from its settings: a runner to list
 * among the service's, which follows the token file while it runs.
 */
export interface ApiAuth extends Runner {
  readonly chain: AuthChain;
}

/**
 * Builds the authenticators API_AUTH names, in its order; the token file is
 * read now (an invalid one throws a SettingsError) and followed for changes
 * while the runner runs.
 * API_AUTH=none logs a warning, at every start. With neither API_AUTH nor
 * API_TOKENS_FILE (which {@link checkAuthSettings} refuses, where a service
 * uses it), nobody is authenticated: a service whose only authenticated
 * routes are for debugging starts, with those routes closed.
 */
export function createApiAuth(settings: AuthSettings & { KUBECONFIG?: string }, logger: Logger): ApiAuth {
  const names = settings.API_AUTH ?? (settings.API_TOKENS_FILE ? ["tokens" as const] : []);
  const limiter = new FailureLimiter({
    burst: settings.API_AUTH_FAILURE_BURST,
    refillMs: settings.API_AUTH_FAILURE_REFILL_MS,
  });
  if (names === "none") {
    logger.warn("API_AUTH=none: the API is open to anyone who can reach the port, without authentication");
    return {
      name: "api-auth",
      chain: new AuthChain([], limiter, "open"),
      start: async () => {},
      close: async () => {},
    };
  }
  if (names.length === 0) {
    logger.warn("API_AUTH is not set: no token is accepted, authenticated routes answer 401 to everyone");
  }
  let tokens: TokenFileAuthenticator | undefined;
  const authenticators: Authenticator[] = names.map((name) => {
    if (name === "kubernetes") return new KubernetesAuthenticator(loadKubeConfig(settings.KUBECONFIG));
    try {
      tokens = new TokenFileAuthenticator(settings.API_TOKENS_FILE as string, logger);
    } catch (error) {
      // A bad file is a bad setting: the service exits 2 naming it, as for any other.
      throw new SettingsError([`API_TOKENS_FILE: ${(error as Error).message}`]);
    }
    return tokens;
  });
  logger.info({ authenticators: names }, "API authentication");
  return {
    name: "api-auth",
    chain: new AuthChain(authenticators, limiter),
    start: async () => tokens?.watch(),
    close: async () => tokens?.close(),
  };
}
