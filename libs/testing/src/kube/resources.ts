import type { KubeObject, ResourceDefinition } from "./types.js";

/** How `metadata.name` is validated: DNS-1123 subdomain, DNS-1123 label, or DNS-1035 label. */
export type NameRule = "subdomain" | "label" | "label1035";

/** A served resource type with the per-type behaviour the API server's registry strategies encode. */
export interface ResourceType {
  group: string;
  versions: string[];
  kind: string;
  plural: string;
  singular: string;
  listKind: string;
  namespaced: boolean;
  shortNames: string[];
  /** Served by a CRD rather than compiled into the API server. */
  custom: boolean;
  statusSubresource: boolean;
  /** PUT of a missing object creates it (true for Services and Endpoints). */
  allowCreateOnUpdate: boolean;
  /** PUT without metadata.resourceVersion is allowed (false for custom resources). */
  allowUnconditionalUpdate: boolean;
  /** Field labels accepted by `fieldSelector`. */
  fieldLabels: ReadonlySet<string>;
  nameRule: NameRule;
  /** DELETE answers with the deleted object rather than a `Status` of Success (Pods, Services, ServiceAccounts). */
  returnDeletedObject: boolean;
  /** Resets server-owned parts of a new object (e.g. a Pod's status) before it is stored. */
  prepareForCreate?: (obj: KubeObject) => void;
  /** Carries over parts of the old object that a main-resource update must not change. */
  prepareForUpdate?: (next: KubeObject, old: KubeObject) => void;
}

const commonFieldLabels = ["metadata.name", "metadata.namespace"];

function fieldLabels(extra: string[] = []): ReadonlySet<string> {
  return new Set([...commonFieldLabels, ...extra]);
}

/** Normalizes a custom resource definition into a served type. */
export function customResourceType(def: ResourceDefinition): ResourceType {
  if (def.versions.length === 0)
    throw new Error(`resource ${def.plural}.${def.group} needs at least one version`);
  const statusSubresource = Boolean(def.subresources?.status);
  const type: ResourceType = {
    group: def.group,
    versions: [...def.versions],
    kind: def.kind,
    plural: def.plural,
    singular: def.singular ?? def.kind.toLowerCase(),
    listKind: def.listKind ?? `${def.kind}List`,
    namespaced: def.namespaced,
    shortNames: def.shortNames ?? [],
    custom: true,
    statusSubresource,
    allowCreateOnUpdate: false,
    allowUnconditionalUpdate: false,
    fieldLabels: fieldLabels(),
    nameRule: "subdomain",
    returnDeletedObject: false,
  };
  // With the status subresource, the CRD registry drops .status on create.
  if (statusSubresource) type.prepareForCreate = (obj) => void delete obj.status;
  return type;
}

interface BuiltinOptions {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
  shortNames?: string[];
  statusSubresource?: boolean;
  allowCreateOnUpdate?: boolean;
  fieldLabels?: string[];
  nameRule?: NameRule;
  returnDeletedObject?: boolean;
  prepareForCreate?: (obj: KubeObject) => void;
  prepareForUpdate?: (next: KubeObject, old: KubeObject) => void;
}

function builtin(o: BuiltinOptions): ResourceType {
  const type: ResourceType = {
    group: o.group,
    versions: [o.version],
    kind: o.kind,
    plural: o.plural,
    singular: o.kind.toLowerCase(),
    listKind: `${o.kind}List`,
    namespaced: o.namespaced,
    shortNames: o.shortNames ?? [],
    custom: false,
    statusSubresource: o.statusSubresource ?? false,
    allowCreateOnUpdate: o.allowCreateOnUpdate ?? false,
    allowUnconditionalUpdate: true,
    fieldLabels: fieldLabels(o.fieldLabels),
    nameRule: o.nameRule ?? "subdomain",
    returnDeletedObject: o.returnDeletedObject ?? false,
  };
  if (o.prepareForCreate) type.prepareForCreate = o.prepareForCreate;
  if (o.prepareForUpdate) type.prepareForUpdate = o.prepareForUpdate;
  return type;
}

function record(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

/** The built-in types the fake server always serves. */
export function builtinResourceTypes(): ResourceType[] {
  return [
    builtin({
      group: "",
      version: "v1",
      kind: "Namespace",
      plural: "namespaces",
      namespaced: false,
      shortNames: ["ns"],
      statusSubresource: true,
      fieldLabels: ["status.phase"],
      nameRule: "label",
      prepareForCreate: (obj) => {
        obj.status = { phase: "Active" };
        const spec = record(obj.spec);
        if (!Array.isArray(spec.finalizers)) spec.finalizers = ["kubernetes"];
        obj.spec = spec;
        // Since 1.21 every namespace carries its own name as an immutable label.
        const meta = obj.metadata ?? {};
        meta.labels = { ...(meta.labels ?? {}), "kubernetes.io/metadata.name": meta.name ?? "" };
      },
      prepareForUpdate: (next, old) => {
        // spec.finalizers only changes through the /finalize subresource.
        const spec = record(next.spec);
        const oldSpec = record(old.spec);
        if ("finalizers" in oldSpec) spec.finalizers = oldSpec.finalizers;
        else delete spec.finalizers;
        next.spec = spec;
        const meta = next.metadata ?? {};
        meta.labels = { ...(meta.labels ?? {}), "kubernetes.io/metadata.name": meta.name ?? "" };
      },
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "Service",
      plural: "services",
      namespaced: true,
      shortNames: ["svc"],
      statusSubresource: true,
      allowCreateOnUpdate: true,
      fieldLabels: ["spec.clusterIP", "spec.type"],
      nameRule: "label1035",
      returnDeletedObject: true,
      prepareForCreate: (obj) => {
        obj.status = { loadBalancer: {} };
      },
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "Pod",
      plural: "pods",
      namespaced: true,
      shortNames: ["po"],
      statusSubresource: true,
      returnDeletedObject: true,
      fieldLabels: [
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
      ],
      prepareForCreate: (obj) => {
        obj.status = { phase: "Pending" };
      },
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "Node",
      plural: "nodes",
      namespaced: false,
      shortNames: ["no"],
      statusSubresource: true,
      fieldLabels: ["spec.unschedulable"],
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "Endpoints",
      plural: "endpoints",
      namespaced: true,
      shortNames: ["ep"],
      allowCreateOnUpdate: true,
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "Secret",
      plural: "secrets",
      namespaced: true,
      fieldLabels: ["type"],
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "ConfigMap",
      plural: "configmaps",
      namespaced: true,
      shortNames: ["cm"],
    }),
    builtin({
      group: "",
      version: "v1",
      kind: "ServiceAccount",
      plural: "serviceaccounts",
      namespaced: true,
      shortNames: ["sa"],
      returnDeletedObject: true,
    }),
    builtin({
      group: "apps",
      version: "v1",
      kind: "Deployment",
      plural: "deployments",
      namespaced: true,
      shortNames: ["deploy"],
      statusSubresource: true,
    }),
    builtin({
      group: "discovery.k8s.io",
      version: "v1",
      kind: "EndpointSlice",
      plural: "endpointslices",
      namespaced: true,
    }),
    builtin({
      group: "admissionregistration.k8s.io",
      version: "v1",
      kind: "MutatingWebhookConfiguration",
      plural: "mutatingwebhookconfigurations",
      namespaced: false,
    }),
    builtin({
      group: "admissionregistration.k8s.io",
      version: "v1",
      kind: "ValidatingWebhookConfiguration",
      plural: "validatingwebhookconfigurations",
      namespaced: false,
    }),
  ];
}

/** "v1" for the core group, "group/version" otherwise. */
export function apiVersionOf(group: string, version: string): string {
  return group === "" ? version : `${group}/${version}`;
}

/** Splits an apiVersion into group and version. */
export function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.lastIndexOf("/");
  return slash < 0
    ? { group: "", version: apiVersion }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}
