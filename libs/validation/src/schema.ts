import { readDescriptorSet } from "@sextant/proto/descriptors";
import {
  type DescriptorProto,
  type EnumDescriptorProto,
  FieldDescriptorProto_Label,
  FieldDescriptorProto_Type,
  FileDescriptorSet,
} from "@sextant/proto/gen/google/protobuf/descriptor";

/** What a single (non-repeated) value of a field holds. */
export type ValueShape =
  | { kind: "scalar"; type: FieldDescriptorProto_Type }
  | { kind: "enum"; typeName: string }
  | { kind: "message"; typeName: string };

/** A field of a message, as the JSON walker needs it. */
export interface FieldSchema {
  /** The proto name, e.g. `export_to`. */
  name: string;
  /** The JSON (lowerCamel) name, e.g. `exportTo`. */
  jsonName: string;
  /** Shape of one value (for maps: of the map's value). */
  value: ValueShape;
  repeated: boolean;
  /** Set for map fields: the key's scalar type. */
  mapKey?: FieldDescriptorProto_Type;
  /** Name of the real oneof this field belongs to, if any. */
  oneof?: string;
  deprecated: boolean;
}

/** A message type: its fields looked up by either of their names. */
export interface MessageSchema {
  fullName: string;
  fields: FieldSchema[];
  byName: Map<string, FieldSchema>;
}

/** An enum type: its value names and numbers. */
export interface EnumSchema {
  fullName: string;
  names: string[];
  numbers: Set<number>;
}

/** Message and enum schemas by fully qualified name (no leading dot). */
export interface SchemaRegistry {
  message(fullName: string): MessageSchema | undefined;
  enumType(fullName: string): EnumSchema | undefined;
}

let cached: SchemaRegistry | undefined;

/**
 * The schema registry built from @sextant/proto's FileDescriptorSet. It is
 * read once and kept: the descriptors are immutable for the life of the
 * process.
 */
export function schemaRegistry(): SchemaRegistry {
  if (!cached) {
    const bytes = readDescriptorSet();
    cached = buildRegistry(FileDescriptorSet.decode(bytes), oneofMembers(bytes));
  }
  return cached;
}

/** Builds a registry from a decoded FileDescriptorSet. */
export function buildRegistry(set: FileDescriptorSet, inOneof: ReadonlySet<string>): SchemaRegistry {
  const rawMessages = new Map<string, DescriptorProto>();
  const enums = new Map<string, EnumSchema>();

  const addEnum = (prefix: string, e: EnumDescriptorProto) => {
    const fullName = `${prefix}${e.name ?? ""}`;
    const values = e.value ?? [];
    enums.set(fullName, {
      fullName,
      names: values.map((v) => v.name ?? ""),
      numbers: new Set(values.map((v) => v.number ?? 0)),
    });
  };
  const addMessage = (prefix: string, m: DescriptorProto) => {
    const fullName = `${prefix}${m.name ?? ""}`;
    rawMessages.set(fullName, m);
    for (const nested of m.nestedType ?? []) addMessage(`${fullName}.`, nested);
    for (const e of m.enumType ?? []) addEnum(`${fullName}.`, e);
  };
  for (const file of set.file ?? []) {
    const prefix = file.package ? `${file.package}.` : "";
    for (const m of file.messageType ?? []) addMessage(prefix, m);
    for (const e of file.enumType ?? []) addEnum(prefix, e);
  }

  const messages = new Map<string, MessageSchema>();
  const shapeOf = (type: FieldDescriptorProto_Type, typeName: string | undefined): ValueShape => {
    const name = (typeName ?? "").replace(/^\./, "");
    if (type === FieldDescriptorProto_Type.TYPE_ENUM) return { kind: "enum", typeName: name };
    if (type === FieldDescriptorProto_Type.TYPE_MESSAGE || type === FieldDescriptorProto_Type.TYPE_GROUP) {
      return { kind: "message", typeName: name };
    }
    return { kind: "scalar", type };
  };
  const resolve = (fullName: string): MessageSchema | undefined => {
    const existing = messages.get(fullName);
    if (existing) return existing;
    const raw = rawMessages.get(fullName);
    if (!raw) return undefined;
    const oneofNames = (raw.oneofDecl ?? []).map((o) => o.name ?? "");
    const fields: FieldSchema[] = [];
    for (const f of raw.field ?? []) {
      const type = f.type ?? FieldDescriptorProto_Type.TYPE_STRING;
      let value = shapeOf(type, f.typeName);
      let repeated = f.label === FieldDescriptorProto_Label.LABEL_REPEATED;
      let mapKey: FieldDescriptorProto_Type | undefined;
      if (repeated && value.kind === "message") {
        const entry = rawMessages.get(value.typeName);
        if (entry?.options?.mapEntry) {
          const k = entry.field?.find((x) => x.number === 1);
          const v = entry.field?.find((x) => x.number === 2);
          mapKey = k?.type ?? FieldDescriptorProto_Type.TYPE_STRING;
          value = shapeOf(v?.type ?? FieldDescriptorProto_Type.TYPE_STRING, v?.typeName);
          repeated = false;
        }
      }
      // proto3 `optional` fields live in synthetic oneofs; only real oneofs
      // constrain which fields may be set together.
      const oneof =
        f.oneofIndex !== undefined && !f.proto3Optional && inOneof.has(`${fullName}#${f.number}`)
          ? oneofNames[f.oneofIndex]
          : undefined;
      const name = f.name ?? "";
      fields.push({
        name,
        jsonName: f.jsonName ?? name,
        value,
        repeated,
        ...(mapKey !== undefined ? { mapKey } : {}),
        ...(oneof !== undefined ? { oneof } : {}),
        deprecated: f.options?.deprecated === true,
      });
    }
    const byName = new Map<string, FieldSchema>();
    for (const field of fields) {
      byName.set(field.jsonName, field);
      byName.set(field.name, field);
    }
    const schema: MessageSchema = { fullName, fields, byName };
    messages.set(fullName, schema);
    return schema;
  };

  return {
    message: resolve,
    enumType: (fullName) => enums.get(fullName),
  };
}

/**
 * The fields (`Message.Full.Name#number`) that declare a oneof_index. The
 * generated descriptor decoder fills absent proto2 fields with defaults, so
 * "oneof_index = 0" and "no oneof" look alike there; this reads presence from
 * the wire bytes instead (FileDescriptorSet.file=1, FileDescriptorProto
 * .package=2/.message_type=4, DescriptorProto .name=1/.field=2/.nested_type=3,
 * FieldDescriptorProto .number=3/.oneof_index=9/.proto3_optional=17).
 */
export function oneofMembers(bytes: Uint8Array): Set<string> {
  const members = new Set<string>();
  const visitMessage = (start: number, end: number, prefix: string) => {
    let name = "";
    const fieldRanges: Array<[number, number]> = [];
    const nestedRanges: Array<[number, number]> = [];
    for (const f of readFields(bytes, start, end)) {
      if (f.no === 1 && f.wt === 2) name = utf8(bytes, f.start, f.end);
      else if (f.no === 2 && f.wt === 2) fieldRanges.push([f.start, f.end]);
      else if (f.no === 3 && f.wt === 2) nestedRanges.push([f.start, f.end]);
    }
    const fullName = `${prefix}${name}`;
    for (const [s, e] of fieldRanges) {
      let number = 0;
      let hasOneof = false;
      let optional = false;
      for (const f of readFields(bytes, s, e)) {
        if (f.no === 3 && f.wt === 0) number = f.value;
        else if (f.no === 9 && f.wt === 0) hasOneof = true;
        else if (f.no === 17 && f.wt === 0) optional = f.value !== 0;
      }
      if (hasOneof && !optional) members.add(`${fullName}#${number}`);
    }
    for (const [s, e] of nestedRanges) visitMessage(s, e, `${fullName}.`);
  };
  for (const file of readFields(bytes, 0, bytes.length)) {
    if (file.no !== 1 || file.wt !== 2) continue;
    let pkg = "";
    const messages: Array<[number, number]> = [];
    for (const f of readFields(bytes, file.start, file.end)) {
      if (f.no === 2 && f.wt === 2) pkg = utf8(bytes, f.start, f.end);
      else if (f.no === 4 && f.wt === 2) messages.push([f.start, f.end]);
    }
    for (const [s, e] of messages) visitMessage(s, e, pkg ? `${pkg}.` : "");
  }
  return members;
}

interface WireField {
  no: number;
  wt: number;
  /** The varint value (wire type 0). */
  value: number;
  /** Payload bounds (wire type 2). */
  start: number;
  end: number;
}

function* readFields(bytes: Uint8Array, start: number, end: number): Generator<WireField> {
  let pos = start;
  const varint = (): number => {
    let result = 0;
    let shift = 1;
    for (;;) {
      const b = bytes[pos++];
      if (b === undefined) throw new Error("truncated descriptor set");
      result += (b & 0x7f) * shift;
      if (b < 0x80) return result;
      shift *= 128;
    }
  };
  while (pos < end) {
    const tag = varint();
    const no = Math.floor(tag / 8);
    const wt = tag % 8;
    if (wt === 0) {
      yield { no, wt, value: varint(), start: pos, end: pos };
    } else if (wt === 2) {
      const len = varint();
      yield { no, wt, value: 0, start: pos, end: pos + len };
      pos += len;
    } else if (wt === 1) {
      pos += 8;
    } else if (wt === 5) {
      pos += 4;
    } else {
      throw new Error(`unsupported wire type ${wt} in descriptor set`);
    }
  }
}

function utf8(bytes: Uint8Array, start: number, end: number): string {
  return new TextDecoder().decode(bytes.subarray(start, end));
}
