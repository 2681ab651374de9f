/**
 * JSON Patch (RFC 6902, with fast-json-patch) and JSON Merge Patch (RFC 7386)
 * over plain JSON values, as the API server applies them to the stored object.
 */
import { isDeepStrictEqual } from "node:util";
import jsonPatch, { type Operation } from "fast-json-patch";

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/**
 * Applies an RFC 7386 merge patch: objects merge recursively, `null` deletes,
 * anything else replaces. fast-json-patch implements RFC 6902 only, and the
 * whole of RFC 7386 is this recursion.
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete result[key];
    } else {
      result[key] = applyMergePatch(result[key], value);
    }
  }
  return result;
}

/** A JSON patch that is malformed (400) or does not apply to the document (422). */
export class JsonPatchError extends Error {
  /** True when the patch document itself is malformed rather than inapplicable. */
  readonly malformed: boolean;

  constructor(message: string, malformed: boolean) {
    super(message);
    this.name = "JsonPatchError";
    this.malformed = malformed;
  }
}

/**
 * fast-json-patch's errors that mean the patch document is malformed (the
 * API server answers 400); the others mean it does not apply to this object
 * (422): a missing path, an index out of bounds, a failed test.
 */
const MALFORMED = new Set<string>([
  "SEQUENCE_NOT_AN_ARRAY",
  "OPERATION_NOT_AN_OBJECT",
  "OPERATION_OP_INVALID",
  "OPERATION_PATH_INVALID",
  "OPERATION_FROM_REQUIRED",
  "OPERATION_VALUE_REQUIRED",
  "OPERATION_VALUE_CANNOT_CONTAIN_UNDEFINED",
]);

/** Applies an RFC 6902 JSON patch; the input is not modified. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch))
    throw new JsonPatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", true);
  try {
    // Validated operation by operation, applied to a copy.
    return jsonPatch.applyPatch(target, patch as Operation[], true, false).newDocument;
  } catch (error) {
    if (!(error instanceof jsonPatch.JsonPatchError)) throw error;
    throw new JsonPatchError(error.message.split("\n")[0] ?? error.message, MALFORMED.has(error.name));
  }
}

/** Deep equality of JSON values, ignoring key order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(a, b);
}
