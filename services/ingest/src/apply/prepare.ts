import { describeRef } from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import {
  decodeSpec,
  findKindOf,
  type ParseLimits,
  parseDocuments,
  validateResource,
} from "@sextant/validation";

/** The namespace of a resource that names none, as kubectl assumes. */
export const DEFAULT_NAMESPACE = "default";

/** A problem with one document of an apply, with enough context to find it. */
export interface DocumentError {
  /** 0-based position of the document in the input; -1 for the input as a whole. */
  readonly document: number;
  readonly kind?: string;
  readonly namespace?: string;
  readonly name?: string;
  /** Field path, e.g. spec.http[0].route[1].weight; empty for the whole document. */
  readonly path: string;
  readonly message: string;
}

/** A document that passed validation, as the envelope ingest stores. */
export interface PreparedResource {
  readonly document: number;
  readonly resource: ConfigResource;
  readonly warnings: ReadonlyArray<{ path: string; message: string }>;
}

/** Every document of an input, validated; nothing is stored unless errors is empty. */
export interface PreparedInput {
  readonly resources: PreparedResource[];
  readonly errors: DocumentError[];
}

/**
 * Parses and validates every document of an apply before anything is stored,
 * and turns each valid one into the stored envelope. The spec is re-encoded
 * from the typed message, so every reader sees one canonical JSON form
 * (lowerCamel names, durations as "10s") whatever spelling the user chose.
 */
export function prepareDocuments(input: string | Uint8Array, limits: ParseLimits): PreparedInput {
  const parsed = parseDocuments(input, limits);
  const errors: DocumentError[] = parsed.errors.map((error) => ({
    document: error.index,
    path: "",
    message: error.message,
  }));
  const resources: PreparedResource[] = [];
  const seen = new Map<string, number>();

  for (const { index, value } of parsed.documents) {
    const document = isObject(value) ? value : {};
    const metadata = isObject(document.metadata) ? document.metadata : {};
    const context = {
      document: index,
      // Sextant's name of the kind (KubernetesGateway for the Gateway API's Gateway), else as written.
      kind:
        findKindOf(document.apiVersion, document.kind)?.kind ??
        (typeof document.kind === "string" ? document.kind : undefined),
      namespace:
        typeof metadata.namespace === "string" && metadata.namespace ? metadata.namespace : DEFAULT_NAMESPACE,
      name: typeof metadata.name === "string" ? metadata.name : undefined,
    };
    if (!isObject(value)) {
      errors.push({
        ...context,
        path: "",
        message: "a document must be a mapping with apiVersion, kind, metadata and spec",
      });
      continue;
    }
    const validation = validateResource(document);
    const documentErrors = [
      ...validation.errors,
      ...stringMapErrors(metadata, "labels"),
      ...stringMapErrors(metadata, "annotations"),
    ];
    if (documentErrors.length > 0) {
      for (const error of documentErrors) errors.push({ ...context, ...error });
      continue;
    }
    const kind = findKindOf(document.apiVersion, document.kind)!;
    // A cluster-scoped object has one key, whatever namespace a manifest gives it.
    if (kind.clusterScoped) context.namespace = DEFAULT_NAMESPACE;
    const decoded = decodeSpec(kind.kind, document.spec ?? {});
    const ref = { kind: kind.kind, namespace: context.namespace, name: context.name! };
    const id = describeRef(ref);
    const earlier = seen.get(id);
    if (earlier !== undefined) {
      errors.push({
        ...context,
        path: "metadata.name",
        message: `${id} is also document ${earlier} of this input`,
      });
      continue;
    }
    seen.set(id, index);
    resources.push({
      document: index,
      warnings: validation.warnings,
      resource: {
        kind: kind.kind,
        apiVersion: document.apiVersion as string,
        namespace: ref.namespace,
        name: ref.name,
        labels: (metadata.labels as Record<string, string> | undefined) ?? {},
        annotations: (metadata.annotations as Record<string, string> | undefined) ?? {},
        generation: 0,
        revision: 0,
        spec: kind.codec.toJSON(decoded.value) as Record<string, unknown>,
      },
    });
  }
  return { resources, errors };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringMapErrors(metadata: Record<string, unknown>, field: "labels" | "annotations") {
  const map = metadata[field];
  if (map === undefined || map === null) return [];
  if (!isObject(map))
    return [{ path: `metadata.${field}`, message: `metadata.${field} must be a map of strings` }];
  return Object.entries(map)
    .filter(([, value]) => typeof value !== "string")
    .map(([key]) => ({
      path: `metadata.${field}[${key}]`,
      message: `the value of ${field} "${key}" must be a string`,
    }));
}
