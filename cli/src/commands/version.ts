import Table from "cli-table3";
import { type Command, Option } from "commander";
import { stringify } from "yaml";
import { CLIENT_VERSION } from "../client-version.js";
import { type ConnectionFlags, resolveConnection } from "../connection.js";

/** `sextantctl version [-o table|json|yaml]`: the client's version and whether each service answers. */
export function registerVersion(program: Command): void {
  program
    .command("version")
    .description("print the client's version and each reachable service's state")
    .addOption(
      new Option("-o, --output <format>", "output format")
        .choices(["table", "json", "yaml"])
        .default("table"),
    )
    .action(async (options: { output: "table" | "json" | "yaml" }) => {
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
      const report = { clientVersion: CLIENT_VERSION, services };
      if (options.output === "json") return console.log(JSON.stringify(report, null, 2));
      if (options.output === "yaml") return console.log(stringify(report).trimEnd());
      console.log(`client version: ${CLIENT_VERSION}`);
      const table = new Table({ head: ["SERVICE", "URL", "STATE"], style: { head: [], border: [] } });
      for (const { name, url, state } of services) table.push([name, url, state]);
      console.log(table.toString());
    });
}
