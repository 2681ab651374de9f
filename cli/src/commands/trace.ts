import { setTimeout as sleep } from "node:timers/promises";
import Table from "cli-table3";
import { type Command, InvalidArgumentError, Option } from "commander";
import { stringify } from "yaml";
import { type Connection, type ConnectionFlags, resolveConnection } from "../connection.js";

/** One type's part of a proxy's answer, as ingest's GET /v1/trace reports it. */
interface TypeTrace {
  sentAt?: string;
  ackedAt?: string;
  nackedAt?: string;
  nack?: string;
}

/** ingest's GET /v1/trace/{kind}/{namespace}/{name} (services/ingest/src/trace/change-traces.ts). */
interface TraceReport {
  stored: {
    kind: string;
    namespace: string;
    name: string;
    traceId: string;
    generation: number;
    deleted: boolean;
    storedAt: string;
    changedBy: string;
  };
  builds: Array<{ replica: string; builtAt: string }>;
  proxies: Array<{
    proxyId: string;
    replica: string;
    state: "ACKED" | "NACKED" | "SENT" | "UNCHANGED" | "PENDING";
    pushedAt?: string;
    types: Record<string, TypeTrace>;
  }>;
  complete: boolean;
}

/** The resource a trace is asked for. */
interface TraceTarget {
  kind: string;
  namespace: string;
  name: string;
}

/** Istio's short names of the xDS types, by the message name ending the type URL. */
const TYPE_NAMES: Record<string, string> = {
  Cluster: "CDS",
  Listener: "LDS",
  RouteConfiguration: "RDS",
  ClusterLoadAssignment: "EDS",
  Secret: "SDS",
  NameTable: "NDS",
};

/** Commander's codes for a command line it could not parse. */
const USAGE_ERRORS = new Set([
  "commander.invalidArgument",
  "commander.missingArgument",
  "commander.excessArguments",
  "commander.unknownOption",
  "commander.optionMissingArgument",
]);

/** Thrown for a failed operation: exit code 1, the message says what failed and what to do. */
class TraceError extends Error {}

/**
 * `sextantctl trace KIND/NS/NAME`: the last change of a resource, from ingest
 * storing it to every proxy's ACK or NACK. Exit code 0 once every connected
 * proxy has ACKed (or needed nothing), 1 while any has not or on failure,
 * 2 for a malformed argument.
 */
export function registerTrace(program: Command): void {
  program
    .command("trace")
    .description(
      "trace the last change of a resource: when ingest stored it, when push built it, and each proxy's ACK or NACK",
    )
    .argument("<resource>", "KIND/NAMESPACE/NAME, or KIND/NAME with -n", parseTarget)
    .option("-n, --namespace <namespace>", "the namespace of KIND/NAME", "default")
    .option(
      "--wait <seconds>",
      "wait up to this long for every proxy to ACK before reporting",
      parseSeconds,
      0,
    )
    .addOption(
      new Option("-o, --output <format>", "output format")
        .choices(["table", "json", "yaml"])
        .default("table"),
    )
    .addHelpText(
      "after",
      "\nExit codes: 0 every proxy ACKed the change (or needed nothing from it); 1 a proxy has not ACKed yet,\nNACKed it, or the trace could not be read; 2 usage error.",
    )
    // Usage errors exit 2, as documented; commander's default is 1.
    .exitOverride((error) => process.exit(USAGE_ERRORS.has(error.code) ? 2 : error.exitCode))
    .action(
      async (
        target: TraceTarget,
        options: { namespace: string; wait: number; output: "table" | "json" | "yaml" },
      ) => {
        const connection = resolveConnection(program.opts<ConnectionFlags>());
        const resource = { ...target, namespace: target.namespace || options.namespace };
        let report: TraceReport;
        try {
          const deadline = Date.now() + options.wait * 1000;
          report = await readTrace(connection, resource);
          while (!report.complete && Date.now() < deadline) {
            await sleep(250);
            report = await readTrace(connection, resource);
          }
        } catch (error) {
          if (!(error instanceof TraceError)) throw error;
          // Not command.error(): that exits the process, and tests run the program in-process.
          console.error(`error: ${error.message}`);
          process.exitCode = 1;
          return;
        }
        if (options.output === "json") console.log(JSON.stringify(report, null, 2));
        else if (options.output === "yaml") console.log(stringify(report).trimEnd());
        else console.log(formatTrace(report));
        if (!report.complete) process.exitCode = 1;
      },
    );
}

/** Reads the trace from ingest, turning every failure into what to do about it. */
async function readTrace(connection: Connection, target: TraceTarget): Promise<TraceReport> {
  const path = [target.kind, target.namespace, target.name].map(encodeURIComponent).join("/");
  const url = `${connection.ingest}/v1/trace/${path}`;
  const response = await fetch(url, {
    headers: connection.token ? { authorization: `Bearer ${connection.token}` } : {},
  }).catch((error: Error) => {
    throw new TraceError(
      `cannot reach ingest at ${connection.ingest} (${error.cause ?? error.message}); start the mesh or pass --ingest / SEXTANT_INGEST`,
    );
  });
  if (response.ok) return (await response.json()) as TraceReport;
  const body = await response.text();
  const message = (() => {
    try {
      return (JSON.parse(body) as { error?: string }).error ?? body;
    } catch {
      return body;
    }
  })();
  const advice =
    response.status === 401
      ? "pass --token, --token-file or SEXTANT_TOKEN"
      : response.status === 403
        ? "the token needs `get` on this kind and namespace"
        : response.status === 404
          ? "check the kind, namespace and name, or apply a change and trace it within the hour"
          : "see ingest's log";
  throw new TraceError(`ingest answered ${response.status} for ${url}: ${message}; ${advice}`);
}

/** The human report: the change, each build, then one row per proxy and each NACK's message. */
function formatTrace(report: TraceReport): string {
  const { stored } = report;
  const start = Date.parse(stored.storedAt);
  const after = (at: string | undefined) => (at ? `+${Math.max(0, Date.parse(at) - start)}ms` : "-");
  const lines = [
    `${stored.kind} ${stored.namespace}/${stored.name} generation ${stored.generation}${stored.deleted ? " (deleted)" : ""}, trace ${stored.traceId}`,
    `stored by ingest at ${stored.storedAt}${stored.changedBy ? ` (changed by ${stored.changedBy})` : ""}`,
  ];
  if (report.builds.length === 0) lines.push("no push replica has built it yet");
  for (const build of report.builds)
    lines.push(`PushContext built by ${build.replica} at ${build.builtAt} (${after(build.builtAt)})`);
  if (report.proxies.length === 0) {
    lines.push("no proxy is connected");
    return lines.join("\n");
  }
  const table = new Table({
    head: ["PROXY", "REPLICA", "STATE", "TYPES", "SENT", "ACKED", "NACKED"],
    style: { head: [], border: [] },
  });
  const nacks: string[] = [];
  for (const proxy of report.proxies) {
    const types = Object.entries(proxy.types);
    const first = (field: keyof TypeTrace) =>
      types
        .map(([, type]) => type[field])
        .filter((at): at is string => at !== undefined)
        .sort()[0];
    const last = (field: keyof TypeTrace) =>
      types
        .map(([, type]) => type[field])
        .filter((at): at is string => at !== undefined)
        .sort()
        .at(-1);
    table.push([
      proxy.proxyId,
      proxy.replica,
      proxy.state,
      types.map(([typeUrl]) => typeName(typeUrl)).join(",") || "-",
      after(first("sentAt")),
      after(last("ackedAt")),
      after(last("nackedAt")),
    ]);
    for (const [typeUrl, type] of types)
      if (type.nack) nacks.push(`${proxy.proxyId} NACKed ${typeName(typeUrl)}: ${type.nack}`);
  }
  lines.push(table.toString(), ...nacks);
  const waiting = report.proxies.filter((proxy) => proxy.state !== "ACKED" && proxy.state !== "UNCHANGED");
  lines.push(
    waiting.length === 0
      ? `all ${report.proxies.length} proxies ACKed the change or needed nothing from it`
      : `${waiting.length} of ${report.proxies.length} proxies have not ACKed the change`,
  );
  return lines.join("\n");
}

function typeName(typeUrl: string): string {
  const message = typeUrl.slice(typeUrl.lastIndexOf(".") + 1);
  return TYPE_NAMES[message] ?? message;
}

/** KIND/NAMESPACE/NAME, or KIND/NAME (namespace from -n). */
function parseTarget(value: string): TraceTarget {
  const parts = value.split("/");
  if (parts.length === 3 && parts.every(Boolean)) {
    const [kind, namespace, name] = parts as [string, string, string];
    return { kind, namespace, name };
  }
  if (parts.length === 2 && parts.every(Boolean)) {
    const [kind, name] = parts as [string, string];
    return { kind, namespace: "", name };
  }
  throw new InvalidArgumentError(
    "expected KIND/NAMESPACE/NAME (e.g. VirtualService/default/reviews) or KIND/NAME",
  );
}

function parseSeconds(value: string): number {
  const seconds = Number(value.replace(/s$/, ""));
  if (!Number.isFinite(seconds) || seconds < 0)
    throw new InvalidArgumentError("expected seconds, e.g. 30 or 30s");
  return seconds;
}
