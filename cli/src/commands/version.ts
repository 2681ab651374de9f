import type { Command } from "commander";
import { CLIENT_VERSION } from "../client-version.js";
import { action, CommandError, exitOnUsageError, IngestClient } from "../ingest-client.js";
import { formatObject, formatTable, type OutputFormat, outputOption } from "../printing.js";

/** One running process, as ingest's GET /v1/members lists it (sextant-members). */
interface Member {
  service: string;
  version: string;
  instance: string;
  started: string;
}

/** A service at one version: during a rolling upgrade a service has a row per version. */
interface ServiceVersion {
  service: string;
  version: string;
  replicas: number;
  instances: Array<{ instance: string; started: string }>;
}

/**
 * `sextantctl version [-o table|json|yaml]`: the client's version, then each
 * control-plane service's version and replica count, from the membership
 * records every service keeps in sextant-members (read through ingest).
 */
export function registerVersion(program: Command): void {
  program
    .command("version")
    .description("print the client's version and each control-plane service's version and replica count")
    .addOption(outputOption())
    .addHelpText(
      "after",
      "\nExit codes: 0 printed, 1 ingest unreachable or refusing the token (the client version is still printed), 2 usage.",
    )
    .exitOverride(exitOnUsageError)
    .action(
      action(async (options: { output: OutputFormat }) => {
        // As kubectl: the client's version first, whatever the server does.
        if (options.output === "table") console.log(`client version: ${CLIENT_VERSION}`);
        const { status, json } = await new IngestClient(program).request("GET", "/v1/members");
        if (status !== 200)
          throw new CommandError(`ingest answered GET /v1/members with ${status}: ${json.error}`);
        const services = byServiceAndVersion(json.members as Member[]);
        if (options.output !== "table")
          return console.log(formatObject({ clientVersion: CLIENT_VERSION, services }, options.output));
        console.log(
          formatTable(
            ["SERVICE", "VERSION", "REPLICAS"],
            services.map(({ service, version, replicas }) => [service, version, String(replicas)]),
          ),
        );
      }),
    );
}

/** Groups the processes by service and version, sorted. */
function byServiceAndVersion(members: Member[]): ServiceVersion[] {
  const groups = new Map<string, ServiceVersion>();
  for (const { service, version, instance, started } of members) {
    const key = `${service}\u0000${version}`;
    const group = groups.get(key) ?? { service, version, replicas: 0, instances: [] };
    group.replicas++;
    group.instances.push({ instance, started });
    groups.set(key, group);
  }
  return [...groups.values()].sort(
    (a, b) => a.service.localeCompare(b.service) || a.version.localeCompare(b.version),
  );
}
