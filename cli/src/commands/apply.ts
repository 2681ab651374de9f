import type { Command } from "commander";
import { action, CommandError, ExitCode, exitOnUsageError, IngestClient } from "../ingest-client.js";
import { qualifiedName } from "../kinds.js";
import { joinDocuments, type ManifestDocument, readManifests } from "../manifests.js";

interface ApplyFlags {
  filename: string[];
  dryRun?: boolean;
}

interface Ref {
  kind: string;
  namespace: string;
  name: string;
}

/** `sextantctl apply -f FILE|DIR|-`: every document through ingest's POST /v1/apply, all or nothing. */
export function registerApply(program: Command): void {
  program
    .command("apply")
    .description("apply Istio config from files, directories or stdin through ingest (all documents or none)")
    .requiredOption(
      "-f, --filename <path...>",
      "a file, a directory of .yaml/.yml/.json files, or - for stdin",
    )
    .option("--dry-run", "validate and authorize only (POST /v1/validate); nothing is stored")
    .addHelpText("after", "\nExit codes: 0 applied, 1 invalid/refused/unreachable (nothing stored), 2 usage.")
    .exitOverride(exitOnUsageError)
    .action(
      action(async (flags: ApplyFlags) => {
        const documents = await readManifests(flags.filename);
        if (documents.length === 0) throw new CommandError("no objects passed to apply", ExitCode.usage);
        const ingest = new IngestClient(program);
        const path = flags.dryRun ? "/v1/validate" : "/v1/apply";
        const { status, json } = await ingest.request("POST", path, joinDocuments(documents));
        if (status === 400 && Array.isArray(json.errors))
          throw new CommandError(invalidMessage(json, documents));
        if (status === 503) {
          for (const resource of json.applied ?? []) printResult(resource, resource.result);
          throw new CommandError(`${json.error}: apply again once the store is back`);
        }
        if (status !== 200) throw new CommandError(`ingest answered ${status}: ${json.error}`);
        if (!flags.dryRun) {
          for (const resource of json.resources) printResult(resource, resource.result);
          return;
        }
        for (const resource of json.resources) {
          const { status: found } = await ingest.request("GET", configPath(resource));
          printResult(resource, `${found === 404 ? "created" : "configured"} (server dry run)`);
        }
      }),
    );
}

/** The path of a resource in ingest's API. */
export function configPath(ref: Ref): string {
  return `/v1/config/${ref.kind}/${encodeURIComponent(ref.namespace)}/${encodeURIComponent(ref.name)}`;
}

function printResult(
  resource: Ref & { warnings?: Array<{ path: string; message: string }> },
  result: string,
): void {
  for (const warning of resource.warnings ?? [])
    console.error(
      `Warning: ${qualifiedName(resource.kind, resource.name)}: ${warning.path}: ${warning.message}`,
    );
  console.log(`${qualifiedName(resource.kind, resource.name)} ${result}`);
}

/** ingest's 400, each error placed at its file and the line of its field (else of its document). */
function invalidMessage(
  json: { error: string; errors: Array<Partial<Ref> & { document: number; path: string; message: string }> },
  documents: readonly ManifestDocument[],
): string {
  const lines = json.errors.map((error) => {
    const origin = documents[error.document];
    const where = origin
      ? `${origin.file}:${(error.path && origin.lineOf(error.path)) || origin.line}`
      : "input";
    const what = error.kind && error.name ? ` (${error.kind} ${error.namespace}/${error.name})` : "";
    return `  ${where}${what}: ${error.path ? `${error.path}: ` : ""}${error.message}`;
  });
  return `${json.error}\n${lines.join("\n")}`;
}
