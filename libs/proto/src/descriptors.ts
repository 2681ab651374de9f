import { readFileSync } from "node:fs";
import {
  createFileRegistry,
  type DescMessage,
  type FileRegistry,
  fromBinary,
  fromJson,
  type JsonValue,
  toBinary,
  toJson,
} from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

/**
 * The FileDescriptorSet of every generated proto (Sextant's, Istio's and the
 * Envoy closure, with their imports), written by scripts/generate.mjs. It is
 * read from the package root so that the same path works from src/ and dist/.
 */
export function readDescriptorSet(): Uint8Array {
  return readFileSync(new URL("../descriptors/sextant.binpb", import.meta.url));
}

let registry: FileRegistry | undefined;

/** A type registry of every message in {@link readDescriptorSet}, built once. */
function descriptorRegistry(): FileRegistry {
  registry ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, readDescriptorSet()));
  return registry;
}

function schemaOf(typeName: string): DescMessage {
  const schema = descriptorRegistry().getMessage(typeName);
  if (!schema) throw new Error(`unknown message type ${typeName}`);
  return schema;
}

/** True if the descriptor set has the message `typeName` (e.g. an Any's type). */
export function knowsMessage(typeName: string): boolean {
  return descriptorRegistry().getMessage(typeName) !== undefined;
}

/**
 * Proto3 JSON to binary for any generated message, Anys resolved by their
 * `@type` against the descriptor set (proto field names and JSON names are
 * both accepted). Throws on a value that does not decode: an unknown field
 * (unless `ignoreUnknownFields`), a wrong JSON type, an Any of an unknown type.
 */
export function messageFromJson(
  typeName: string,
  json: unknown,
  options: { ignoreUnknownFields?: boolean } = {},
): Uint8Array {
  const schema = schemaOf(typeName);
  const message = fromJson(schema, json as JsonValue, {
    registry: descriptorRegistry(),
    ignoreUnknownFields: options.ignoreUnknownFields ?? false,
  });
  return toBinary(schema, message);
}

/** Binary to proto3 JSON (JSON names, every Any expanded with its `@type`). */
export function messageToJson(typeName: string, bytes: Uint8Array): Record<string, unknown> {
  const schema = schemaOf(typeName);
  return toJson(schema, fromBinary(schema, bytes), { registry: descriptorRegistry() }) as Record<
    string,
    unknown
  >;
}
