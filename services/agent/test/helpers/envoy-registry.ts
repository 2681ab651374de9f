import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { createFileRegistry, type FileRegistry, fromBinary } from "@bufbuild/protobuf";
import {
  type DescriptorProto,
  type FileDescriptorProto,
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
} from "@bufbuild/protobuf/wkt";
import { readDescriptorSet } from "@sextant/proto/descriptors";

/**
 * Envoy's upstream HTTP protocol options, which the bootstrap's gRPC clusters
 * use (typed_extension_protocol_options) but which @sextant/proto does not
 * generate: its file is not in libs/proto's ENVOY_ROOTS.
 */
const EXTRA_ENVOY_FILE = "envoy/extensions/upstreams/http/v3/http_protocol_options.proto";
const EXTRA_ENVOY_TYPE = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/**
 * The descriptor of EXTRA_ENVOY_FILE, read from the Envoy protos that
 * @grpc/grpc-js-xds ships (the same files libs/proto generates from) with the
 * @grpc/proto-loader it depends on. proto-loader names files after their
 * package and leaves type names relative, so the file is renamed and its
 * field types are resolved against the known types, by protobuf's scoping
 * rules (innermost scope first).
 */
function extraEnvoyFile(known: Set<string>): FileDescriptorProto {
  const require = createRequire(import.meta.url);
  const xdsPackage = require.resolve("@grpc/grpc-js-xds/package.json");
  const protoLoader = createRequire(xdsPackage)("@grpc/proto-loader") as {
    loadSync(file: string, options: object): Record<string, { fileDescriptorProtos: Buffer[] }>;
  };
  const deps = join(dirname(xdsPackage), "deps");
  const definition = protoLoader.loadSync(EXTRA_ENVOY_FILE, {
    keepCase: true,
    includeDirs: ["envoy-api", "xds", "googleapis", "protoc-gen-validate"].map((dir) => join(deps, dir)),
  });
  const files = (definition[EXTRA_ENVOY_TYPE]?.fileDescriptorProtos ?? []).map((bytes) =>
    fromBinary(FileDescriptorProtoSchema, bytes),
  );
  const file = files.find((candidate) => candidate.messageType.some((m) => m.name === "HttpProtocolOptions"));
  if (!file) throw new Error(`proto-loader did not describe ${EXTRA_ENVOY_TYPE}`);
  collectTypes(file, known);
  const resolve = (scope: string, name: string) => {
    if (name.startsWith(".")) return name;
    const parts = scope.split(".");
    for (let i = parts.length; i >= 0; i--) {
      const candidate = [...parts.slice(0, i), name].join(".");
      if (known.has(candidate)) return `.${candidate}`;
    }
    throw new Error(`cannot resolve type ${name} from ${scope}`);
  };
  const resolveFields = (scope: string, messages: DescriptorProto[]) => {
    for (const message of messages) {
      const inner = `${scope}.${message.name}`;
      for (const field of message.field) if (field.typeName) field.typeName = resolve(inner, field.typeName);
      resolveFields(inner, message.nestedType);
    }
  };
  resolveFields(file.package, file.messageType);
  file.name = EXTRA_ENVOY_FILE;
  return file;
}

function collectTypes(file: FileDescriptorProto, into: Set<string>): void {
  const walk = (prefix: string, messages: DescriptorProto[]) => {
    for (const message of messages) {
      into.add(prefix + message.name);
      for (const e of message.enumType) into.add(`${prefix}${message.name}.${e.name}`);
      walk(`${prefix}${message.name}.`, message.nestedType);
    }
  };
  const prefix = file.package ? `${file.package}.` : "";
  walk(prefix, file.messageType);
  for (const e of file.enumType) into.add(prefix + e.name);
}

let cached: FileRegistry | undefined;

/**
 * A @bufbuild/protobuf registry of every type @sextant/proto generates (its
 * FileDescriptorSet, as libs/validation reads it) plus Envoy's
 * HttpProtocolOptions: enough to decode the Envoy bootstrap and every Any in
 * it, rejecting unknown fields.
 */
export function envoyRegistry(): FileRegistry {
  if (!cached) {
    const set = fromBinary(FileDescriptorSetSchema, readDescriptorSet());
    const known = new Set<string>();
    for (const file of set.file) collectTypes(file, known);
    const extra = extraEnvoyFile(known);
    // Every generated file may be imported: the extra file's imports are among them.
    extra.dependency = set.file.map((file) => file.name);
    set.file.push(extra);
    cached = createFileRegistry(set);
  }
  return cached;
}
