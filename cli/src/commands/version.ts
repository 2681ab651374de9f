import type { Command } from "commander";
import { CLIENT_VERSION } from "../client-version.js";
import { type ConnectionFlags, resolveConnection } from "../connection.js";

/** `sextantctl version`: the client's version and whether each service answers. */
export function registerVersion(program: Command): void {
  program
    .command("version")
    .description("print the client's version and each reachable service's")
    .action(async () => {
      const connection = resolveConnection(program.opts<ConnectionFlags>());
      console.log(`client version: ${CLIENT_VERSION}`);
      for (const [name, url] of [
        ["ingest", connection.ingest],
        ["push", connection.push],
      ] as const) {
        const ready = await fetch(`${url}/ready`).then(
          (response) => (response.ok ? "ready" : `not ready (${response.status})`),
          (error: Error) => `unreachable (${error.message})`,
        );
        console.log(`${name}: ${url} ${ready}`);
      }
    });
}
