import {
  EXTENSIONS_GROUP,
  NETWORKING_GROUP,
  SECURITY_GROUP,
  TELEMETRY_GROUP,
  validateResource,
} from "@sextant/validation";
import type { WebhookMetrics } from "./metrics.js";
import { type AdmissionRequest, type AdmissionResponse, deny } from "./review.js";

/** The API groups /validate accepts, as istiod's validating webhook configuration selects them. */
export const VALIDATED_GROUPS: readonly string[] = [
  NETWORKING_GROUP,
  SECURITY_GROUP,
  EXTENSIONS_GROUP,
  TELEMETRY_GROUP,
];

/**
 * Answers a validation request with @sextant/validation, the library ingest
 * uses, so the cluster and the config API agree. A denial names every field
 * path; warnings go back as admission warnings, which kubectl prints.
 */
export function admitValidation(request: AdmissionRequest, metrics?: WebhookMetrics): AdmissionResponse {
  const { uid, kind } = request;
  const labels = {
    group: kind.group,
    version: kind.version,
    resource: request.resource?.resource ?? kind.kind,
  };
  if (request.operation !== "CREATE" && request.operation !== "UPDATE") return { uid, allowed: true };
  if (!VALIDATED_GROUPS.includes(kind.group)) {
    metrics?.validationFailed.inc({ ...labels, reason: "unknown_kind" });
    return deny(
      uid,
      `unexpected kind ${kind.group}/${kind.version} ${kind.kind}: this webhook validates ${VALIDATED_GROUPS.join(" and ")}`,
    );
  }
  const object = request.object;
  if (typeof object !== "object" || object === null || Array.isArray(object)) {
    metrics?.validationFailed.inc({ ...labels, reason: "no_object" });
    return deny(uid, "request.object must be the resource to validate");
  }
  const resource = object as { apiVersion?: unknown; kind?: unknown; metadata?: unknown; spec?: unknown };
  // Objects being created may omit their namespace; the request carries it.
  const metadata =
    typeof resource.metadata === "object" && resource.metadata !== null
      ? { namespace: request.namespace, ...(resource.metadata as Record<string, unknown>) }
      : resource.metadata;
  const result = validateResource({ ...resource, metadata });
  const warnings = result.warnings.map((w) => (w.path ? `${w.path}: ${w.message}` : w.message));
  if (result.errors.length === 0) {
    metrics?.validationPassed.inc(labels);
    return { uid, allowed: true, ...(warnings.length > 0 ? { warnings } : {}) };
  }
  metrics?.validationFailed.inc({ ...labels, reason: "invalid_resource" });
  const lines = result.errors.map((e) => (e.path ? `${e.path}: ${e.message}` : e.message));
  const causes = result.errors.map((e) => ({
    reason: "FieldValueInvalid",
    field: e.path,
    message: e.message,
  }));
  return {
    ...deny(uid, `configuration is invalid: ${lines.join("; ")}`, causes),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}
