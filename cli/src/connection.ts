import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Where sextantctl finds the mesh, and how it proves who it is. */
export interface Connection {
  /** Ingest's API, e.g. http://127.0.0.1:8080. */
  readonly ingest: string;
  /** Push's HTTP port (/debug/*), e.g. http://127.0.0.1:15014. */
  readonly push: string;
  /** The bearer token sent to both, if any. */
  readonly token: string | undefined;
}

/** The flags every command takes to reach the mesh. */
export interface ConnectionFlags {
  ingest?: string;
  push?: string;
  token?: string;
  tokenFile?: string;
}

/** The local mesh's admin token, written by `npm run demo` and `pnpm dev` (scripts/lib/control-plane.mjs). */
const LOCAL_TOKEN_FILE = join(".sextant", "api-admin-token");

/**
 * Resolves the connection: flags first, then the environment (SEXTANT_INGEST,
 * SEXTANT_PUSH, SEXTANT_TOKEN, SEXTANT_TOKEN_FILE), then the local mesh's
 * defaults (ports 8080 and 15014 on 127.0.0.1, and the admin token in
 * .sextant/ of the working directory when it exists).
 */
export function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): Connection {
  const tokenFile = flags.tokenFile ?? env.SEXTANT_TOKEN_FILE;
  const token =
    flags.token ??
    env.SEXTANT_TOKEN ??
    (tokenFile ? readFileSync(tokenFile, "utf8").trim() : undefined) ??
    (existsSync(LOCAL_TOKEN_FILE) ? readFileSync(LOCAL_TOKEN_FILE, "utf8").trim() : undefined);
  return {
    ingest: (flags.ingest ?? env.SEXTANT_INGEST ?? "http://127.0.0.1:8080").replace(/\/$/, ""),
    push: (flags.push ?? env.SEXTANT_PUSH ?? "http://127.0.0.1:15014").replace(/\/$/, ""),
    token,
  };
}
