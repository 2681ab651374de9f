import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onCleanup } from "./cleanup.js";

/** The bearer token the debug endpoints of services started by tests accept (see {@link debugTokenEnv}). */
export const DEBUG_TOKEN = "sextant-test-debug-token";

/** Headers that authenticate a request to a debug endpoint (/debug/syncz, /debug/config_dump, /debug/registryz). */
export const DEBUG_HEADERS: Readonly<Record<string, string>> = { authorization: `Bearer ${DEBUG_TOKEN}` };

let tokenFile: string | undefined;

/**
 * The settings that make push's or discovery's debug endpoints accept
 * {@link DEBUG_TOKEN}: API_AUTH=tokens with a token file (written once per
 * test process, removed at its end) granting it the `debug` verb only.
 */
export function debugTokenEnv(): Record<string, string> {
  if (!tokenFile) {
    const dir = mkdtempSync(join(tmpdir(), "sextant-debug-token-"));
    tokenFile = join(dir, "api-tokens.yaml");
    const hash = createHash("sha256").update(DEBUG_TOKEN).digest("hex");
    // JSON is YAML: one entry, the debug verb only.
    writeFileSync(
      tokenFile,
      JSON.stringify([
        { subject: "test-debug", token_sha256: hash, namespaces: ["*"], verbs: ["debug"], kinds: ["*"] },
      ]),
    );
    onCleanup("debug token file", () => rmSync(dir, { recursive: true, force: true }));
  }
  return { API_AUTH: "tokens", API_TOKENS_FILE: tokenFile };
}
