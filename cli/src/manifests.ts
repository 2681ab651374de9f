// Reading -f FILE|DIR|- as kubectl does: a directory's .yaml, .yml and .json
// files (not recursive), "-" for stdin; every document remembers where it came from.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { type Document, parseAllDocuments, stringify } from "yaml";
import { CommandError, ExitCode } from "./ingest-client.js";

/** One non-empty YAML document of the input, with its origin. */
export interface ManifestDocument {
  /** The file ("-" for stdin). */
  readonly file: string;
  /** The 1-based line where the document starts. */
  readonly line: number;
  /** The document as YAML text. */
  readonly text: string;
  /** The parsed value. */
  readonly value: unknown;
  /** The 1-based line of a field (e.g. spec.http[0].route[1].weight) in the file, if the document has it. */
  lineOf(path: string): number | undefined;
}

const MANIFEST = /\.(ya?ml|json)$/i;

/** The files -f names, directories expanded in name order. */
function expand(paths: readonly string[]): string[] {
  return paths.flatMap((path) => {
    if (path === "-") return [path];
    let isDirectory: boolean;
    try {
      isDirectory = statSync(path).isDirectory();
    } catch {
      throw new CommandError(`the path "${path}" does not exist: check the -f argument`, ExitCode.usage);
    }
    if (!isDirectory) return [path];
    return readdirSync(path)
      .filter((name) => MANIFEST.test(name))
      .sort()
      .map((name) => join(path, name));
  });
}

/** Reads every document of the files; a file that does not parse is an error naming it. */
export async function readManifests(paths: readonly string[]): Promise<ManifestDocument[]> {
  const documents: ManifestDocument[] = [];
  for (const file of expand(paths)) {
    const text = file === "-" ? await readStdin() : readFileSync(file, "utf8");
    const parsed = parseAllDocuments(text, { prettyErrors: false });
    if (!Array.isArray(parsed)) continue; // an empty file
    for (const document of parsed as Document[]) {
      if (document.errors.length > 0)
        throw new CommandError(`${file} does not parse: ${document.errors[0]!.message}`);
      if (document.contents === null) continue;
      const start = document.contents.range?.[0] ?? 0;
      const value: unknown = document.toJS();
      const lineAt = (offset: number) => text.slice(0, offset).split("\n").length;
      documents.push({
        lineOf: (path) => {
          const node = document.getIn(fieldPath(path), true) as
            | { range?: [number, number, number] }
            | undefined;
          return node?.range ? lineAt(node.range[0]) : undefined;
        },
        file,
        line: lineAt(start),
        // Re-serialised from the value: one document exactly, without its own "---" or directives.
        text: stringify(value),
        value,
      });
    }
  }
  return documents;
}

/** A field path's keys: spec.http[0].route["x"] is spec, http, 0, route, x. */
function fieldPath(path: string): Array<string | number> {
  const keys: Array<string | number> = [];
  for (const [, name, index] of path.matchAll(/([^.[\]]+)|\[([^\]]*)\]/g)) {
    if (name !== undefined) keys.push(name);
    else if (index !== undefined)
      keys.push(/^\d+$/.test(index) ? Number(index) : index.replace(/^"|"$/g, ""));
  }
  return keys;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** The documents as one multi-document YAML body. */
export function joinDocuments(documents: readonly ManifestDocument[]): string {
  return documents.map((document) => document.text).join("---\n");
}
