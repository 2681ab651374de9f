import type { Command } from "commander";
import { CLIENT_VERSION } from "../client-version.js";
import { type ConnectionFlags, resolveConnection } from "../connection.js";
import { formatObject, formatTable, type OutputFormat, outputOption } from "../printing.js";

/** `sextantctl version [-o table|json|yaml]`: the client's version and whether each service answers. */
export function registerVersion(program: Command): void {
  program
    .command("version")
    .description("print the client's version and each reachable service's state")
    .addOption(outputOption())
    .action(async (options: { output: OutputFormat }) => {
      const connection = resolveConnection(program.opts<ConnectionFlags>());
      const services = [];
      for (const [name, url] of [
        ["ingest", connection.ingest],
        ["push", connection.push],
      ] as const) {
        const state = await fetch(`${url}/ready`).then(
          (response) => (response.ok ? "ready" : `not ready (${response.status})`),
          (error: Error) => `unreachable (${error.message})`,
        );
        services.push({ name, url, state });
      }
      if (options.output !== "table")
        return console.log(formatObject({ clientVersion: CLIENT_VERSION, services }, options.output));
      console.log(`client version: ${CLIENT_VERSION}`);
      console.log(
        formatTable(
          ["SERVICE", "URL", "STATE"],
          services.map(({ name, url, state }) => [name, url, state]),
        ),
      );
    });
}
