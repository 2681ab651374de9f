import { type Command, InvalidArgumentError } from "commander";
import { stringify } from "yaml";
import { type ConnectionFlags, resolveConnection } from "../connection.js";
import { action, exitOnUsageError } from "../ingest-client.js";
import { outputOption } from "../printing.js";
import {
  type ConfigFilters,
  clustersTable,
  endpointsTable,
  listenersTable,
  routesTable,
  secretsTable,
} from "../proxy/config-tables.js";
import { findProxy, getPushJson, listProxyStatuses, replicaAddress } from "../proxy/push-debug.js";
import { XDS_COLUMNS } from "../proxy/xds-types.js";

/** The config dump push serves for one proxy: per type, the resources it holds. */
interface ConfigDump {
  proxyId: string;
  configs: Array<{ typeUrl: string; version?: string; resources: unknown[] }>;
}

const byColumn = (column: string) => XDS_COLUMNS.find((type) => type.column === column)!.typeUrl;

/** Each section: its type URL and its table. */
const SECTIONS = {
  clusters: { typeUrl: byColumn("CDS"), table: clustersTable },
  listeners: { typeUrl: byColumn("LDS"), table: listenersTable },
  routes: { typeUrl: byColumn("RDS"), table: routesTable },
  endpoints: { typeUrl: byColumn("EDS"), table: endpointsTable },
  secrets: { typeUrl: byColumn("SDS"), table: secretsTable },
} as const;

type Section = keyof typeof SECTIONS;

const SECTION_NAMES = [...Object.keys(SECTIONS), "all"] as const;

/** istioctl's singular and short names (cluster, c, ...) for the same sections. */
const ALIASES: Record<string, Section | "all"> = {
  cluster: "clusters",
  clusters: "clusters",
  c: "clusters",
  listener: "listeners",
  listeners: "listeners",
  l: "listeners",
  route: "routes",
  routes: "routes",
  r: "routes",
  endpoint: "endpoints",
  endpoints: "endpoints",
  ep: "endpoints",
  secret: "secrets",
  secrets: "secrets",
  s: "secrets",
  all: "all",
};

interface ProxyConfigOptions extends ConfigFilters {
  output: "table" | "json" | "yaml";
}

const port = (value: string): number => {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0 || parsed > 65_535)
    throw new InvalidArgumentError("not a port number");
  return parsed;
};

/** Renders one proxy's dump as tables (one per section, blank-line separated) or as the full resources. */
export function renderConfig(
  dump: ConfigDump,
  section: Section | "all",
  options: ProxyConfigOptions,
): string {
  const sections: Section[] = section === "all" ? (Object.keys(SECTIONS) as Section[]) : [section];
  const resourcesOf = (name: Section) =>
    dump.configs.find((config) => config.typeUrl === SECTIONS[name].typeUrl)?.resources ?? [];
  if (options.output !== "table") {
    const full =
      section === "all"
        ? Object.fromEntries(sections.map((name) => [name, resourcesOf(name)]))
        : resourcesOf(section);
    return options.output === "json" ? JSON.stringify(full, null, 2) : stringify(full).trimEnd();
  }
  return sections.map((name) => SECTIONS[name].table(resourcesOf(name), options)).join("\n\n");
}

/** `sextantctl proxy-config <section> PROXY`: a proxy's config, from the replica holding its stream. */
export function registerProxyConfig(program: Command): void {
  program
    .command("proxy-config")
    .alias("pc")
    .argument(
      "<section>",
      `${SECTION_NAMES.join("|")} (or istioctl's singular and short names)`,
      (value: string) => {
        const section = ALIASES[value];
        if (!section) throw new InvalidArgumentError(`expected one of ${SECTION_NAMES.join(", ")}`);
        return section;
      },
    )
    .argument("<proxy>", "a node id or <pod>.<namespace> (see sextantctl proxy-status)")
    .description(
      "a proxy's listeners, routes, clusters, endpoints or secrets as push sent them, as istioctl's tables",
    )
    .option("--port <port>", "only this port (clusters, listeners, endpoints)", port)
    .option("--name <name>", "only this route config (routes), cluster (endpoints) or secret (secrets)")
    .option("--fqdn <fqdn>", "only services whose FQDN contains this (clusters, endpoints)")
    .option("--subset <subset>", "only this subset (clusters, endpoints)")
    .option("--direction <direction>", "only this direction: inbound or outbound (clusters)")
    .addOption(outputOption("table, or the full resources as json or yaml"))
    .addHelpText("after", "\nExit codes: 0 done, 1 push unreachable/refused or no such proxy, 2 usage.")
    .exitOverride(exitOnUsageError)
    .action(
      action(async (section: Section | "all", proxy: string, options: ProxyConfigOptions) => {
        const connection = resolveConnection(program.opts<ConnectionFlags>());
        const status = findProxy(await listProxyStatuses(connection), proxy);
        const dump = await getPushJson<ConfigDump>(
          connection,
          replicaAddress(connection, status),
          `/debug/config_dump?proxyID=${encodeURIComponent(status.proxyId)}`,
        );
        console.log(renderConfig(dump, section, options));
      }),
    );
}
