import { Severity } from "@sextant/proto";
import type { ConfigStore } from "../store/config-store.js";

const LEVELS: Record<Severity, string> = {
  [Severity.SEVERITY_UNSPECIFIED]: "Unknown",
  [Severity.SEVERITY_INFO]: "Info",
  [Severity.SEVERITY_WARNING]: "Warning",
  [Severity.SEVERITY_ERROR]: "Error",
  [Severity.UNRECOGNIZED]: "Unknown",
};

/** The level istioctl prints for a severity: Error, Warning, Info. */
export function levelName(severity: Severity): string {
  return LEVELS[severity];
}

/** One line of GET /v1/analyze: a message and the resource it is about. */
export interface AnalysisReportEntry {
  kind: string;
  namespace: string;
  name: string;
  code: string;
  level: string;
  field: string;
  message: string;
  origin: string;
}

/** Every message of every resource (validation, analysis, proxies' NACKs), sorted by resource. */
export async function analysisReport(store: ConfigStore): Promise<AnalysisReportEntry[]> {
  const statuses = await store.statuses();
  return statuses
    .flatMap(({ kind, namespace, name, messages }) =>
      messages.map(({ code, severity, field, message, origin }) => ({
        kind,
        namespace,
        name,
        code,
        level: levelName(severity),
        field,
        message,
        origin,
      })),
    )
    .sort((a, b) =>
      `${a.kind}/${a.namespace}/${a.name}/${a.field}`.localeCompare(
        `${b.kind}/${b.namespace}/${b.name}/${b.field}`,
      ),
    );
}
