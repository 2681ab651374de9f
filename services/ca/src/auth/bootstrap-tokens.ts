import { timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import {
  AuthenticationError,
  type Authenticator,
  bearerToken,
  type CallCredentials,
  type Caller,
} from "./authenticator.js";

const fileSchema = z.record(
  z.string().min(16, "bootstrap tokens must be at least 16 characters"),
  z.object({ namespace: z.string().min(1), serviceAccount: z.string().min(1) }),
);

/**
 * Authenticates with bootstrap tokens from a file, for local and compose
 * meshes that have no Kubernetes: a JSON object mapping each token to
 * `{ "namespace", "serviceAccount" }`. Read once at start.
 */
export class BootstrapTokenAuthenticator implements Authenticator {
  readonly name = "bootstrap-token";
  readonly #tokens: Array<{ token: Buffer; namespace: string; serviceAccount: string }>;

  constructor(entries: z.infer<typeof fileSchema>) {
    this.#tokens = Object.entries(entries).map(([token, who]) => ({ token: Buffer.from(token), ...who }));
  }

  /** Reads the file; a bad file names the problem but never a token. */
  static fromFile(path: string): BootstrapTokenAuthenticator {
    const parsed = fileSchema.safeParse(JSON.parse(readFileSync(path, "utf8")));
    if (!parsed.success) throw new Error(`${path}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
    return new BootstrapTokenAuthenticator(parsed.data);
  }

  async authenticate(call: CallCredentials): Promise<Caller | undefined> {
    const presented = bearerToken(call.metadata);
    if (!presented) return undefined;
    const bytes = Buffer.from(presented);
    // Constant-time comparison, so response times do not reveal a token's prefix.
    const entry = this.#tokens.find(
      (t) => t.token.length === bytes.length && timingSafeEqual(t.token, bytes),
    );
    if (!entry)
      throw new AuthenticationError(
        "unauthenticated",
        "unknown_bootstrap_token",
        "bootstrap-token: token is not in the bootstrap token file",
      );
    return { namespace: entry.namespace, serviceAccount: entry.serviceAccount, authenticator: this.name };
  }
}
