import { isDeepStrictEqual } from "node:util";
import { type ConfigMessage, Severity } from "@sextant/proto";
import { AnalysisCodes } from "../analysis/analyzers.js";
import type { DocumentError } from "../apply/prepare.js";
import { PROXY_REJECTED_CODE } from "../nack/nack-recorder.js";

/** Istio's code for a resource that fails schema or semantic validation (as `istioctl analyze` reports it). */
export const SCHEMA_VALIDATION_CODE = "IST0106";

/**
 * One entry of a resource's `status.validationMessages`, in Istio's shape
 * (`AnalysisMessageBase`: type, level, documentationUrl), so tools that read
 * Istio's status read Sextant's. `message` is Sextant's own addition: Istio's
 * status carries no text, and without it a user cannot tell what is wrong.
 */
export interface IstioValidationMessage {
  readonly type: { readonly code: string; readonly name: string };
  readonly level: "ERROR" | "WARNING" | "INFO" | "UNKNOWN";
  readonly documentationUrl?: string;
  /** Sextant's extra field: the field path (if any) and the finding, e.g. "spec.gateways[0]: ...". */
  readonly message: string;
}

/** The part of an Istio resource's status that Sextant writes. */
export interface IstioStatus {
  readonly validationMessages: IstioValidationMessage[];
  /** The object's metadata.generation these messages are about. */
  readonly observedGeneration: number;
}

/** Message names by code, as Istio's analysis documentation names them. */
const MESSAGE_NAMES: ReadonlyMap<string, string> = new Map([
  ...Object.entries(AnalysisCodes).map(([name, code]) => [code, name] as const),
  [SCHEMA_VALIDATION_CODE, "SchemaValidationError"],
  [PROXY_REJECTED_CODE, "ProxyRejectedConfig"],
]);

const LEVELS: Readonly<Record<Severity, IstioValidationMessage["level"]>> = {
  [Severity.SEVERITY_ERROR]: "ERROR",
  [Severity.SEVERITY_WARNING]: "WARNING",
  [Severity.SEVERITY_INFO]: "INFO",
  [Severity.SEVERITY_UNSPECIFIED]: "UNKNOWN",
  [Severity.UNRECOGNIZED]: "UNKNOWN",
};

/** The status of an object that failed validation: one IST0106 error per problem. */
export function validationErrorStatus(errors: readonly DocumentError[], generation: number): IstioStatus {
  return {
    observedGeneration: generation,
    validationMessages: errors.map((error) =>
      istioMessage(SCHEMA_VALIDATION_CODE, "ERROR", error.path, error.message),
    ),
  };
}

/** The status of a stored object: its analysis and proxy messages from sextant-config-status. */
export function analysisStatus(messages: readonly ConfigMessage[], generation: number): IstioStatus {
  return {
    observedGeneration: generation,
    validationMessages: messages.map((message) =>
      istioMessage(message.code, LEVELS[message.severity] ?? "UNKNOWN", message.field, message.message),
    ),
  };
}

/**
 * Whether an object's current status already says what desired says. An
 * absent list equals an empty one, and an observedGeneration written as a
 * string (Istio's CRDs accept int-or-string) equals the same number.
 */
export function statusUpToDate(current: unknown, desired: IstioStatus): boolean {
  const status = (typeof current === "object" && current !== null ? current : {}) as Record<string, unknown>;
  return (
    Number(status.observedGeneration) === desired.observedGeneration &&
    isDeepStrictEqual(status.validationMessages ?? [], desired.validationMessages)
  );
}

/**
 * The JSON merge patch of the status subresource that writes desired. It
 * touches only the two fields Sextant owns (others' conditions stay), and
 * removes validationMessages when there are none, as Istio leaves it out.
 */
export function statusPatch(desired: IstioStatus): { status: Record<string, unknown> } {
  return {
    status: {
      observedGeneration: desired.observedGeneration,
      validationMessages: desired.validationMessages.length > 0 ? desired.validationMessages : null,
    },
  };
}

function istioMessage(
  code: string,
  level: IstioValidationMessage["level"],
  field: string,
  text: string,
): IstioValidationMessage {
  return {
    type: { code, name: MESSAGE_NAMES.get(code) ?? code },
    level,
    // Only Istio's own codes have a page on istio.io.
    ...(code.startsWith("IST")
      ? { documentationUrl: `https://istio.io/latest/docs/reference/config/analysis/${code.toLowerCase()}/` }
      : {}),
    message: field ? `${field}: ${text}` : text,
  };
}
