// The CustomResourceDefinitions of the Istio kinds Sextant supports, built
// from Sextant's own protobuf descriptors: the schema the API server checks
// is the schema ingest and the webhook decode with. scripts/generate-crds.ts
// writes them to deploy/crds/.

// The schema registry @sextant/validation decodes with (its "./schema"
// export), so that the CRDs are not built from a second copy of it.
import { FieldDescriptorProto_Type as FieldType } from "@sextant/proto/gen/google/protobuf/descriptor";
import {
  apiKindOf,
  EXTENSIONS_GROUP,
  GATEWAY_API_GROUP,
  KINDS,
  type KindInfo,
  NETWORKING_GROUP,
  openApiSchema,
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

/** The directory under deploy/crds/ of the Gateway API's CRDs: a kustomization of its own, installed by choice. */
export const GATEWAY_API_DIR = "gateway-api";

/** The file deploy/crds/ holds a kind's CRD in (the Gateway API's under gateway-api/). */
export const crdFileName = (info: KindInfo): string =>
  info.group === GATEWAY_API_GROUP
    ? `${GATEWAY_API_DIR}/${info.group}_${info.plural}.yaml`
    : `${info.group}_${crdPlural(info.kind)}.yaml`;

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

/** The Gateway API release whose schemas @sextant/validation's shapes follow (Istio 1.30.3's go.mod). */
export const GATEWAY_API_BUNDLE_VERSION = "v1.5.1";

/** Short names, printer columns and channel of each Gateway API kind, as its v1.5.1 CRDs give them. */
const GATEWAY_API_PRESENTATION: Readonly<
  Record<
    string,
    { shortNames: string[]; columns: PrinterColumn[]; experimental?: boolean; noStatus?: boolean }
  >
> = {
  GatewayClass: {
    shortNames: ["gc"],
    columns: [
      { name: "Controller", type: "string", jsonPath: ".spec.controllerName", description: "The controller" },
      {
        name: "Accepted",
        type: "string",
        jsonPath: '.status.conditions[?(@.type=="Accepted")].status',
        description: "Whether the controller accepted the class",
      },
    ],
  },
  KubernetesGateway: {
    shortNames: ["gtw"],
    columns: [
      { name: "Class", type: "string", jsonPath: ".spec.gatewayClassName", description: "The GatewayClass" },
      {
        name: "Address",
        type: "string",
        jsonPath: ".status.addresses[*].value",
        description: "The addresses",
      },
      {
        name: "Programmed",
        type: "string",
        jsonPath: '.status.conditions[?(@.type=="Programmed")].status',
        description: "Whether the Gateway is programmed",
      },
    ],
  },
  HTTPRoute: {
    shortNames: [],
    columns: [
      { name: "Hostnames", type: "string", jsonPath: ".spec.hostnames", description: "The hostnames" },
    ],
  },
  GRPCRoute: {
    shortNames: [],
    columns: [
      { name: "Hostnames", type: "string", jsonPath: ".spec.hostnames", description: "The hostnames" },
    ],
  },
  TLSRoute: { shortNames: [], columns: [] },
  TCPRoute: { shortNames: [], columns: [], experimental: true },
  // ReferenceGrant has no status: it is read, never reported on.
  ReferenceGrant: { shortNames: ["refgrant"], columns: [], noStatus: true },
  BackendTLSPolicy: { shortNames: ["btlspolicy"], columns: [] },
};

/** Stored at another version than its newest: ReferenceGrant, as upstream stores it. */
const GATEWAY_API_STORAGE: Readonly<Record<string, string>> = { ReferenceGrant: "v1beta1" };

/**
 * The CRD of a Gateway API kind, its schema built from @sextant/validation's
 * shape of the kind (the one ingest checks): every version served, one
 * schema for all. The CEL rules are not in it: @sextant/validation checks
 * them (ingest, and the webhook if it is configured for the group).
 */
export function gatewayApiCustomResourceDefinition(info: KindInfo) {
  const presentation = GATEWAY_API_PRESENTATION[info.kind];
  if (!presentation || !info.shape) throw new Error(`${info.kind} is not a Gateway API kind`);
  const storage = GATEWAY_API_STORAGE[info.kind] ?? info.versions[0];
  const schema = {
    openAPIV3Schema: {
      type: "object",
      properties: {
        spec: openApiSchema(info.shape),
        ...(presentation.noStatus
          ? {}
          : { status: { type: "object", "x-kubernetes-preserve-unknown-fields": true } }),
      },
      required: ["spec"],
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
  const kind = apiKindOf(info);
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: `${info.plural}.${info.group}`,
      annotations: {
        "gateway.networking.k8s.io/bundle-version": GATEWAY_API_BUNDLE_VERSION,
        "gateway.networking.k8s.io/channel": presentation.experimental ? "experimental" : "standard",
      },
      labels: { "app.kubernetes.io/part-of": "sextant", "app.kubernetes.io/component": "crds" },
    },
    spec: {
      group: info.group,
      names: {
        kind,
        listKind: `${kind}List`,
        plural: info.plural,
        singular: kind.toLowerCase(),
        ...(presentation.shortNames.length > 0 ? { shortNames: presentation.shortNames } : {}),
        categories: ["gateway-api"],
      },
      scope: info.clusterScoped ? "Cluster" : "Namespaced",
      versions: info.versions.map((name) => ({
        name,
        served: true,
        storage: name === storage,
        schema,
        ...(presentation.noStatus ? {} : { subresources: { status: {} } }),
        additionalPrinterColumns: columns,
      })),
    },
  };
}

const HEADER =
  "# Generated by deploy/scripts/generate-crds.ts from Sextant's protobuf descriptors; do not edit.\n";
const GATEWAY_API_HEADER =
  "# Generated by deploy/scripts/generate-crds.ts from @sextant/validation's Gateway API shapes; do not edit.\n";

/**
 * Every file of deploy/crds/, by name: one CRD per supported kind (KINDS of
 * @sextant/validation) and the kustomization that lists them.
 */
export function renderCrdFiles(registry: SchemaRegistry = schemaRegistry()): Map<string, string> {
  const files = new Map<string, string>();
  const all = [...KINDS.values()].sort((a, b) => crdFileName(a).localeCompare(crdFileName(b)));
  const kinds = all.filter((info) => info.group !== GATEWAY_API_GROUP);
  const gatewayApi = all.filter((info) => info.group === GATEWAY_API_GROUP);
  for (const info of gatewayApi) {
    files.set(
      crdFileName(info),
      GATEWAY_API_HEADER +
        stringify(gatewayApiCustomResourceDefinition(info), { lineWidth: 0, aliasDuplicateObjects: false }),
    );
  }
  // Installed by choice (a cluster may have the Gateway API already): an overlay lists ../../crds/gateway-api.
  files.set(
    `${GATEWAY_API_DIR}/kustomization.yaml`,
    GATEWAY_API_HEADER +
      stringify({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        resources: gatewayApi.map((info) => crdFileName(info).slice(GATEWAY_API_DIR.length + 1)),
      }),
  );
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
