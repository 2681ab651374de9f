import type { Command } from "commander";
import { action, CommandError, exitOnUsageError, IngestClient } from "../ingest-client.js";
import { resolveKind } from "../kinds.js";
import { formatObject, formatTable, outputFormat } from "../printing.js";
import { configPath } from "./apply.js";

interface GetFlags {
  namespace: string;
  allNamespaces?: boolean;
  output: string;
}

type StoredObject = {
  kind: string;
  metadata: { name: string; namespace: string };
  spec: Record<string, unknown>;
};

/**
 * The columns of Istio's CRDs (their additionalPrinterColumns, without AGE:
 * ingest stores no creation time), by kind.
 */
const PRINTER_COLUMNS: Readonly<
  Record<string, ReadonlyArray<[string, (spec: Record<string, unknown>) => unknown]>>
> = {
  VirtualService: [
    ["GATEWAYS", (spec) => spec.gateways],
    ["HOSTS", (spec) => spec.hosts],
  ],
  DestinationRule: [["HOST", (spec) => spec.host]],
  ServiceEntry: [
    ["HOSTS", (spec) => spec.hosts],
    ["LOCATION", (spec) => spec.location],
    ["RESOLUTION", (spec) => spec.resolution],
  ],
  WorkloadEntry: [["ADDRESS", (spec) => spec.address]],
  PeerAuthentication: [["MODE", (spec) => (spec.mtls as { mode?: string } | undefined)?.mode]],
  AuthorizationPolicy: [["ACTION", (spec) => spec.action]],
};

/** A cell as kubectl prints a column's value: arrays as JSON, nothing as empty. */
function cell(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** `sextantctl get KIND [NAME]`: the stored config, as a table or the objects. */
export function registerGet(program: Command): void {
  program
    .command("get")
    .description("list stored config of a kind, or show one resource")
    .argument("<kind>", "the kind: VirtualService, virtualservices, vs, ...")
    .argument("[name]", "one resource's name")
    .option("-n, --namespace <namespace>", "the namespace", "default")
    .option("-A, --all-namespaces", "list across every namespace")
    .option("-o, --output <format>", "table, yaml or json", "table")
    .addHelpText(
      "after",
      "\nExit codes: 0 found (an empty list too), 1 not found/refused/unreachable, 2 usage.",
    )
    .exitOverride(exitOnUsageError)
    .action(
      action(async (kindName: string, name: string | undefined, flags: GetFlags) => {
        const kind = resolveKind(kindName);
        const format = outputFormat(flags.output);
        const ingest = new IngestClient(program);
        if (name !== undefined) {
          const ref = { kind: kind.kind, namespace: flags.namespace, name };
          const { status, json } = await ingest.request("GET", configPath(ref));
          if (status === 404)
            throw new CommandError(
              `${kind.plural}.${kind.group} "${name}" not found in namespace "${flags.namespace}"`,
            );
          if (status !== 200) throw new CommandError(`ingest answered ${status}: ${json.error}`);
          console.log(format === "table" ? table([json], false) : formatObject(json, format));
          return;
        }
        const query = new URLSearchParams({ kind: kind.kind });
        if (!flags.allNamespaces) query.set("namespace", flags.namespace);
        const { status, json } = await ingest.request("GET", `/v1/config?${query}`);
        if (status !== 200) throw new CommandError(`ingest answered ${status}: ${json.error}`);
        // As kubectl lists: by namespace, then name.
        const items = (json.items as StoredObject[]).sort(
          (a, b) =>
            a.metadata.namespace.localeCompare(b.metadata.namespace) ||
            a.metadata.name.localeCompare(b.metadata.name),
        );
        if (format !== "table") {
          console.log(formatObject({ apiVersion: "v1", kind: "List", items }, format));
        } else if (items.length === 0) {
          console.error(
            flags.allNamespaces
              ? "No resources found"
              : `No resources found in ${flags.namespace} namespace.`,
          );
        } else {
          console.log(table(items, flags.allNamespaces === true));
        }
      }),
    );
}

function table(items: readonly StoredObject[], allNamespaces: boolean): string {
  const columns = PRINTER_COLUMNS[items[0]!.kind] ?? [];
  const headers = [...(allNamespaces ? ["NAMESPACE"] : []), "NAME", ...columns.map(([header]) => header)];
  const rows = items.map((item) => [
    ...(allNamespaces ? [item.metadata.namespace] : []),
    item.metadata.name,
    ...columns.map(([, read]) => cell(read(item.spec ?? {}))),
  ]);
  return formatTable(headers, rows);
}
