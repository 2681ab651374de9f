// What every command that talks to ingest shares: the request with the token,
// errors that say what failed and what to do, and the exit codes.
import type { Command, CommanderError } from "commander";
import { type ConnectionFlags, resolveConnection } from "./connection.js";

/** sextantctl's exit codes (documented in README.md). */
export const ExitCode = {
  ok: 0,
  /** Findings (analyze), or an operation that failed (refused, not found, unreachable). */
  failed: 1,
  /** The command line itself is wrong: an unknown kind, missing or contradictory flags. */
  usage: 2,
} as const;

/** An error a command reports as `error: <message>` and the exit code it ends with. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = ExitCode.failed,
  ) {
    super(message);
  }
}

/**
 * Wraps a command's action: a CommandError (or any other error) is printed to
 * stderr and sets the exit code, instead of a stack trace.
 */
export function action<A extends unknown[]>(
  run: (...args: A) => Promise<void>,
): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await run(...args);
    } catch (error) {
      console.error(`error: ${(error as Error).message}`);
      process.exitCode = error instanceof CommandError ? error.exitCode : ExitCode.failed;
    }
  };
}

/**
 * commander's own command-line errors (a missing -f, an unknown flag, a
 * missing argument) exit with the usage code 2 instead of commander's 1;
 * help and version exit as commander says. commander has already printed the message.
 */
export function exitOnUsageError(error: CommanderError): never {
  process.exit(error.exitCode === 0 ? 0 : ExitCode.usage);
}

/** An answer of ingest's API: the status and the parsed JSON body. */
export interface IngestAnswer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: the API's JSON, read by each command for its own fields.
  json: any;
}

/** How many times a request ingest refuses as overloaded (429) is sent before giving up. */
const OVERLOAD_ATTEMPTS = 5;

/** Calls ingest's API with the connection of the program's global flags. */
export class IngestClient {
  readonly #url: string;
  readonly #token: string | undefined;

  constructor(program: Command) {
    const connection = resolveConnection(program.opts<ConnectionFlags>());
    this.#url = connection.ingest;
    this.#token = connection.token;
  }

  /**
   * Sends a request; an unreachable ingest, a refused token (401/403) and a
   * non-JSON answer throw CommandErrors that say what to do. Other statuses
   * are the caller's to read.
   */
  async request(method: string, path: string, body?: string): Promise<IngestAnswer> {
    // ingest at its MAX_REQUESTS_IN_FLIGHT refuses before doing anything, so
    // the request is repeated after Retry-After, as client-go does for kubectl.
    for (let attempt = 1; ; attempt++) {
      const answer = await this.#send(method, path, body);
      if (answer.status !== 429 || answer.json?.reason !== "overloaded") return answer;
      if (attempt === OVERLOAD_ATTEMPTS)
        throw new CommandError(
          `${answer.json.error} (${attempt} attempts): ingest is overloaded; try again later`,
        );
      await new Promise((resolve) => setTimeout(resolve, answer.retryAfterMs));
    }
  }

  async #send(
    method: string,
    path: string,
    body: string | undefined,
  ): Promise<IngestAnswer & { retryAfterMs: number }> {
    const headers: Record<string, string> = {};
    if (this.#token) headers.authorization = `Bearer ${this.#token}`;
    if (body !== undefined) headers["content-type"] = "application/yaml";
    let response: Response;
    try {
      response = await fetch(`${this.#url}${path}`, { method, headers, body });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (error as Error).message;
      throw new CommandError(
        `cannot reach ingest at ${this.#url} (${reason}): start the mesh, or point --ingest (or SEXTANT_INGEST) at ingest's API`,
      );
    }
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new CommandError(
        `ingest at ${this.#url} answered ${method} ${path} with ${response.status}, not JSON: ${text.slice(0, 200)}`,
      );
    }
    const error = (json as { error?: string }).error;
    if (response.status === 401)
      throw new CommandError(
        `ingest refused the credentials (401: ${error}): pass --token or --token-file (or SEXTANT_TOKEN, SEXTANT_TOKEN_FILE)`,
      );
    if (response.status === 403)
      throw new CommandError(`${error}: ask for the permission, or use another token`);
    if (response.status === 429 && (json as { reason?: string }).reason !== "overloaded")
      throw new CommandError(`${error}: too many failed logins; wait and retry with a valid token`);
    const retryAfter = Number(response.headers.get("retry-after") ?? 1);
    return {
      status: response.status,
      json,
      retryAfterMs: Number.isFinite(retryAfter) ? retryAfter * 1000 : 1000,
    };
  }
}
