import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse } from "yaml";
import { CommandError } from "./ingest-client.js";

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

/** The keys a config file may hold: the same four as the global flags. */
const CONFIG_KEYS = ["ingest", "push", "token", "tokenFile"] as const;

/**
 * The config file's path: $SEXTANT_CONFIG, else sextant/config.yaml under the
 * XDG config directory ($XDG_CONFIG_HOME, which the XDG Base Directory spec
 * says to ignore unless absolute, else ~/.config).
 */
export function configFilePath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SEXTANT_CONFIG) return env.SEXTANT_CONFIG;
  const xdg = env.XDG_CONFIG_HOME;
  const base = xdg && isAbsolute(xdg) ? xdg : join(env.HOME || homedir(), ".config");
  return join(base, "sextant", "config.yaml");
}

/**
 * Reads the config file; a missing file is an empty config, unless
 * $SEXTANT_CONFIG names it (asked for by name, its absence is a mistake). A
 * relative tokenFile is taken from the file's directory, as kubeconfig does.
 */
export function readConfigFile(env: NodeJS.ProcessEnv = process.env): ConnectionFlags {
  const path = configFilePath(env);
  if (!existsSync(path)) {
    if (env.SEXTANT_CONFIG)
      throw new CommandError(
        `SEXTANT_CONFIG names ${path}, which does not exist: create it or unset SEXTANT_CONFIG`,
      );
    return {};
  }
  let document: unknown;
  try {
    document = parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new CommandError(
      `config file ${path} is not valid YAML: ${(error as Error).message.split("\n")[0]}`,
    );
  }
  if (document === null || document === undefined) return {};
  if (typeof document !== "object" || Array.isArray(document))
    throw new CommandError(`config file ${path} must be a mapping of ${CONFIG_KEYS.join(", ")}`);
  const config: ConnectionFlags = {};
  for (const [key, value] of Object.entries(document)) {
    if (!(CONFIG_KEYS as readonly string[]).includes(key))
      throw new CommandError(`config file ${path}: unknown key "${key}": use ${CONFIG_KEYS.join(", ")}`);
    if (typeof value !== "string" || value === "")
      throw new CommandError(`config file ${path}: "${key}" must be a non-empty string`);
    config[key as (typeof CONFIG_KEYS)[number]] = value;
  }
  if (config.tokenFile) config.tokenFile = resolve(dirname(path), config.tokenFile);
  return config;
}

/**
 * Resolves the connection, each setting from the first source that has it:
 * the flags, then the environment (SEXTANT_INGEST, SEXTANT_PUSH, SEXTANT_TOKEN,
 * SEXTANT_TOKEN_FILE), then the config file ({@link configFilePath}), then the
 * local mesh (ports 8080 and 15014 on 127.0.0.1, and the admin token in
 * .sextant/ of the working directory when it exists). A token and a token
 * file from the same source: the token wins.
 */
export function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env): Connection {
  const sources: ConnectionFlags[] = [
    flags,
    {
      ingest: env.SEXTANT_INGEST,
      push: env.SEXTANT_PUSH,
      token: env.SEXTANT_TOKEN,
      tokenFile: env.SEXTANT_TOKEN_FILE,
    },
    readConfigFile(env),
    {
      ingest: "http://127.0.0.1:8080",
      push: "http://127.0.0.1:15014",
      tokenFile: existsSync(LOCAL_TOKEN_FILE) ? LOCAL_TOKEN_FILE : undefined,
    },
  ];
  const first = (key: "ingest" | "push") => sources.find((source) => source[key])?.[key] as string;
  const tokenSource = sources.find((source) => source.token || source.tokenFile);
  return {
    ingest: first("ingest").replace(/\/$/, ""),
    push: first("push").replace(/\/$/, ""),
    token: tokenSource?.token ?? (tokenSource?.tokenFile ? readTokenFile(tokenSource.tokenFile) : undefined),
  };
}

function readTokenFile(path: string): string {
  try {
    return readFileSync(path, "utf8").trim();
  } catch (error) {
    throw new CommandError(
      `cannot read the token file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}
