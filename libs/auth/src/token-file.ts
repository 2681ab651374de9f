import { createHash, timingSafeEqual } from "node:crypto";
import { type FSWatcher, readFileSync, watch } from "node:fs";
import { basename, dirname } from "node:path";
import type { Logger } from "@sextant/observability";
import { KINDS } from "@sextant/validation";
import { parse } from "yaml";
import { z } from "zod";
import { type AccessRequest, type Decision, VERBS } from "./access.js";
import type { Authenticator, Identity } from "./authenticator.js";

const WILDCARD = "*";

/** A non-empty list of names, `"*"` for any; with `known`, each must be one of them. */
const list = (known?: readonly string[]) =>
  z
    .array(
      z
        .string()
        .min(1)
        .refine((name) => name === WILDCARD || !known || known.includes(name), {
          message: `must be "*" or one of ${known?.join(", ")}`,
        }),
    )
    .min(1, { message: 'must name at least one, or "*"' });

const tokenEntry = z
  .object({
    subject: z.string().min(1),
    token_sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/i, "must be the SHA-256 of the token, 64 hex digits (never the token itself)"),
    namespaces: list(),
    verbs: list(VERBS),
    kinds: list([...KINDS.keys()]),
  })
  .strict();

const tokenFile = z.array(tokenEntry).superRefine((entries, ctx) => {
  const seen = new Map<string, number>();
  for (const [index, entry] of entries.entries()) {
    const hash = entry.token_sha256.toLowerCase();
    const earlier = seen.get(hash);
    if (earlier !== undefined) {
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: [index, "token_sha256"],
        message: `the same token as entry ${earlier}`,
      });
    }
    seen.set(hash, index);
  }
});

/** One entry of a token file. */
type TokenEntry = z.infer<typeof tokenEntry>;

interface LoadedEntry {
  readonly entry: TokenEntry;
  readonly hash: Buffer;
}

/** The SHA-256 of a token, in hex, as a token file's token_sha256 holds it. */
export function tokenSha256(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/**
 * Reads and checks a token file: a YAML list of `{subject, token_sha256,
 * namespaces, verbs, kinds}`. Throws an error naming the file, the entry and
 * the field of the first problems.
 */
export function readTokenFile(path: string): TokenEntry[] {
  let document: unknown;
  try {
    document = parse(readFileSync(path, "utf8")) ?? [];
  } catch (error) {
    throw new Error(`token file ${path}: ${(error as Error).message}`);
  }
  const result = tokenFile.safeParse(document);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => `${fieldPath(issue.path)}: ${issue.message}`);
    throw new Error(`token file ${path}: ${problems.join("; ")}`);
  }
  return result.data;
}

/** How soon after a change event the file is read again: a writer's several events give one reload. */
const RELOAD_DELAY_MS = 100;

/**
 * The token-file authenticator (`API_TOKENS_FILE`). The file holds hashes,
 * never tokens; a presented token is hashed and compared with every entry in
 * constant time. The file is read again when its directory changes (a
 * Kubernetes Secret volume swaps a symlink rather than writing the file); a
 * reload that fails keeps the last good tokens and logs why.
 */
export class TokenFileAuthenticator implements Authenticator {
  readonly name = "tokens";
  private entries: LoadedEntry[];
  /** The entry each identity came from: one subject may have several tokens with different grants. */
  private readonly grants = new WeakMap<Identity, TokenEntry>();
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;

  /** Reads the file now; throws if it is invalid, so a service does not start with a bad one. */
  constructor(
    private readonly path: string,
    private readonly logger: Logger,
  ) {
    this.entries = load(path);
  }

  /** Starts following changes to the file. */
  watch(): void {
    if (this.watcher) return;
    const file = basename(this.path);
    this.watcher = watch(dirname(this.path), (_event, changed) => {
      // Any change in a Secret volume may be the swap that replaced the file.
      if (changed !== null && changed !== file && !changed.startsWith("..")) return;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.reload(), RELOAD_DELAY_MS);
    });
    this.watcher.on("error", (error) =>
      this.logger.warn({ err: error, file: this.path }, "token file watch failed"),
    );
  }

  /** Stops following changes. */
  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** Reads the file again; on a problem keeps the tokens it had and logs why. */
  reload(): void {
    try {
      this.entries = load(this.path);
      this.logger.info({ file: this.path, tokens: this.entries.length }, "token file reloaded");
    } catch (error) {
      this.logger.error(
        { file: this.path, err: (error as Error).message },
        "token file is invalid; keeping the tokens it had before",
      );
    }
  }

  async authenticate(token: string): Promise<Identity | undefined> {
    const hash = createHash("sha256").update(token).digest();
    let found: TokenEntry | undefined;
    // Every entry is compared, so how long this takes does not tell which matched.
    for (const loaded of this.entries) {
      if (timingSafeEqual(loaded.hash, hash) && !found) found = loaded.entry;
    }
    if (!found) return undefined;
    const identity: Identity = { subject: found.subject, groups: [], authenticator: this.name };
    this.grants.set(identity, found);
    return identity;
  }

  async authorize(identity: Identity, request: AccessRequest): Promise<Decision> {
    const entry = this.grants.get(identity);
    if (!entry) return { allowed: false, reason: "the token file did not authenticate this identity" };
    const allowed =
      matches(entry.verbs, request.verb) &&
      (request.verb === "debug" ||
        (matches(entry.kinds, request.kind) && matches(entry.namespaces, request.namespace)));
    return allowed ? { allowed } : { allowed, reason: "the token file does not grant it" };
  }
}

/** A zod issue's path as the YAML's reader would name it: `[2].kinds[0]`. */
function fieldPath(path: ReadonlyArray<string | number>): string {
  if (path.length === 0) return "the file";
  return path.map((part) => (typeof part === "number" ? `[${part}]` : `.${part}`)).join("");
}

function matches(granted: readonly string[], wanted: string | undefined): boolean {
  return granted.includes(WILDCARD) || (wanted !== undefined && granted.includes(wanted));
}

function load(path: string): LoadedEntry[] {
  return readTokenFile(path).map((entry) => ({ entry, hash: Buffer.from(entry.token_sha256, "hex") }));
}
