import { normalizeMessage } from "./decode.js";
import { checkShape } from "./gateway-api/shape.js";
import { type FieldError, Issues, type ValidationResult } from "./issues.js";
import { apiKindOf, findKind, findKindOf, KINDS, type KindInfo } from "./kinds.js";
import { isDns1123Label, isDns1123Subdomain } from "./rules/common.js";

/** The result of decoding a spec: the typed message, or the errors that prevented it. */
export interface DecodeResult<T = unknown> {
  value?: T;
  errors: FieldError[];
}

/**
 * Decodes the `spec` of a resource of `kind` into its generated type.
 * Unknown fields and wrong JSON types are errors with their full path
 * (e.g. `spec.http[0].rout`); both JSON (lowerCamel) and proto (snake_case)
 * field names are accepted, as in Istio.
 */
export function decodeSpec<T = unknown>(kind: string, spec: unknown, path = "spec"): DecodeResult<T> {
  const info = findKind(kind);
  if (!info) return { errors: [{ path: "kind", message: unsupportedKindMessage(kind) }] };
  if (info.shape) {
    const issues = new Issues();
    const ok = checkShape(issues, path, spec, info.shape);
    return ok && issues.errors.length === 0
      ? { value: info.codec.fromJSON(spec) as T, errors: [] }
      : { errors: issues.errors };
  }
  const normalized = normalizeMessage(info.typeName, spec, path);
  if (!normalized.value) return { errors: normalized.errors };
  return { value: info.codec.fromJSON(normalized.value) as T, errors: [] };
}

/** A Kubernetes-style resource as users write it. */
export interface ResourceInput {
  apiVersion?: unknown;
  kind?: unknown;
  metadata?: unknown;
  spec?: unknown;
}

/**
 * Validates one resource as Istio's admission webhook would: apiVersion and
 * kind, metadata.name/namespace, the spec's schema, then the kind's rules.
 * Errors reject the resource; warnings (e.g. deprecated fields) do not.
 */
export function validateResource(resource: ResourceInput): ValidationResult {
  const issues = new Issues();
  if (typeof resource !== "object" || resource === null || Array.isArray(resource)) {
    issues.error("", "a resource must be an object with apiVersion, kind, metadata and spec");
    return issues.result();
  }
  const info = checkKind(issues, resource);
  const meta = checkMetadata(issues, resource.metadata);
  if (!info) return issues.result();
  const decoded = decodeSpec(info.kind, resource.spec ?? {});
  for (const e of decoded.errors) issues.error(e.path, e.message);
  if (decoded.value !== undefined) {
    const ctx = { issues, path: "spec", name: meta.name, namespace: meta.namespace, spec: resource.spec };
    info.validate(decoded.value, ctx);
  }
  return issues.result();
}

function unsupportedKindMessage(kind: unknown): string {
  const shown = typeof kind === "string" ? `"${kind}"` : "missing";
  const names = new Set([...KINDS.values()].map(apiKindOf));
  return `kind ${shown} is not supported; expected one of ${[...names].join(", ")}`;
}

function checkKind(issues: Issues, resource: ResourceInput): KindInfo | undefined {
  const { kind, apiVersion } = resource;
  const info = findKindOf(apiVersion, kind);
  if (!info) {
    issues.error("kind", unsupportedKindMessage(kind));
    return undefined;
  }
  const accepted = info.versions.map((v) => `${info.group}/${v}`);
  if (typeof apiVersion !== "string" || !accepted.includes(apiVersion)) {
    const shown = typeof apiVersion === "string" ? `"${apiVersion}"` : "missing";
    issues.error(
      "apiVersion",
      `apiVersion ${shown} is not valid for ${apiKindOf(info)}; use one of ${accepted.join(", ")}`,
    );
    return undefined;
  }
  return info;
}

function checkMetadata(issues: Issues, metadata: unknown): { name: string; namespace: string | undefined } {
  if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) {
    issues.error("metadata.name", "metadata.name is required");
    return { name: "", namespace: undefined };
  }
  const { name, namespace } = metadata as Record<string, unknown>;
  let validName = "";
  if (name === undefined || name === null || name === "") {
    issues.error("metadata.name", "metadata.name is required");
  } else if (typeof name !== "string" || !isDns1123Subdomain(name)) {
    issues.error(
      "metadata.name",
      `name ${JSON.stringify(name)} must be lower-case alphanumerics, "-" or ".", start and end alphanumeric, at most 253 characters`,
    );
  } else {
    validName = name;
  }
  let validNamespace: string | undefined;
  if (namespace !== undefined && namespace !== null && namespace !== "") {
    if (typeof namespace !== "string" || !isDns1123Label(namespace)) {
      issues.error(
        "metadata.namespace",
        `namespace ${JSON.stringify(namespace)} must be a DNS-1123 label (lower-case alphanumerics and "-", at most 63)`,
      );
    } else {
      validNamespace = namespace;
    }
  }
  return { name: validName, namespace: validNamespace };
}
