import type { Command } from "commander";
import { type Finding, formatFinding, LEVELS, levelRank } from "../findings.js";
import { action, CommandError, ExitCode, exitOnUsageError, IngestClient } from "../ingest-client.js";
import { readManifests } from "../manifests.js";
import { analyzeFiles } from "../offline-analysis.js";

interface AnalyzeFlags {
  filename?: string[];
  namespace: string;
  allNamespaces?: boolean;
  failureThreshold: string;
  outputThreshold: string;
  domainSuffix: string;
}

/**
 * `sextantctl analyze`: the mesh's analysis messages from ingest, or with -f
 * the files' own (validation and the cross-resource analyzers, run here),
 * printed and judged as istioctl analyze does.
 */
export function registerAnalyze(program: Command): void {
  program
    .command("analyze")
    .description("analyse the mesh's config (from ingest), or files offline with -f, as istioctl analyze")
    .option("-f, --filename <path...>", "analyse these files or directories offline (no server), - for stdin")
    .option("-n, --namespace <namespace>", "report on this namespace", "default")
    .option("-A, --all-namespaces", "report on every namespace")
    .option(
      "--failure-threshold <level>",
      "the least severe level that fails the command: Info, Warning, Error",
      "Error",
    )
    .option("--output-threshold <level>", "the least severe level printed: Info, Warning, Error", "Info")
    .option(
      "--domain-suffix <suffix>",
      "the cluster's DNS suffix, for files' Services (offline)",
      "cluster.local",
    )
    .addHelpText(
      "after",
      "\nExit codes: 0 no message at or above --failure-threshold, 1 such messages (or ingest unreachable/refused), 2 usage.",
    )
    .exitOverride(exitOnUsageError)
    .action(
      action(async (flags: AnalyzeFlags) => {
        const failureThreshold = thresholdRank(flags.failureThreshold, "--failure-threshold");
        const outputThreshold = thresholdRank(flags.outputThreshold, "--output-threshold");
        const all = flags.filename
          ? analyzeFiles(await readManifests(flags.filename), flags.domainSuffix)
          : await liveFindings(program);
        const findings = all.filter(
          (finding) => flags.allNamespaces || finding.namespace === flags.namespace,
        );
        const scope = flags.allNamespaces ? "all namespaces" : `namespace: ${flags.namespace}`;
        const shown = findings.filter((finding) => levelRank(finding.level) >= outputThreshold);
        for (const finding of shown) console.log(formatFinding(finding));
        if (findings.length === 0) console.log(`\u2714 No validation issues found when analyzing ${scope}.`);
        if (findings.some((finding) => levelRank(finding.level) >= failureThreshold)) {
          console.error(`Error: Analyzers found issues when analyzing ${scope}.`);
          process.exitCode = ExitCode.failed;
        }
      }),
    );
}

function thresholdRank(level: string, flag: string): number {
  const rank = LEVELS.findIndex((known) => known.toLowerCase() === level.toLowerCase());
  if (rank === -1)
    throw new CommandError(`${flag} "${level}" is not a level: use ${LEVELS.join(", ")}`, ExitCode.usage);
  return rank;
}

/** GET /v1/analyze: the stored resources' messages, and the config files ingest could not read. */
async function liveFindings(program: Command): Promise<Finding[]> {
  const { status, json } = await new IngestClient(program).request("GET", "/v1/analyze");
  if (status !== 200) throw new CommandError(`ingest answered ${status}: ${json.error}`);
  const findings: Finding[] = json.messages.map(
    (message: Finding & { origin: string }): Finding => ({
      level: message.level,
      code: message.code,
      kind: message.kind,
      namespace: message.namespace,
      name: message.name,
      message: message.message,
    }),
  );
  for (const source of json.sources as Array<{
    source: string;
    errors: Array<{ kind?: string; namespace?: string; name?: string; path: string; message: string }>;
  }>)
    for (const error of source.errors)
      findings.push({
        level: "Error",
        code: "IST0106",
        kind: error.kind ?? "Unknown",
        namespace: error.namespace ?? "default",
        name: error.name ?? "",
        origin: source.source,
        message: `Schema validation error: ${error.path ? `${error.path}: ` : ""}${error.message}`,
      });
  return findings;
}
