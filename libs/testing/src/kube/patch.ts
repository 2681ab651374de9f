/**
 * JSON Merge Patch (RFC 7386) and JSON Patch (RFC 6902) over plain JSON
 * values, as the API server applies them to the stored object.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Applies an RFC 7386 merge patch: objects merge recursively, `null` deletes, anything else replaces. */
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

interface Operation {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
  hasValue: boolean;
}

function decodeOperations(patch: unknown): Operation[] {
  if (!Array.isArray(patch))
    throw new JsonPatchError("json: cannot unmarshal object into Go value of type jsonpatch.Patch", true);
  return patch.map((raw, i) => {
    if (!isPlainObject(raw)) throw new JsonPatchError(`operation ${i} is not an object`, true);
    const { op, path, from } = raw;
    if (typeof op !== "string") throw new JsonPatchError(`operation ${i} has no "op"`, true);
    if (typeof path !== "string") throw new JsonPatchError(`operation ${i} has no "path"`, true);
    const operation: Operation = { op, path, hasValue: "value" in raw, value: raw.value };
    if (typeof from === "string") operation.from = from;
    return operation;
  });
}

function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw new JsonPatchError(`invalid JSON pointer: "${pointer}"`, false);
  return pointer
    .slice(1)
    .split("/")
    .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function arrayIndex(token: string, length: number, allowEnd: boolean, pointer: string): number {
  if (allowEnd && token === "-") return length;
  if (!/^(0|[1-9]\d*)$/.test(token))
    throw new JsonPatchError(`invalid array index "${token}" in "${pointer}"`, false);
  const index = Number(token);
  if (index > length || (!allowEnd && index === length)) {
    throw new JsonPatchError(`array index out of bounds in "${pointer}"`, false);
  }
  return index;
}

// Resolves the container holding the last token, so the caller can read or
// write that member in place on the working copy.
function parent(doc: Json, pointer: string): { container: Json; key: string } {
  const tokens = parsePointer(pointer);
  const key = tokens.pop();
  if (key === undefined) throw new JsonPatchError("the root cannot be the target here", false);
  let current: Json = doc;
  for (const token of tokens) {
    if (Array.isArray(current)) {
      current = current[arrayIndex(token, current.length, false, pointer)] as Json;
    } else if (isPlainObject(current) && token in current) {
      current = (current as Record<string, Json>)[token] as Json;
    } else {
      throw new JsonPatchError(`doc is missing path: "${pointer}"`, false);
    }
  }
  if (!Array.isArray(current) && !isPlainObject(current)) {
    throw new JsonPatchError(`doc is missing path: "${pointer}"`, false);
  }
  return { container: current, key };
}

function read(doc: Json, pointer: string): Json {
  if (pointer === "") return doc;
  const { container, key } = parent(doc, pointer);
  if (Array.isArray(container)) return container[arrayIndex(key, container.length, false, pointer)] as Json;
  const obj = container as Record<string, Json>;
  if (!(key in obj)) throw new JsonPatchError(`doc is missing path: "${pointer}"`, false);
  return obj[key] as Json;
}

function add(doc: Json, pointer: string, value: Json): Json {
  if (pointer === "") return value;
  const { container, key } = parent(doc, pointer);
  if (Array.isArray(container)) {
    container.splice(arrayIndex(key, container.length, true, pointer), 0, value);
  } else {
    (container as Record<string, Json>)[key] = value;
  }
  return doc;
}

function remove(doc: Json, pointer: string): Json {
  const { container, key } = parent(doc, pointer);
  if (Array.isArray(container)) {
    container.splice(arrayIndex(key, container.length, false, pointer), 1);
  } else {
    const obj = container as Record<string, Json>;
    if (!(key in obj))
      throw new JsonPatchError(`remove operation does not apply: doc is missing path: "${pointer}"`, false);
    delete obj[key];
  }
  return doc;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Applies an RFC 6902 JSON patch; the input is not modified. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  const operations = decodeOperations(patch);
  let doc = structuredClone(target) as Json;
  for (const op of operations) {
    const needValue = (): Json => {
      if (!op.hasValue) throw new JsonPatchError(`${op.op} operation is missing "value"`, true);
      return structuredClone(op.value) as Json;
    };
    const needFrom = (): string => {
      if (op.from === undefined) throw new JsonPatchError(`${op.op} operation is missing "from"`, true);
      return op.from;
    };
    switch (op.op) {
      case "add":
        doc = add(doc, op.path, needValue());
        break;
      case "remove":
        doc = remove(doc, op.path);
        break;
      case "replace": {
        const value = needValue();
        read(doc, op.path);
        doc = op.path === "" ? value : add(remove(doc, op.path), op.path, value);
        break;
      }
      case "move": {
        const from = needFrom();
        const value = read(doc, from);
        doc = add(remove(doc, from), op.path, value);
        break;
      }
      case "copy": {
        const value = structuredClone(read(doc, needFrom()));
        doc = add(doc, op.path, value);
        break;
      }
      case "test": {
        const value = needValue();
        if (!deepEqual(read(doc, op.path), value)) {
          throw new JsonPatchError(`testing value ${op.path} failed: test failed`, false);
        }
        break;
      }
      default:
        throw new JsonPatchError(`Unexpected kind: ${op.op}`, true);
    }
  }
  return doc;
}

/** Deep equality of JSON values, ignoring key order. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return deepEqual(a, b);
}
