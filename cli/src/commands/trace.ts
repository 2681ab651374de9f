import { setTimeout as sleep } from "node:timers/promises";
import Table from "cli-table3";
import { type Command, InvalidArgumentError } from "commander";
import { stringify } from "yaml";
import { action, CommandError, ExitCode, exitOnUsageError, IngestClient } from "../ingest-client.js";
import { resolveKind } from "../kinds.js";
import { outputOption } from "../printing.js";

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
    .addOption(outputOption())
    .addHelpText(
      "after",
      "\nExit codes: 0 every proxy ACKed the change (or needed nothing from it); 1 a proxy has not ACKed yet,\nNACKed it, or the trace could not be read; 2 usage error.",
    )
    .exitOverride(exitOnUsageError)
    .action(
      action(
        async (
          target: TraceTarget,
          options: { namespace: string; wait: number; output: "table" | "json" | "yaml" },
        ) => {
          const ingest = new IngestClient(program);
          const resource = {
            kind: resolveKind(target.kind).kind,
            namespace: target.namespace || options.namespace,
            name: target.name,
          };
          const deadline = Date.now() + options.wait * 1000;
          let report = await readTrace(ingest, resource);
          while (!report.complete && Date.now() < deadline) {
            await sleep(250);
            report = await readTrace(ingest, resource);
          }
          if (options.output === "json") console.log(JSON.stringify(report, null, 2));
          else if (options.output === "yaml") console.log(stringify(report).trimEnd());
          else console.log(formatTrace(report));
          if (!report.complete) process.exitCode = ExitCode.failed;
        },
      ),
    );
}

/** Reads the trace from ingest; a resource with no recorded change says what to do. */
async function readTrace(ingest: IngestClient, target: TraceTarget): Promise<TraceReport> {
  const path = [target.kind, target.namespace, target.name].map(encodeURIComponent).join("/");
  const { status, json } = await ingest.request("GET", `/v1/trace/${path}`);
  if (status === 200) return json as TraceReport;
  if (status === 404)
    throw new CommandError(
      `${json.error}: check the kind, namespace and name, or apply a change and trace it within the hour`,
    );
  throw new CommandError(
    `ingest answered ${status} for the trace of ${path}: ${json.error}; see ingest's log`,
  );
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
