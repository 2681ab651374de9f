import { FieldDescriptorProto_Type as T } from "@sextant/proto/gen/google/protobuf/descriptor";
import { at, type FieldError, key } from "./issues.js";
import {
  type FieldSchema,
  type MessageSchema,
  type SchemaRegistry,
  schemaRegistry,
  type ValueShape,
} from "./schema.js";

/** The result of turning user JSON into a message's canonical JSON form. */
export interface NormalizeResult {
  /** Canonical JSON (JSON names, durations as {seconds, nanos}); absent on errors. */
  value?: Record<string, unknown>;
  errors: FieldError[];
}

const WRAPPER_TYPES: Record<string, T> = {
  "google.protobuf.DoubleValue": T.TYPE_DOUBLE,
  "google.protobuf.FloatValue": T.TYPE_FLOAT,
  "google.protobuf.Int64Value": T.TYPE_INT64,
  "google.protobuf.UInt64Value": T.TYPE_UINT64,
  "google.protobuf.Int32Value": T.TYPE_INT32,
  "google.protobuf.UInt32Value": T.TYPE_UINT32,
  "google.protobuf.BoolValue": T.TYPE_BOOL,
  "google.protobuf.StringValue": T.TYPE_STRING,
  "google.protobuf.BytesValue": T.TYPE_BYTES,
};

// Types whose JSON form is free-form and that ts-proto reads as is.
const FREE_FORM_TYPES = new Set([
  "google.protobuf.Struct",
  "google.protobuf.Value",
  "google.protobuf.ListValue",
  "google.protobuf.Timestamp",
]);

/**
 * Checks `input` against the message `typeName` field by field and returns
 * it in the form ts-proto's `fromJSON` reads: keys are JSON names (Istio
 * accepts both `export_to` and `exportTo`), durations become
 * `{seconds, nanos}`. Unknown fields, wrong JSON types, unknown enum values
 * and two members of one oneof are reported with their full path.
 */
export function normalizeMessage(
  typeName: string,
  input: unknown,
  path: string,
  registry: SchemaRegistry = schemaRegistry(),
): NormalizeResult {
  const errors: FieldError[] = [];
  const schema = registry.message(typeName);
  if (!schema) {
    return { errors: [{ path, message: `no schema for ${typeName}` }] };
  }
  const value = new Walker(registry, errors).message(schema, input ?? {}, path);
  return errors.length > 0 || value === undefined ? { errors } : { value, errors };
}

class Walker {
  constructor(
    private readonly registry: SchemaRegistry,
    private readonly errors: FieldError[],
  ) {}

  private fail(path: string, message: string): undefined {
    this.errors.push({ path, message });
    return undefined;
  }

  message(schema: MessageSchema, input: unknown, path: string): Record<string, unknown> | undefined {
    if (!isPlainObject(input)) return this.fail(path, `expected an object, got ${describe(input)}`);
    const out: Record<string, unknown> = {};
    const seen = new Map<FieldSchema, string>();
    const oneofs = new Map<string, string>();
    for (const [name, raw] of Object.entries(input)) {
      const fieldPath = `${path}.${name}`;
      const field = schema.byName.get(name);
      if (!field) {
        this.fail(fieldPath, `unknown field "${name}"`);
        continue;
      }
      // JSON null means "not set" in proto JSON.
      if (raw === null) continue;
      const earlier = seen.get(field);
      if (earlier !== undefined) {
        this.fail(fieldPath, `field "${name}" is set twice (also as "${earlier}")`);
        continue;
      }
      seen.set(field, name);
      if (field.oneof !== undefined) {
        const other = oneofs.get(field.oneof);
        if (other !== undefined) {
          this.fail(fieldPath, `only one of "${other}" and "${name}" may be set`);
          continue;
        }
        oneofs.set(field.oneof, name);
      }
      const value = this.field(field, raw, fieldPath);
      if (value !== undefined) out[field.jsonName] = value;
    }
    return out;
  }

  private field(field: FieldSchema, raw: unknown, path: string): unknown {
    if (field.mapKey !== undefined) {
      if (!isPlainObject(raw)) return this.fail(path, `expected a map (object), got ${describe(raw)}`);
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(raw)) {
        const entryPath = key(path, k);
        if (isIntegerType(field.mapKey) && !/^-?\d+$/.test(k)) {
          this.fail(entryPath, `map key "${k}" must be an integer`);
          continue;
        }
        if (v === null) {
          this.fail(entryPath, "map value must not be null");
          continue;
        }
        const value = this.single(field.value, v, entryPath);
        if (value !== undefined) out[k] = value;
      }
      return out;
    }
    if (field.repeated) {
      if (!Array.isArray(raw)) return this.fail(path, `expected a list, got ${describe(raw)}`);
      const out: unknown[] = [];
      raw.forEach((item, i) => {
        const itemPath = at(path, i);
        if (item === null) {
          this.fail(itemPath, "list items must not be null");
          return;
        }
        const value = this.single(field.value, item, itemPath);
        if (value !== undefined) out.push(value);
      });
      return out;
    }
    return this.single(field.value, raw, path);
  }

  private single(shape: ValueShape, raw: unknown, path: string): unknown {
    switch (shape.kind) {
      case "scalar":
        return this.scalar(shape.type, raw, path);
      case "enum":
        return this.enumValue(shape.typeName, raw, path);
      case "message":
        return this.messageValue(shape.typeName, raw, path);
    }
  }

  private messageValue(typeName: string, raw: unknown, path: string): unknown {
    if (typeName === "google.protobuf.Duration") return this.duration(raw, path);
    const wrapped = WRAPPER_TYPES[typeName];
    if (wrapped !== undefined) return this.scalar(wrapped, raw, path);
    if (FREE_FORM_TYPES.has(typeName)) return raw;
    const schema = this.registry.message(typeName);
    if (!schema) return this.fail(path, `no schema for ${typeName}`);
    return this.message(schema, raw, path);
  }

  private duration(raw: unknown, path: string): unknown {
    if (typeof raw !== "string") {
      return this.fail(path, `expected a duration string such as "10s" or "500ms", got ${describe(raw)}`);
    }
    const parsed = parseDuration(raw);
    if (!parsed)
      return this.fail(
        path,
        `invalid duration "${raw}": use a number with a unit, e.g. 10s, 1.5s, 100ms, 1h`,
      );
    return parsed;
  }

  private enumValue(typeName: string, raw: unknown, path: string): unknown {
    const schema = this.registry.enumType(typeName);
    if (!schema) return this.fail(path, `no schema for ${typeName}`);
    if (typeof raw === "string" && schema.names.includes(raw)) return raw;
    if (typeof raw === "number" && schema.numbers.has(raw)) return raw;
    const shown = typeof raw === "string" ? `"${raw}"` : describe(raw);
    return this.fail(path, `invalid value ${shown}: expected one of ${schema.names.join(", ")}`);
  }

  private scalar(type: T, raw: unknown, path: string): unknown {
    switch (type) {
      case T.TYPE_STRING:
        return typeof raw === "string" ? raw : this.fail(path, `expected a string, got ${describe(raw)}`);
      case T.TYPE_BOOL:
        return typeof raw === "boolean"
          ? raw
          : this.fail(path, `expected true or false, got ${describe(raw)}`);
      case T.TYPE_BYTES:
        return typeof raw === "string" && /^[A-Za-z0-9+/_-]*={0,2}$/.test(raw)
          ? raw
          : this.fail(path, `expected base64-encoded bytes, got ${describe(raw)}`);
      case T.TYPE_DOUBLE:
      case T.TYPE_FLOAT:
        return typeof raw === "number" ? raw : this.fail(path, `expected a number, got ${describe(raw)}`);
      default:
        return this.integer(type, raw, path);
    }
  }

  private integer(type: T, raw: unknown, path: string): unknown {
    const wide = is64Bit(type);
    // Proto JSON writes 64-bit integers as strings; accept both forms there.
    const value = typeof raw === "string" && wide && /^-?\d+$/.test(raw) ? Number(raw) : raw;
    if (typeof value !== "number" || !Number.isInteger(value)) {
      return this.fail(path, `expected an integer, got ${describe(raw)}`);
    }
    const unsigned =
      type === T.TYPE_UINT32 || type === T.TYPE_UINT64 || type === T.TYPE_FIXED32 || type === T.TYPE_FIXED64;
    if (unsigned && value < 0) return this.fail(path, `expected a non-negative integer, got ${value}`);
    if (!wide) {
      const [min, max] = unsigned ? [0, 0xffffffff] : [-0x80000000, 0x7fffffff];
      if (value < min || value > max)
        return this.fail(path, `integer ${value} is out of range ${min}..${max}`);
    }
    return value;
  }
}

/** A protobuf Duration in the `{seconds, nanos}` shape ts-proto uses. */
export interface DurationValue {
  seconds: number;
  nanos: number;
}

const UNIT_NANOS: Record<string, number> = {
  ns: 1,
  us: 1e3,
  µs: 1e3,
  ms: 1e6,
  s: 1e9,
  m: 60e9,
  h: 3600e9,
};

/**
 * Parses a duration the way Istio reads them (Go's time.ParseDuration, a
 * superset of proto JSON's "1.5s"): a sequence of decimal numbers with units
 * ns, us, ms, s, m, h, such as "1h30m" or "250ms", optionally signed.
 */
export function parseDuration(text: string): DurationValue | undefined {
  const match = /^([-+]?)((?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h))+$/.exec(text);
  if (!match) return text === "0" ? { seconds: 0, nanos: 0 } : undefined;
  let totalNanos = 0n;
  for (const part of text.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g)) {
    const [, number = "0", unit = "s"] = part;
    const [whole = "0", fraction = ""] = number.split(".");
    const unitNanos = BigInt(UNIT_NANOS[unit] ?? 1);
    totalNanos += BigInt(whole || "0") * unitNanos;
    if (fraction) {
      const scale = 10n ** BigInt(fraction.length);
      totalNanos += (BigInt(fraction) * unitNanos) / scale;
    }
  }
  if (match[1] === "-") totalNanos = -totalNanos;
  const seconds = totalNanos / 1_000_000_000n;
  const nanos = totalNanos % 1_000_000_000n;
  return { seconds: Number(seconds), nanos: Number(nanos) };
}

function is64Bit(type: T): boolean {
  return (
    type === T.TYPE_INT64 ||
    type === T.TYPE_UINT64 ||
    type === T.TYPE_SINT64 ||
    type === T.TYPE_FIXED64 ||
    type === T.TYPE_SFIXED64
  );
}

function isIntegerType(type: T): boolean {
  return type !== T.TYPE_STRING && type !== T.TYPE_BOOL && type !== T.TYPE_BYTES;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Names a JSON value's type for error messages. */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "an object";
  if (typeof value === "string")
    return `the string "${value.length > 40 ? `${value.slice(0, 40)}…` : value}"`;
  if (typeof value === "number") return `the number ${value}`;
  if (typeof value === "boolean") return `${value}`;
  return typeof value;
}
