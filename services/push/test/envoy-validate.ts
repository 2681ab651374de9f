// The validate-rule checker: Envoy's protos declare protoc-gen-validate rules
// (`(validate.rules)` on fields, `(validate.required)` on oneofs,
// `(validate.disabled)`/`(validate.ignored)` on messages), and Envoy rejects a
// resource that breaks them. Envoy cannot run here, so the golden tests walk
// every generated resource with these rules instead.
//
// Everything is read from the wire, guided by @sextant/proto's
// FileDescriptorSet: the generated ts-proto decoders fill absent proto2
// fields with defaults (a rule `gt: 0` and no rule look alike) and drop
// extensions, so neither the rules nor the resources go through them.
import { isIP } from "node:net";
import type { Any } from "@sextant/proto";
import { readDescriptorSet } from "@sextant/proto/descriptors";

/** One broken rule: the field's path in the resource and the rule, e.g. `listener_filters[0].name: min_len 1`. */
export interface Violation {
  readonly path: string;
  readonly rule: string;
}

/** A violation as one line, `<path>: <rule>`. */
export const formatViolation = (v: Violation): string => `${v.path || "<root>"}: ${v.rule}`;

/** Checks a packed xDS resource (an Any) against the validate rules of its type. */
export function validateAny(any: Any): Violation[] {
  return validateResource(any.typeUrl, any.value);
}

/**
 * Checks the bytes of a resource of typeUrl (`type.googleapis.com/<full name>`)
 * against the validate rules of its type, descending into nested messages and
 * into Anys whose type the descriptor set holds. An Any of a type it does not
 * hold is a violation: Envoy would not know it either.
 */
export function validateResource(typeUrl: string, bytes: Uint8Array): Violation[] {
  const registry = descriptors();
  const typeName = typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
  const type = registry.messages.get(typeName);
  if (!type) return [{ path: "", rule: `type ${typeName} is not in the descriptor set` }];
  const violations: Violation[] = [];
  checkMessage(registry, decodeMessage(registry, type, bytes, 0, bytes.length), "", violations);
  return violations;
}

/** The full name of a decoded message's type, kept on the object under this key (not enumerable). */
export const MESSAGE_TYPE: unique symbol = Symbol("message type");

/**
 * A resource decoded from the wire as plain data, in the shape of proto JSON
 * with the .proto field names (snake_case): only the fields present on the
 * wire (so a proto3 scalar left out is its default), repeated fields as
 * arrays, maps as objects, enums by name, 64-bit integers as numbers, and
 * every Any whose type the descriptor set holds unpacked as
 * `{"@type": <type URL>, ...fields}` (an unknown one stays `{"@type", value}`).
 */
export interface Decoded {
  [field: string]: unknown;
  [MESSAGE_TYPE]?: string;
}

/** An Any decoded as plain data (see {@link Decoded}); undefined when its type is not in the descriptor set. */
export function decodeAny(any: Any): Decoded | undefined {
  const registry = descriptors();
  const typeName = any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1);
  const type = registry.messages.get(typeName);
  if (!type) return undefined;
  return plain(registry, decodeMessage(registry, type, any.value, 0, any.value.length));
}

/** Every message of the descriptor set (full name) with the .proto file that declares it. */
export function messageFiles(): ReadonlyMap<string, string> {
  return descriptors().files;
}

// ---------------------------------------------------------------------------
// Descriptors, read from the wire.

enum T {
  DOUBLE = 1,
  FLOAT = 2,
  INT64 = 3,
  UINT64 = 4,
  INT32 = 5,
  FIXED64 = 6,
  FIXED32 = 7,
  BOOL = 8,
  STRING = 9,
  GROUP = 10,
  MESSAGE = 11,
  BYTES = 12,
  UINT32 = 13,
  ENUM = 14,
  SFIXED32 = 15,
  SFIXED64 = 16,
  SINT32 = 17,
  SINT64 = 18,
}

/** PGV's extension number on FieldOptions, MessageOptions (`disabled`) and OneofOptions (`required`). */
const PGV = 1071;
/** MessageOptions `(validate.ignored)`. */
const PGV_IGNORED = 1072;

interface FieldDesc {
  name: string;
  number: number;
  type: T;
  typeName: string;
  repeated: boolean;
  /** Index of the oneof (real or proto3-optional synthetic) the field is in. */
  oneof: number | undefined;
  /** The raw `(validate.rules)` bytes, if any. */
  rules: Uint8Array | undefined;
}

interface MessageDesc {
  fullName: string;
  fields: FieldDesc[];
  byNumber: Map<number, FieldDesc>;
  byName: Map<string, FieldDesc>;
  oneofs: Array<{ name: string; required: boolean }>;
  mapEntry: boolean;
  /** `(validate.disabled)` or `(validate.ignored)`: no rule of the message is checked. */
  skip: boolean;
}

interface Registry {
  messages: Map<string, MessageDesc>;
  /** The .proto file of each message, by full name. */
  files: Map<string, string>;
  enums: Map<string, Set<number>>;
  /** The name of each enum value, by enum full name and number. */
  enumNames: Map<string, Map<number, string>>;
  /** Decoded FieldRules, per field. */
  rules: WeakMap<FieldDesc, Msg | null>;
}

let registryCache: Registry | undefined;

function descriptors(): Registry {
  if (registryCache) return registryCache;
  const bytes = readDescriptorSet();
  const messages = new Map<string, MessageDesc>();
  const files = new Map<string, string>();
  let currentFile = "";
  const enums = new Map<string, Set<number>>();
  const enumNames = new Map<string, Map<number, string>>();
  const str = (f: WireField) => utf8.decode(bytes.subarray(f.start, f.end));
  const readEnum = (f: WireField, prefix: string) => {
    let name = "";
    const numbers = new Set<number>();
    const names = new Map<number, string>();
    for (const g of readFields(bytes, f.start, f.end)) {
      if (g.no === 1 && g.wt === 2) name = str(g);
      else if (g.no === 2 && g.wt === 2) {
        let valueName = "";
        let valueNumber = 0;
        for (const v of readFields(bytes, g.start, g.end)) {
          if (v.no === 1 && v.wt === 2) valueName = str(v);
          if (v.no === 2 && v.wt === 0) valueNumber = int32(v.value);
        }
        numbers.add(valueNumber);
        if (!names.has(valueNumber)) names.set(valueNumber, valueName);
      }
    }
    enums.set(`${prefix}${name}`, numbers);
    enumNames.set(`${prefix}${name}`, names);
  };
  const pgvOption = (f: WireField, number: number): WireField | undefined => {
    let found: WireField | undefined;
    for (const o of readFields(bytes, f.start, f.end)) if (o.no === number) found = o;
    return found;
  };
  const readMessage = (f: WireField, prefix: string) => {
    const fieldRanges: WireField[] = [];
    const nested: WireField[] = [];
    const enumRanges: WireField[] = [];
    const oneofs: Array<{ name: string; required: boolean }> = [];
    let name = "";
    let mapEntry = false;
    let skip = false;
    for (const g of readFields(bytes, f.start, f.end)) {
      if (g.no === 1 && g.wt === 2) name = str(g);
      else if (g.no === 2 && g.wt === 2) fieldRanges.push(g);
      else if (g.no === 3 && g.wt === 2) nested.push(g);
      else if (g.no === 4 && g.wt === 2) enumRanges.push(g);
      else if (g.no === 7 && g.wt === 2) {
        for (const o of readFields(bytes, g.start, g.end)) {
          if (o.no === 7 && o.wt === 0) mapEntry = o.value !== 0;
          if ((o.no === PGV || o.no === PGV_IGNORED) && o.wt === 0 && o.value !== 0) skip = true;
        }
      } else if (g.no === 8 && g.wt === 2) {
        let oneofName = "";
        let required = false;
        for (const o of readFields(bytes, g.start, g.end)) {
          if (o.no === 1 && o.wt === 2) oneofName = str(o);
          if (o.no === 2 && o.wt === 2) required = (pgvOption(o, PGV)?.value ?? 0) !== 0;
        }
        oneofs.push({ name: oneofName, required });
      }
    }
    const fullName = `${prefix}${name}`;
    const fields: FieldDesc[] = fieldRanges.map((range) => {
      const field: FieldDesc = {
        name: "",
        number: 0,
        type: T.STRING,
        typeName: "",
        repeated: false,
        oneof: undefined,
        rules: undefined,
      };
      for (const g of readFields(bytes, range.start, range.end)) {
        if (g.no === 1 && g.wt === 2) field.name = str(g);
        else if (g.no === 3 && g.wt === 0) field.number = g.value;
        else if (g.no === 4 && g.wt === 0) field.repeated = g.value === 3;
        else if (g.no === 5 && g.wt === 0) field.type = g.value as T;
        else if (g.no === 6 && g.wt === 2) field.typeName = str(g).replace(/^\./, "");
        else if (g.no === 9 && g.wt === 0) field.oneof = g.value;
        else if (g.no === 8 && g.wt === 2) {
          const rules = pgvOption(g, PGV);
          if (rules && rules.wt === 2) field.rules = bytes.subarray(rules.start, rules.end);
        }
      }
      return field;
    });
    files.set(fullName, currentFile);
    messages.set(fullName, {
      fullName,
      fields,
      byNumber: new Map(fields.map((x) => [x.number, x])),
      byName: new Map(fields.map((x) => [x.name, x])),
      oneofs,
      mapEntry,
      skip,
    });
    for (const n of nested) readMessage(n, `${fullName}.`);
    for (const e of enumRanges) readEnum(e, `${fullName}.`);
  };
  for (const file of readFields(bytes, 0, bytes.length)) {
    if (file.no !== 1 || file.wt !== 2) continue;
    let pkg = "";
    const messageRanges: WireField[] = [];
    const enumRanges: WireField[] = [];
    for (const g of readFields(bytes, file.start, file.end)) {
      if (g.no === 1 && g.wt === 2) currentFile = str(g);
      else if (g.no === 2 && g.wt === 2) pkg = str(g);
      else if (g.no === 4 && g.wt === 2) messageRanges.push(g);
      else if (g.no === 5 && g.wt === 2) enumRanges.push(g);
    }
    const prefix = pkg ? `${pkg}.` : "";
    for (const m of messageRanges) readMessage(m, prefix);
    for (const e of enumRanges) readEnum(e, prefix);
  }
  registryCache = { messages, files, enums, enumNames, rules: new WeakMap() };
  return registryCache;
}

// ---------------------------------------------------------------------------
// Messages, decoded from the wire by their descriptor (presence kept).

/** A decoded message: the values of each field present, by field name (repeated fields in order). */
interface Msg {
  readonly type: MessageDesc;
  readonly values: Map<string, Value[]>;
}
type Value = number | bigint | boolean | string | Uint8Array | Msg;

const utf8 = new TextDecoder();

function decodeMessage(
  registry: Registry,
  type: MessageDesc,
  bytes: Uint8Array,
  start: number,
  end: number,
): Msg {
  const values = new Map<string, Value[]>();
  const push = (field: FieldDesc, value: Value) => {
    const list = values.get(field.name);
    if (!list) values.set(field.name, [value]);
    else if (field.repeated) list.push(value);
    else list[0] = value; // a singular message sent twice would merge; last wins is enough for generated bytes
  };
  for (const f of readFields(bytes, start, end)) {
    const field = type.byNumber.get(f.no);
    if (!field) continue;
    if (f.wt === 2 && field.type !== T.STRING && field.type !== T.BYTES && field.type !== T.MESSAGE) {
      // Packed repeated scalars.
      let pos = f.start;
      while (pos < f.end) {
        const [value, next] = readPacked(bytes, pos, field.type);
        push(field, value);
        pos = next;
      }
      continue;
    }
    push(field, scalarOf(registry, bytes, f, field));
  }
  // A oneof keeps only its last member set, as protobuf does.
  const lastOfOneof = new Map<number, string>();
  for (const f of readFields(bytes, start, end)) {
    const field = type.byNumber.get(f.no);
    if (field?.oneof !== undefined) lastOfOneof.set(field.oneof, field.name);
  }
  for (const field of type.fields) {
    if (field.oneof !== undefined && values.has(field.name) && lastOfOneof.get(field.oneof) !== field.name) {
      values.delete(field.name);
    }
  }
  return { type, values };
}

function scalarOf(registry: Registry, bytes: Uint8Array, f: WireField, field: FieldDesc): Value {
  switch (field.type) {
    case T.STRING:
      return utf8.decode(bytes.subarray(f.start, f.end));
    case T.BYTES:
      return bytes.subarray(f.start, f.end);
    case T.MESSAGE: {
      const type = registry.messages.get(field.typeName);
      if (!type) throw new Error(`message type ${field.typeName} is not in the descriptor set`);
      return decodeMessage(registry, type, bytes, f.start, f.end);
    }
    default:
      return numberOf(field.type, f.raw);
  }
}

/** A scalar from its raw wire value (varint or fixed bytes as an unsigned bigint). */
function numberOf(type: T, raw: bigint): Value {
  switch (type) {
    case T.BOOL:
      return raw !== 0n;
    case T.INT32:
    case T.ENUM:
    case T.SFIXED32:
      return Number(BigInt.asIntN(32, raw));
    case T.UINT32:
    case T.FIXED32:
      return Number(BigInt.asUintN(32, raw));
    case T.INT64:
    case T.SFIXED64:
      return BigInt.asIntN(64, raw);
    case T.UINT64:
    case T.FIXED64:
      return BigInt.asUintN(64, raw);
    case T.SINT32:
    case T.SINT64: {
      const n = BigInt.asUintN(64, raw);
      return type === T.SINT32 ? Number((n >> 1n) ^ -(n & 1n)) : (n >> 1n) ^ -(n & 1n);
    }
    case T.DOUBLE: {
      const view = new DataView(new ArrayBuffer(8));
      view.setBigUint64(0, raw, true);
      return view.getFloat64(0, true);
    }
    case T.FLOAT: {
      const view = new DataView(new ArrayBuffer(4));
      view.setUint32(0, Number(raw), true);
      return view.getFloat32(0, true);
    }
    default:
      return Number(raw);
  }
}

function readPacked(bytes: Uint8Array, pos: number, type: T): [Value, number] {
  if (type === T.DOUBLE || type === T.FIXED64 || type === T.SFIXED64) {
    return [numberOf(type, littleEndian(bytes, pos, 8)), pos + 8];
  }
  if (type === T.FLOAT || type === T.FIXED32 || type === T.SFIXED32) {
    return [numberOf(type, littleEndian(bytes, pos, 4)), pos + 4];
  }
  const [raw, next] = varint(bytes, pos);
  return [numberOf(type, raw), next];
}

interface WireField {
  no: number;
  wt: number;
  /** The varint value as a number (wire type 0; exact below 2^53). */
  value: number;
  /** The raw value of wire types 0, 1 and 5. */
  raw: bigint;
  /** Payload bounds (wire type 2). */
  start: number;
  end: number;
}

function varint(bytes: Uint8Array, pos: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    const b = bytes[pos++];
    if (b === undefined) throw new Error("truncated message");
    result |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [result, pos];
    shift += 7n;
  }
}

function littleEndian(bytes: Uint8Array, pos: number, length: number): bigint {
  if (pos + length > bytes.length) throw new Error("truncated message");
  let result = 0n;
  for (let i = length - 1; i >= 0; i--) result = (result << 8n) | BigInt(bytes[pos + i]!);
  return result;
}

const int32 = (value: number) => Number(BigInt.asIntN(32, BigInt(value)));

function* readFields(bytes: Uint8Array, start: number, end: number): Generator<WireField> {
  let pos = start;
  while (pos < end) {
    const [tag, afterTag] = varint(bytes, pos);
    pos = afterTag;
    const no = Number(tag >> 3n);
    const wt = Number(tag & 7n);
    if (wt === 0) {
      const [raw, next] = varint(bytes, pos);
      pos = next;
      yield { no, wt, value: Number(raw), raw, start: pos, end: pos };
    } else if (wt === 2) {
      const [length, next] = varint(bytes, pos);
      const len = Number(length);
      if (next + len > end) throw new Error("truncated message");
      yield { no, wt, value: 0, raw: 0n, start: next, end: next + len };
      pos = next + len;
    } else if (wt === 1 || wt === 5) {
      const size = wt === 1 ? 8 : 4;
      yield { no, wt, value: 0, raw: littleEndian(bytes, pos, size), start: pos, end: pos + size };
      pos += size;
    } else {
      throw new Error(`unsupported wire type ${wt}`);
    }
  }
}

/** A decoded message as plain data (see {@link Decoded}). */
function plain(registry: Registry, msg: Msg): Decoded {
  if (msg.type.fullName === "google.protobuf.Any") {
    const typeUrl = String(first(msg, "type_url") ?? "");
    const bytes = (first(msg, "value") as Uint8Array | undefined) ?? new Uint8Array();
    const type = registry.messages.get(typeUrl.slice(typeUrl.lastIndexOf("/") + 1));
    if (!type) return { "@type": typeUrl, value: bytes };
    return { "@type": typeUrl, ...plain(registry, decodeMessage(registry, type, bytes, 0, bytes.length)) };
  }
  const out: Decoded = {};
  Object.defineProperty(out, MESSAGE_TYPE, { value: msg.type.fullName, enumerable: false });
  for (const field of msg.type.fields) {
    const values = msg.values.get(field.name);
    if (!values) continue;
    const one = (value: Value): unknown => {
      if (typeof value === "bigint") return Number(value);
      if (field.type === T.ENUM) return registry.enumNames.get(field.typeName)?.get(Number(value)) ?? value;
      if (field.type === T.MESSAGE) return plain(registry, value as Msg);
      return value;
    };
    const element = field.type === T.MESSAGE ? registry.messages.get(field.typeName) : undefined;
    if (element?.mapEntry) {
      const valueField = element.byName.get("value")!;
      const entries: Record<string, unknown> = {};
      for (const entry of values as Msg[]) {
        const value = first(entry, "value");
        entries[String(first(entry, "key") ?? "")] =
          value === undefined
            ? undefined
            : valueField.type === T.MESSAGE
              ? plain(registry, value as Msg)
              : typeof value === "bigint"
                ? Number(value)
                : value;
      }
      out[field.name] = entries;
    } else {
      out[field.name] = field.repeated ? values.map(one) : one(values[0]!);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The rules.

const first = (msg: Msg | undefined, name: string): Value | undefined => msg?.values.get(name)?.[0];
const all = (msg: Msg | undefined, name: string): Value[] => msg?.values.get(name) ?? [];
const has = (msg: Msg | undefined, name: string): boolean => msg?.values.has(name) ?? false;
const sub = (msg: Msg | undefined, name: string): Msg | undefined => first(msg, name) as Msg | undefined;

function rulesOf(registry: Registry, field: FieldDesc): Msg | undefined {
  if (!field.rules) return undefined;
  let rules = registry.rules.get(field);
  if (rules === undefined) {
    const type = registry.messages.get("validate.FieldRules");
    if (!type) throw new Error("validate.FieldRules is not in the descriptor set");
    rules = decodeMessage(registry, type, field.rules, 0, field.rules.length);
    registry.rules.set(field, rules);
  }
  return rules ?? undefined;
}

const WRAPPERS: Record<string, T> = {
  "google.protobuf.DoubleValue": T.DOUBLE,
  "google.protobuf.FloatValue": T.FLOAT,
  "google.protobuf.Int64Value": T.INT64,
  "google.protobuf.UInt64Value": T.UINT64,
  "google.protobuf.Int32Value": T.INT32,
  "google.protobuf.UInt32Value": T.UINT32,
  "google.protobuf.BoolValue": T.BOOL,
  "google.protobuf.StringValue": T.STRING,
  "google.protobuf.BytesValue": T.BYTES,
};

function defaultOf(type: T): Value {
  switch (type) {
    case T.STRING:
      return "";
    case T.BYTES:
      return new Uint8Array();
    case T.BOOL:
      return false;
    case T.INT64:
    case T.UINT64:
    case T.SINT64:
    case T.FIXED64:
    case T.SFIXED64:
      return 0n;
    default:
      return 0;
  }
}

function checkMessage(registry: Registry, msg: Msg, path: string, out: Violation[]): void {
  const type = msg.type;
  if (type.fullName === "google.protobuf.Any") {
    checkAnyValue(registry, msg, path, out);
    return;
  }
  const at = (name: string) => (path ? `${path}.${name}` : name);
  if (!type.skip) {
    type.oneofs.forEach((oneof, index) => {
      if (oneof.required && !type.fields.some((f) => f.oneof === index && msg.values.has(f.name))) {
        out.push({ path: at(oneof.name), rule: "oneof required" });
      }
    });
  }
  for (const field of type.fields) {
    const present = msg.values.get(field.name);
    const rules = type.skip ? undefined : rulesOf(registry, field);
    const messageRules = sub(rules, "message");
    const skipNested = first(messageRules, "skip") === true;
    if (rules) checkField(registry, field, rules, present, at(field.name), out);
    if (!present || skipNested || field.type !== T.MESSAGE) continue;
    const element = registry.messages.get(field.typeName);
    if (element?.mapEntry) {
      for (const entry of present as Msg[]) {
        const value = first(entry, "value");
        if (value && typeof value === "object" && !(value instanceof Uint8Array)) {
          checkMessage(
            registry,
            value,
            `${at(field.name)}[${JSON.stringify(String(first(entry, "key") ?? ""))}]`,
            out,
          );
        }
      }
    } else if (field.repeated) {
      (present as Msg[]).forEach((item, i) => {
        checkMessage(registry, item, `${at(field.name)}[${i}]`, out);
      });
    } else {
      checkMessage(registry, present[0] as Msg, at(field.name), out);
    }
  }
}

/** An Any's packed value, checked as its own type; the path names the type, e.g. `typed_config(HttpConnectionManager)`. */
function checkAnyValue(registry: Registry, any: Msg, path: string, out: Violation[]): void {
  const typeUrl = String(first(any, "type_url") ?? "");
  const typeName = typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
  const type = registry.messages.get(typeName);
  if (!type) {
    out.push({ path, rule: `Any type ${typeUrl || "(empty)"} is not in the descriptor set` });
    return;
  }
  const bytes = (first(any, "value") as Uint8Array | undefined) ?? new Uint8Array();
  const shortName = typeName.slice(typeName.lastIndexOf(".") + 1);
  checkMessage(registry, decodeMessage(registry, type, bytes, 0, bytes.length), `${path}(${shortName})`, out);
}

function checkField(
  registry: Registry,
  field: FieldDesc,
  rules: Msg,
  present: Value[] | undefined,
  path: string,
  out: Violation[],
): void {
  const fail = (rule: string) => out.push({ path, rule });
  // A member of a oneof (or a proto3 optional) that is not set has no rule to meet.
  if (!present && field.oneof !== undefined) return;
  if (first(sub(rules, "message"), "required") === true && !present) fail("required");
  const element = field.type === T.MESSAGE ? registry.messages.get(field.typeName) : undefined;

  if (element?.mapEntry) {
    const mapRules = sub(rules, "map");
    if (!mapRules) return;
    const pairs = (present ?? []) as Msg[];
    if (pairs.length === 0 && first(mapRules, "ignore_empty") === true) return;
    const min = first(mapRules, "min_pairs");
    const max = first(mapRules, "max_pairs");
    if (min !== undefined && pairs.length < Number(min)) fail(`min_pairs ${min}`);
    if (max !== undefined && pairs.length > Number(max)) fail(`max_pairs ${max}`);
    const keyField = element.byName.get("key")!;
    const valueField = element.byName.get("value")!;
    const keyRules = sub(mapRules, "keys");
    const valueRules = sub(mapRules, "values");
    for (const pair of pairs) {
      const key = first(pair, "key") ?? defaultOf(keyField.type);
      const where = `${path}[${JSON.stringify(String(key))}]`;
      if (keyRules) checkValue(registry, keyField, keyRules, key, where, out);
      if (valueRules) {
        checkValue(registry, valueField, valueRules, first(pair, "value"), where, out);
      }
    }
    return;
  }

  if (field.repeated) {
    const repeatedRules = sub(rules, "repeated");
    if (!repeatedRules) return;
    const items = present ?? [];
    if (items.length === 0 && first(repeatedRules, "ignore_empty") === true) return;
    const min = first(repeatedRules, "min_items");
    const max = first(repeatedRules, "max_items");
    if (min !== undefined && items.length < Number(min)) fail(`min_items ${min}`);
    if (max !== undefined && items.length > Number(max)) fail(`max_items ${max}`);
    if (first(repeatedRules, "unique") === true) {
      const seen = new Set(
        items.map((v) => (v instanceof Uint8Array ? Buffer.from(v).toString("hex") : String(v))),
      );
      if (seen.size !== items.length) fail("unique");
    }
    const itemRules = sub(repeatedRules, "items");
    if (itemRules) {
      items.forEach((item, i) => {
        checkValue(registry, field, itemRules, item, `${path}[${i}]`, out);
      });
    }
    return;
  }

  checkValue(registry, field, rules, present?.[0], path, out);
}

/** The rules of one (non-repeated) value: the field's own, or a repeated field's `items`, or a map's `keys`/`values`. */
function checkValue(
  registry: Registry,
  field: FieldDesc,
  rules: Msg,
  value: Value | undefined,
  path: string,
  out: Violation[],
): void {
  const fail = (rule: string) => out.push({ path, rule });
  if (field.type === T.MESSAGE) {
    const msg = value as Msg | undefined;
    const wrapped = WRAPPERS[field.typeName];
    if (wrapped !== undefined) {
      // Scalar rules on a wrapper apply to its value when the wrapper is set.
      if (msg) checkScalar(registry, wrapped, "", rules, first(msg, "value") ?? defaultOf(wrapped), fail);
      return;
    }
    if (field.typeName === "google.protobuf.Duration" || field.typeName === "google.protobuf.Timestamp") {
      const kind = field.typeName === "google.protobuf.Duration" ? "duration" : "timestamp";
      const timeRules = sub(rules, kind);
      if (!timeRules) return;
      if (first(timeRules, "required") === true && !msg) fail("required");
      if (msg) checkTime(timeRules, nanosOf(msg), fail);
      return;
    }
    if (field.typeName === "google.protobuf.Any") {
      const anyRules = sub(rules, "any");
      if (!anyRules) return;
      if (first(anyRules, "required") === true && !msg) fail("required");
      if (!msg) return;
      const typeUrl = String(first(msg, "type_url") ?? "");
      const allowed = all(anyRules, "in").map(String);
      if (allowed.length > 0 && !allowed.includes(typeUrl)) fail(`in [${allowed.join(", ")}]`);
      if (all(anyRules, "not_in").map(String).includes(typeUrl)) fail(`not_in (got ${typeUrl})`);
    }
    return;
  }
  checkScalar(registry, field.type, field.typeName, rules, value ?? defaultOf(field.type), fail);
}

function nanosOf(msg: Msg): bigint {
  const seconds = BigInt((first(msg, "seconds") as bigint | undefined) ?? 0n);
  const nanos = BigInt((first(msg, "nanos") as number | undefined) ?? 0);
  return seconds * 1_000_000_000n + nanos;
}

function checkTime(rules: Msg, value: bigint, fail: (rule: string) => void): void {
  const bound = (name: string) => {
    const msg = sub(rules, name);
    return msg ? nanosOf(msg) : undefined;
  };
  const show = (n: bigint) => `${Number(n) / 1e9}s`;
  const constant = bound("const");
  if (constant !== undefined && value !== constant) fail(`const ${show(constant)}`);
  checkRange(
    value,
    { lt: bound("lt"), lte: bound("lte"), gt: bound("gt"), gte: bound("gte") },
    (rule, limit) => fail(`${rule} ${show(limit)}`),
  );
  const allowed = all(rules, "in").map((m) => nanosOf(m as Msg));
  if (allowed.length > 0 && !allowed.includes(value)) fail(`in [${allowed.map(show).join(", ")}]`);
  if (all(rules, "not_in").some((m) => nanosOf(m as Msg) === value)) fail(`not_in (got ${show(value)})`);
}

/** PGV's ranges: lt/lte and gt/gte together bound an interval, or its complement when gt ≥ lt. */
function checkRange<N extends number | bigint>(
  value: N,
  bounds: { lt?: N | undefined; lte?: N | undefined; gt?: N | undefined; gte?: N | undefined },
  fail: (rule: string, limit: N) => void,
): void {
  const upper =
    bounds.lt !== undefined
      ? { rule: "lt", limit: bounds.lt }
      : bounds.lte !== undefined
        ? { rule: "lte", limit: bounds.lte }
        : undefined;
  const lower =
    bounds.gt !== undefined
      ? { rule: "gt", limit: bounds.gt }
      : bounds.gte !== undefined
        ? { rule: "gte", limit: bounds.gte }
        : undefined;
  const below = (u: { rule: string; limit: N }) => (u.rule === "lt" ? value < u.limit : value <= u.limit);
  const above = (l: { rule: string; limit: N }) => (l.rule === "gt" ? value > l.limit : value >= l.limit);
  if (upper && lower && lower.limit >= upper.limit) {
    // Reversed: outside [upper, lower].
    if (!(below(upper) || above(lower))) fail(`${lower.rule} ${lower.limit} or ${upper.rule}`, upper.limit);
    return;
  }
  if (lower && !above(lower)) fail(lower.rule, lower.limit);
  if (upper && !below(upper)) fail(upper.rule, upper.limit);
}

const NUMERIC_RULES: Partial<Record<T, string>> = {
  [T.DOUBLE]: "double",
  [T.FLOAT]: "float",
  [T.INT32]: "int32",
  [T.INT64]: "int64",
  [T.UINT32]: "uint32",
  [T.UINT64]: "uint64",
  [T.SINT32]: "sint32",
  [T.SINT64]: "sint64",
  [T.FIXED32]: "fixed32",
  [T.FIXED64]: "fixed64",
  [T.SFIXED32]: "sfixed32",
  [T.SFIXED64]: "sfixed64",
};

function checkScalar(
  registry: Registry,
  type: T,
  typeName: string,
  rules: Msg,
  value: Value,
  fail: (rule: string) => void,
): void {
  const numeric = NUMERIC_RULES[type];
  if (numeric) {
    const r = sub(rules, numeric);
    if (!r) return;
    const wide = typeof value === "bigint";
    const as = (v: Value | undefined) =>
      v === undefined ? undefined : wide ? BigInt(v as bigint) : Number(v);
    const n = as(value)!;
    if (first(r, "ignore_empty") === true && (n === 0 || n === 0n)) return;
    const constant = as(first(r, "const"));
    if (constant !== undefined && n !== constant) fail(`const ${constant}`);
    checkRange<number | bigint>(
      n,
      { lt: as(first(r, "lt")), lte: as(first(r, "lte")), gt: as(first(r, "gt")), gte: as(first(r, "gte")) },
      (rule, limit) => fail(`${rule} ${limit} (got ${n})`),
    );
    const allowed = all(r, "in").map(as);
    if (allowed.length > 0 && !allowed.includes(n)) fail(`in [${allowed.join(", ")}] (got ${n})`);
    if (all(r, "not_in").map(as).includes(n)) fail(`not_in (got ${n})`);
    return;
  }
  if (type === T.BOOL) {
    const r = sub(rules, "bool");
    if (r && has(r, "const") && first(r, "const") !== value) fail(`const ${first(r, "const")}`);
    return;
  }
  if (type === T.ENUM) {
    const r = sub(rules, "enum");
    if (!r) return;
    const n = Number(value);
    if (has(r, "const") && Number(first(r, "const")) !== n) fail(`const ${first(r, "const")} (got ${n})`);
    if (first(r, "defined_only") === true && !registry.enums.get(typeName)?.has(n)) {
      fail(`defined_only (got ${n})`);
    }
    const allowed = all(r, "in").map(Number);
    if (allowed.length > 0 && !allowed.includes(n)) fail(`in [${allowed.join(", ")}] (got ${n})`);
    if (all(r, "not_in").map(Number).includes(n)) fail(`not_in (got ${n})`);
    return;
  }
  if (type === T.STRING) {
    const r = sub(rules, "string");
    if (r) checkString(r, String(value), fail);
    return;
  }
  if (type === T.BYTES) {
    const r = sub(rules, "bytes");
    if (r) checkBytes(r, value as Uint8Array, fail);
  }
}

function checkString(r: Msg, s: string, fail: (rule: string) => void): void {
  if (s === "" && first(r, "ignore_empty") === true) return;
  const got = ` (got ${JSON.stringify(s.length > 60 ? `${s.slice(0, 60)}…` : s)})`;
  const chars = [...s].length;
  const bytes = Buffer.byteLength(s, "utf8");
  const n = (name: string) => {
    const v = first(r, name);
    return v === undefined ? undefined : Number(v);
  };
  const str = (name: string) => first(r, name) as string | undefined;
  if (has(r, "const") && s !== str("const")) fail(`const ${JSON.stringify(str("const"))}${got}`);
  const len = n("len");
  if (len !== undefined && chars !== len) fail(`len ${len}${got}`);
  const minLen = n("min_len");
  if (minLen !== undefined && chars < minLen) fail(`min_len ${minLen}`);
  const maxLen = n("max_len");
  if (maxLen !== undefined && chars > maxLen) fail(`max_len ${maxLen}${got}`);
  const lenBytes = n("len_bytes");
  if (lenBytes !== undefined && bytes !== lenBytes) fail(`len_bytes ${lenBytes}${got}`);
  const minBytes = n("min_bytes");
  if (minBytes !== undefined && bytes < minBytes) fail(`min_bytes ${minBytes}`);
  const maxBytes = n("max_bytes");
  if (maxBytes !== undefined && bytes > maxBytes) fail(`max_bytes ${maxBytes}${got}`);
  const pattern = str("pattern");
  if (pattern !== undefined && !regex(pattern).test(s)) fail(`pattern ${pattern}${got}`);
  const prefix = str("prefix");
  if (prefix !== undefined && !s.startsWith(prefix)) fail(`prefix ${JSON.stringify(prefix)}${got}`);
  const suffix = str("suffix");
  if (suffix !== undefined && !s.endsWith(suffix)) fail(`suffix ${JSON.stringify(suffix)}${got}`);
  const contains = str("contains");
  if (contains !== undefined && !s.includes(contains)) fail(`contains ${JSON.stringify(contains)}${got}`);
  const notContains = str("not_contains");
  if (notContains !== undefined && s.includes(notContains))
    fail(`not_contains ${JSON.stringify(notContains)}${got}`);
  const allowed = all(r, "in").map(String);
  if (allowed.length > 0 && !allowed.includes(s)) fail(`in [${allowed.join(", ")}]${got}`);
  if (all(r, "not_in").map(String).includes(s)) fail(`not_in${got}`);
  const wellKnown: Array<[string, (s: string) => boolean]> = [
    ["email", (x) => /^[^@\s]+@[^@\s]+$/.test(x) && isHostname(x.slice(x.lastIndexOf("@") + 1))],
    ["hostname", isHostname],
    ["ip", (x) => isIP(x) !== 0],
    ["ipv4", (x) => isIP(x) === 4],
    ["ipv6", (x) => isIP(x) === 6],
    ["uri", (x) => URL.canParse(x)],
    ["uri_ref", () => true],
    ["address", (x) => isIP(x) !== 0 || isHostname(x)],
    ["uuid", (x) => /^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$/.test(x)],
  ];
  for (const [name, check] of wellKnown) {
    if (first(r, name) === true && !check(s)) fail(`${name}${got}`);
  }
  const known = first(r, "well_known_regex");
  if (known !== undefined && known !== 0) {
    const strict = first(r, "strict") !== false;
    // validate.proto: 1 HTTP_HEADER_NAME, 2 HTTP_HEADER_VALUE.
    // PGV's header regexes, as character tests: lax `^[^\0\n\r]*$`; strict values
    // exclude the C0 controls but tab, and DEL; strict names are RFC 7230 tokens.
    const code = (c: string) => c.charCodeAt(0);
    const valid = !strict
      ? ![...s].some((c) => c === "\0" || c === "\n" || c === "\r")
      : known === 1
        ? /^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$/.test(s)
        : ![...s].some((c) => (code(c) < 0x20 && c !== "\t") || code(c) === 0x7f);
    if (!valid) fail(`well_known_regex ${known === 1 ? "HTTP_HEADER_NAME" : "HTTP_HEADER_VALUE"}${got}`);
  }
}

function checkBytes(r: Msg, b: Uint8Array, fail: (rule: string) => void): void {
  const n = (name: string) => {
    const v = first(r, name);
    return v === undefined ? undefined : Number(v);
  };
  const len = n("len");
  if (len !== undefined && b.length !== len) fail(`len ${len}`);
  const minLen = n("min_len");
  if (minLen !== undefined && b.length < minLen) fail(`min_len ${minLen}`);
  const maxLen = n("max_len");
  if (maxLen !== undefined && b.length > maxLen) fail(`max_len ${maxLen}`);
  const pattern = first(r, "pattern") as string | undefined;
  if (pattern !== undefined && !regex(pattern).test(Buffer.from(b).toString("latin1")))
    fail(`pattern ${pattern}`);
  const hex = Buffer.from(b).toString("hex");
  const asHex = (v: Value) => Buffer.from(v as Uint8Array).toString("hex");
  if (has(r, "const") && hex !== asHex(first(r, "const")!)) fail("const");
  const allowed = all(r, "in").map(asHex);
  if (allowed.length > 0 && !allowed.includes(hex)) fail("in");
  if (all(r, "not_in").map(asHex).includes(hex)) fail("not_in");
  if (first(r, "ip") === true && b.length !== 4 && b.length !== 16) fail("ip");
  if (first(r, "ipv4") === true && b.length !== 4) fail("ipv4");
  if (first(r, "ipv6") === true && b.length !== 16) fail("ipv6");
}

/** PGV's hostname: at most 253 characters of dot-separated labels of 1-63 letters, digits and inner hyphens. */
function isHostname(s: string): boolean {
  const host = s.endsWith(".") ? s.slice(0, -1) : s;
  if (host.length === 0 || host.length > 253) return false;
  return host.split(".").every((label) => /^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/.test(label));
}

const regexes = new Map<string, RegExp>();

/** An RE2 pattern as a JS RegExp (the patterns Envoy's protos use are in the common subset). */
function regex(pattern: string): RegExp {
  let compiled = regexes.get(pattern);
  if (!compiled) {
    try {
      compiled = new RegExp(pattern, "u");
    } catch {
      compiled = new RegExp(pattern);
    }
    regexes.set(pattern, compiled);
  }
  return compiled;
}
