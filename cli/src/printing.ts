// kubectl's output forms: borderless tables with upper-case headers, and
// -o yaml / -o json of the objects.
import Table from "cli-table3";
import { Option } from "commander";
import { stringify } from "yaml";
import { CommandError, ExitCode } from "./ingest-client.js";

/** The -o formats of get. */
export type OutputFormat = "table" | "yaml" | "json";

/** The -o option of the commands that print a table, or the objects as json or yaml. */
export function outputOption(description = "output format"): Option {
  return new Option("-o, --output <format>", description).choices(["table", "json", "yaml"]).default("table");
}

/** Checks an -o value. */
export function outputFormat(value: string): OutputFormat {
  if (value === "table" || value === "yaml" || value === "json") return value;
  throw new CommandError(`unknown output format "${value}": use table, yaml or json`, ExitCode.usage);
}

/** A table as kubectl prints one: columns padded by three spaces, no borders. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const none = "";
  const table = new Table({
    head: [...headers],
    chars: {
      top: none,
      "top-mid": none,
      "top-left": none,
      "top-right": none,
      bottom: none,
      "bottom-mid": none,
      "bottom-left": none,
      "bottom-right": none,
      left: none,
      "left-mid": none,
      mid: none,
      "mid-mid": none,
      right: none,
      "right-mid": none,
      middle: none,
    },
    style: { head: [], border: [], "padding-left": 0, "padding-right": 3 },
  });
  table.push(...rows.map((row) => [...row]));
  return table
    .toString()
    .split("\n")
    .map((line) => line.trimEnd())
    .join("\n");
}

/** An object as -o yaml or -o json print it. */
export function formatObject(value: unknown, format: "yaml" | "json"): string {
  return format === "json" ? JSON.stringify(value, null, 4) : stringify(value).trimEnd();
}
