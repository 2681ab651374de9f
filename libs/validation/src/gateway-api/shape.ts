// A small structural-schema language for the kinds that are not protobuf
// (Kubernetes Gateway API: Go structs published as OpenAPI in CRDs). One
// definition gives both the check ingest runs (unknown fields, JSON types,
// required fields, enums, lengths, patterns, item counts) and the OpenAPI v3
// schema deploy/ writes into the kind's CRD, so the two cannot drift apart.

import { at, type Issues, key } from "../issues.js";

/** A string field: length, pattern and enum as the Gateway API's CRDs state them. */
export interface StringShape {
  readonly type: "string";
  readonly minLength?: number;
  readonly maxLength?: number;
  /** An RE2-compatible pattern, anchored as the CRD writes it. */
  readonly pattern?: string;
  readonly enum?: readonly string[];
  readonly default?: string;
}

/** An integer field (int32 unless said otherwise). */
export interface IntegerShape {
  readonly type: "integer";
  readonly minimum?: number;
  readonly maximum?: number;
  readonly enum?: readonly number[];
  readonly default?: number;
}

export interface BooleanShape {
  readonly type: "boolean";
}

/** An object with known fields; any other field is an error. */
export interface ObjectShape {
  readonly type: "object";
  readonly properties: Readonly<Record<string, Shape>>;
  readonly required?: readonly string[];
}

export interface ArrayShape {
  readonly type: "array";
  readonly items: Shape;
  readonly minItems?: number;
  readonly maxItems?: number;
}

/** A string-keyed map (labels, annotations, options). */
export interface MapShape {
  readonly type: "map";
  readonly values: Shape;
  readonly maxProperties?: number;
}

export type Shape = StringShape | IntegerShape | BooleanShape | ObjectShape | ArrayShape | MapShape;

// Constructors, so that kind definitions read like the CRDs they stand for.
export const str = (options: Omit<StringShape, "type"> = {}): StringShape => ({ type: "string", ...options });
export const int = (options: Omit<IntegerShape, "type"> = {}): IntegerShape => ({
  type: "integer",
  ...options,
});
export const bool = (): BooleanShape => ({ type: "boolean" });
export const obj = (properties: Record<string, Shape>, required: readonly string[] = []): ObjectShape => ({
  type: "object",
  properties,
  ...(required.length > 0 ? { required } : {}),
});
export const arr = (items: Shape, options: Omit<ArrayShape, "type" | "items"> = {}): ArrayShape => ({
  type: "array",
  items,
  ...options,
});
export const map = (values: Shape, options: Omit<MapShape, "type" | "values"> = {}): MapShape => ({
  type: "map",
  values,
  ...options,
});

const patterns = new Map<string, RegExp>();
function compiled(pattern: string): RegExp {
  let re = patterns.get(pattern);
  if (!re) {
    re = new RegExp(pattern);
    patterns.set(pattern, re);
  }
  return re;
}

const typeName = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "a list" : `a ${typeof value}`;

/**
 * Checks `value` against `shape` as the API server's structural validation
 * would, recording every problem under its field path. Returns false when a
 * type is wrong somewhere, so that rules which read the value can be skipped.
 */
export function checkShape(issues: Issues, path: string, value: unknown, shape: Shape): boolean {
  switch (shape.type) {
    case "string": {
      if (typeof value !== "string") return wrongType(issues, path, value, "a string");
      const length = [...value].length;
      if (shape.enum && !shape.enum.includes(value)) {
        issues.error(
          path,
          `${path}: unsupported value ${JSON.stringify(value)}: use one of ${shape.enum.join(", ")}`,
        );
      }
      if (shape.minLength !== undefined && length < shape.minLength) {
        issues.error(
          path,
          `${path} must be at least ${shape.minLength} character${shape.minLength === 1 ? "" : "s"} long`,
        );
      }
      if (shape.maxLength !== undefined && length > shape.maxLength) {
        issues.error(path, `${path} must be at most ${shape.maxLength} characters long`);
      }
      if (shape.pattern !== undefined && !compiled(shape.pattern).test(value)) {
        issues.error(path, `${path} ${JSON.stringify(value)} must match ${shape.pattern}`);
      }
      return true;
    }
    case "integer": {
      if (typeof value !== "number" || !Number.isInteger(value))
        return wrongType(issues, path, value, "an integer");
      if (shape.enum && !shape.enum.includes(value)) {
        issues.error(path, `${path}: unsupported value ${value}: use one of ${shape.enum.join(", ")}`);
      }
      if (shape.minimum !== undefined && value < shape.minimum) {
        issues.error(path, `${path} must be greater than or equal to ${shape.minimum}`);
      }
      if (shape.maximum !== undefined && value > shape.maximum) {
        issues.error(path, `${path} must be less than or equal to ${shape.maximum}`);
      }
      return true;
    }
    case "boolean":
      return typeof value === "boolean" ? true : wrongType(issues, path, value, "a boolean");
    case "array": {
      if (!Array.isArray(value)) return wrongType(issues, path, value, "a list");
      if (shape.minItems !== undefined && value.length < shape.minItems) {
        issues.error(
          path,
          `${path} must have at least ${shape.minItems} item${shape.minItems === 1 ? "" : "s"}`,
        );
      }
      if (shape.maxItems !== undefined && value.length > shape.maxItems) {
        issues.error(path, `${path} must have at most ${shape.maxItems} items`);
      }
      let ok = true;
      value.forEach((item, index) => {
        ok = checkShape(issues, at(path, index), item, shape.items) && ok;
      });
      return ok;
    }
    case "map": {
      if (!isRecord(value)) return wrongType(issues, path, value, "a map");
      const entries = Object.entries(value);
      if (shape.maxProperties !== undefined && entries.length > shape.maxProperties) {
        issues.error(path, `${path} must have at most ${shape.maxProperties} entries`);
      }
      let ok = true;
      for (const [k, v] of entries) ok = checkShape(issues, key(path, k), v, shape.values) && ok;
      return ok;
    }
    case "object": {
      if (!isRecord(value)) return wrongType(issues, path, value, "an object");
      let ok = true;
      for (const name of shape.required ?? []) {
        if (value[name] === undefined || value[name] === null) {
          issues.error(`${path}.${name}`, `${path}.${name} is required`);
          ok = false;
        }
      }
      for (const [name, field] of Object.entries(value)) {
        const fieldShape = shape.properties[name];
        const fieldPath = `${path}.${name}`;
        if (!fieldShape) {
          issues.error(fieldPath, `unknown field "${name}" in ${path}`);
          ok = false;
        } else if (field !== null) {
          ok = checkShape(issues, fieldPath, field, fieldShape) && ok;
        }
      }
      return ok;
    }
  }
}

function wrongType(issues: Issues, path: string, value: unknown, expected: string): false {
  issues.error(path, `${path} must be ${expected}, not ${typeName(value)}`);
  return false;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A JSON schema node (OpenAPI v3, as Kubernetes reads it). */
export type OpenApiSchema = { [keyword: string]: unknown };

/** The structural OpenAPI v3 schema of a shape, for a CRD. */
export function openApiSchema(shape: Shape): OpenApiSchema {
  switch (shape.type) {
    case "string":
    case "integer": {
      const { type, ...rest } = shape;
      return type === "integer" ? { type, format: "int32", ...rest } : { type, ...rest };
    }
    case "boolean":
      return { type: "boolean" };
    case "array": {
      const { items, type, ...rest } = shape;
      return { type, items: openApiSchema(items), ...rest };
    }
    case "map": {
      const { values, ...rest } = shape;
      return { ...rest, type: "object", additionalProperties: openApiSchema(values) };
    }
    case "object":
      return {
        type: "object",
        properties: Object.fromEntries(
          Object.entries(shape.properties).map(([name, field]) => [name, openApiSchema(field)]),
        ),
        ...(shape.required ? { required: [...shape.required] } : {}),
      };
  }
}
