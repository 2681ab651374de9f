// The CustomResourceDefinitions of the Istio kinds Sextant supports, built
// from Sextant's own protobuf descriptors: the schema the API server checks
// is the schema ingest and the webhook decode with. scripts/generate-crds.ts
// writes them to deploy/crds/.

// The schema registry @sextant/validation decodes with (its "./schema"
// export), so that the CRDs are not built from a second copy of it.
import { FieldDescriptorProto_Type as FieldType } from "@sextant/proto/gen/google/protobuf/descriptor";
import {
  EXTENSIONS_GROUP,
  KINDS,
  type KindInfo,
  NETWORKING_GROUP,
  SECURITY_GROUP,
  TELEMETRY_GROUP,
} from "@sextant/validation";
import {
  type FieldSchema,
  type MessageSchema,
  type SchemaRegistry,
  schemaRegistry,
  type ValueShape,
} from "@sextant/validation/schema";
import { stringify } from "yaml";

/** A JSON schema node (OpenAPI v3, as Kubernetes reads it). */
export type JsonSchema = { [keyword: string]: unknown };

/**
 * The version each API group stores its objects as. Istio's CRDs serve every
 * version from one schema and store networking kinds as v1alpha3 and security
 * kinds as v1beta1 (the `+cue-gen:<Kind>:storageVersion` tag sits on the
 * message in istio/api's networking/v1alpha3 and security/v1beta1 protos).
 */
export const STORAGE_VERSIONS: Readonly<Record<string, string>> = {
  [NETWORKING_GROUP]: "v1alpha3",
  [SECURITY_GROUP]: "v1beta1",
  [EXTENSIONS_GROUP]: "v1alpha1",
  // Telemetry is stored as v1alpha1 (istio/api telemetry/v1alpha1).
  [TELEMETRY_GROUP]: "v1alpha1",
};

/** What `kubectl get` shows beyond Age, per kind, as Istio's CRDs print it. */
interface PrinterColumn {
  readonly name: string;
  readonly type: "string" | "date";
  readonly jsonPath: string;
  readonly description: string;
}

/** Istio's short names and extra printer columns, by kind. */
const PRESENTATION: Readonly<Record<string, { shortNames: string[]; columns: PrinterColumn[] }>> = {
  VirtualService: {
    shortNames: ["vs"],
    columns: [
      {
        name: "Gateways",
        type: "string",
        jsonPath: ".spec.gateways",
        description: "The names of gateways and sidecars that should apply these routes",
      },
      {
        name: "Hosts",
        type: "string",
        jsonPath: ".spec.hosts",
        description: "The destination hosts to which traffic is being sent",
      },
    ],
  },
  DestinationRule: {
    shortNames: ["dr"],
    columns: [
      {
        name: "Host",
        type: "string",
        jsonPath: ".spec.host",
        description: "The name of a service from the service registry",
      },
    ],
  },
  Gateway: { shortNames: ["gw"], columns: [] },
  ProxyConfig: { shortNames: [], columns: [] },
  ServiceEntry: {
    shortNames: ["se"],
    columns: [
      {
        name: "Hosts",
        type: "string",
        jsonPath: ".spec.hosts",
        description: "The hosts associated with the ServiceEntry",
      },
      {
        name: "Location",
        type: "string",
        jsonPath: ".spec.location",
        description:
          "Whether the service is external to the mesh or part of the mesh (MESH_EXTERNAL or MESH_INTERNAL)",
      },
      {
        name: "Resolution",
        type: "string",
        jsonPath: ".spec.resolution",
        description: "Service resolution mode for the hosts (NONE, STATIC, or DNS)",
      },
    ],
  },
  WorkloadEntry: {
    shortNames: ["we"],
    columns: [
      {
        name: "Address",
        type: "string",
        jsonPath: ".spec.address",
        description: "Address associated with the network endpoint",
      },
    ],
  },
  WorkloadGroup: { shortNames: ["wg"], columns: [] },
  Sidecar: { shortNames: [], columns: [] },
  EnvoyFilter: { shortNames: [], columns: [] },
  PeerAuthentication: {
    shortNames: ["pa"],
    columns: [
      {
        name: "Mode",
        type: "string",
        jsonPath: ".spec.mtls.mode",
        description: "Defines the mTLS mode used for peer authentication",
      },
    ],
  },
  AuthorizationPolicy: {
    shortNames: ["ap"],
    columns: [
      {
        name: "Action",
        type: "string",
        jsonPath: ".spec.action",
        description: "The operation to take",
      },
    ],
  },
  RequestAuthentication: { shortNames: ["ra"], columns: [] },
  WasmPlugin: { shortNames: [], columns: [] },
  Telemetry: { shortNames: ["telemetry"], columns: [] },
};

/** The resource (plural) name of a kind, as Istio names its CRDs: `serviceentries`, `gateways`. */
export function crdPlural(kind: string): string {
  const lower = kind.toLowerCase();
  // A consonant before the final y: -ies (policies, entries); a vowel: -ys (gateways).
  return /[^aeiou]y$/.test(lower) ? `${lower.slice(0, -1)}ies` : `${lower}s`;
}

/** The file deploy/crds/ holds a kind's CRD in. */
export const crdFileName = (info: KindInfo): string => `${info.group}_${crdPlural(info.kind)}.yaml`;

/** How proto JSON writes each well-known type, as Istio's CRDs give it. */
function wellKnownSchema(typeName: string): JsonSchema | undefined {
  switch (typeName) {
    case "google.protobuf.Duration":
      return { type: "string" };
    case "google.protobuf.Timestamp":
      return { type: "string", format: "date-time" };
    case "google.protobuf.Struct":
      return { type: "object", "x-kubernetes-preserve-unknown-fields": true };
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      // Any JSON value: no type, kept as written.
      return { "x-kubernetes-preserve-unknown-fields": true };
    case "google.protobuf.Empty":
      return { type: "object" };
  }
  const wrapped = WRAPPERS[typeName];
  // A wrapper is its scalar, or null for "not set".
  return wrapped === undefined ? undefined : { ...scalarSchema(wrapped), nullable: true };
}

const WRAPPERS: Readonly<Record<string, FieldType>> = {
  "google.protobuf.DoubleValue": FieldType.TYPE_DOUBLE,
  "google.protobuf.FloatValue": FieldType.TYPE_FLOAT,
  "google.protobuf.Int64Value": FieldType.TYPE_INT64,
  "google.protobuf.UInt64Value": FieldType.TYPE_UINT64,
  "google.protobuf.Int32Value": FieldType.TYPE_INT32,
  "google.protobuf.UInt32Value": FieldType.TYPE_UINT32,
  "google.protobuf.BoolValue": FieldType.TYPE_BOOL,
  "google.protobuf.StringValue": FieldType.TYPE_STRING,
  "google.protobuf.BytesValue": FieldType.TYPE_BYTES,
};

/** A scalar field's schema; ranges as @sextant/validation checks them. */
function scalarSchema(type: FieldType): JsonSchema {
  switch (type) {
    case FieldType.TYPE_STRING:
      return { type: "string" };
    case FieldType.TYPE_BOOL:
      return { type: "boolean" };
    case FieldType.TYPE_BYTES:
      return { type: "string", format: "byte" };
    case FieldType.TYPE_DOUBLE:
      return { type: "number", format: "double" };
    case FieldType.TYPE_FLOAT:
      return { type: "number", format: "float" };
    case FieldType.TYPE_INT32:
    case FieldType.TYPE_SINT32:
    case FieldType.TYPE_SFIXED32:
      return { type: "integer", format: "int32" };
    case FieldType.TYPE_UINT32:
    case FieldType.TYPE_FIXED32:
      return { type: "integer", minimum: 0, maximum: 4294967295 };
    case FieldType.TYPE_INT64:
    case FieldType.TYPE_UINT64:
    case FieldType.TYPE_SINT64:
    case FieldType.TYPE_FIXED64:
    case FieldType.TYPE_SFIXED64:
      // Proto JSON writes 64-bit integers as strings, and people write numbers: both are accepted.
      return { "x-kubernetes-int-or-string": true, anyOf: [{ type: "integer" }, { type: "string" }] };
    default:
      throw new Error(`no CRD schema for protobuf scalar type ${type}`);
  }
}

/**
 * The OpenAPI v3 schema of a message, from the schema registry: JSON
 * (lowerCamel) field names, enums by name, maps as objects, and each oneof
 * as Istio's CRDs state it (at most one member set). It is structural, as
 * apiextensions.k8s.io/v1 requires. A recursive message fails: Istio's
 * config kinds have none, and a structural schema cannot express one.
 */
export function messageSchema(typeName: string, registry: SchemaRegistry = schemaRegistry()): JsonSchema {
  return new SchemaBuilder(registry).message(typeName, []);
}

class SchemaBuilder {
  constructor(private readonly registry: SchemaRegistry) {}

  message(typeName: string, path: readonly string[]): JsonSchema {
    const known = wellKnownSchema(typeName);
    if (known) return known;
    if (path.includes(typeName)) {
      throw new Error(
        `${typeName} is recursive (${[...path, typeName].join(" > ")}); a CRD cannot describe it`,
      );
    }
    const schema = this.registry.message(typeName);
    if (!schema) throw new Error(`no descriptor for ${typeName}`);
    const properties: JsonSchema = {};
    for (const field of schema.fields) properties[field.jsonName] = this.field(field, [...path, typeName]);
    return { type: "object", properties, ...oneofConstraints(schema) };
  }

  private field(field: FieldSchema, path: readonly string[]): JsonSchema {
    const single = this.single(field.value, path);
    if (field.mapKey !== undefined) return { type: "object", additionalProperties: single };
    if (field.repeated) return { type: "array", items: single };
    return single;
  }

  private single(shape: ValueShape, path: readonly string[]): JsonSchema {
    switch (shape.kind) {
      case "scalar":
        return scalarSchema(shape.type);
      case "enum": {
        const values = this.registry.enumType(shape.typeName);
        if (!values) throw new Error(`no descriptor for enum ${shape.typeName}`);
        return { type: "string", enum: values.names };
      }
      case "message":
        return this.message(shape.typeName, path);
    }
  }
}

/**
 * Istio's way of saying "at most one of these fields": either none is set,
 * or exactly one `required` alternative holds. Several oneofs go under allOf.
 */
function oneofConstraints(schema: MessageSchema): JsonSchema {
  const groups = new Map<string, string[]>();
  for (const field of schema.fields) {
    if (field.oneof === undefined) continue;
    groups.set(field.oneof, [...(groups.get(field.oneof) ?? []), field.jsonName]);
  }
  const constraints = [...groups.values()]
    .filter((members) => members.length > 1)
    .map((members) => ({
      oneOf: [
        { not: { anyOf: members.map((name) => ({ required: [name] })) } },
        ...members.map((name) => ({ required: [name] })),
      ],
    }));
  if (constraints.length === 0) return {};
  if (constraints.length === 1) return constraints[0] as JsonSchema;
  return { allOf: constraints };
}

/** The CustomResourceDefinition of one kind: every version Istio serves, one schema for all. */
export function customResourceDefinition(info: KindInfo, registry: SchemaRegistry = schemaRegistry()) {
  // A kind served in one version only (ProxyConfig: v1beta1) stores that one.
  const storage = info.versions.length === 1 ? info.versions[0] : STORAGE_VERSIONS[info.group];
  if (!storage || !info.versions.includes(storage)) {
    throw new Error(`no storage version for ${info.group} among ${info.versions.join(", ")}`);
  }
  const presentation = PRESENTATION[info.kind];
  if (!presentation) throw new Error(`no short names or printer columns for ${info.kind}`);
  const plural = crdPlural(info.kind);
  const schema = {
    openAPIV3Schema: {
      type: "object",
      properties: {
        spec: messageSchema(info.typeName, registry),
        // Ingest writes Istio's status shape (observedGeneration,
        // validationMessages) plus its own message text; kept as written.
        status: { type: "object", "x-kubernetes-preserve-unknown-fields": true },
      },
    },
  };
  const columns = [
    ...presentation.columns,
    {
      name: "Age",
      type: "date",
      jsonPath: ".metadata.creationTimestamp",
      description: "When the object was created",
    },
  ];
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${plural}.${info.group}`,
      labels: { "app.kubernetes.io/part-of": "sextant", "app.kubernetes.io/component": "crds" },
    },
    spec: {
      group: info.group,
      names: {
        kind: info.kind,
        listKind: `${info.kind}List`,
        plural,
        singular: info.kind.toLowerCase(),
        ...(presentation.shortNames.length > 0 ? { shortNames: presentation.shortNames } : {}),
        categories: ["istio-io", `${info.group.replaceAll(".", "-")}`],
      },
      scope: "Namespaced",
      versions: info.versions.map((name) => ({
        name,
        served: true,
        storage: name === storage,
        schema,
        subresources: { status: {} },
        additionalPrinterColumns: columns,
      })),
    },
  };
}

const HEADER =
  "# Generated by deploy/scripts/generate-crds.ts from Sextant's protobuf descriptors; do not edit.\n";

/**
 * Every file of deploy/crds/, by name: one CRD per supported kind (KINDS of
 * @sextant/validation) and the kustomization that lists them.
 */
export function renderCrdFiles(registry: SchemaRegistry = schemaRegistry()): Map<string, string> {
  const files = new Map<string, string>();
  const kinds = [...KINDS.values()].sort((a, b) => crdFileName(a).localeCompare(crdFileName(b)));
  for (const info of kinds) {
    files.set(
      crdFileName(info),
      HEADER +
        stringify(customResourceDefinition(info, registry), { lineWidth: 0, aliasDuplicateObjects: false }),
    );
  }
  files.set(
    "kustomization.yaml",
    HEADER +
      stringify({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        resources: kinds.map(crdFileName),
      }),
  );
  return files;
}
