// analyze -f: ingest's validation and cross-resource analyzers run here on
// files, with no server. Kubernetes objects in the files stand in for the
// registry, as istioctl analyze reads them from files: Services give hosts,
// workloads (Pods and the controllers' pod templates) give the labels Gateway
// selectors pick, Secrets say which credentialNames exist.
import {
  type AnalysisWorkload,
  analyze,
  levelName,
  prepareDocuments,
  type SecretPresence,
} from "@sextant/ingest/analysis";
import { configKey, credentialKey } from "@sextant/model";
import type { ConfigResource } from "@sextant/proto";
import { DEFAULT_PARSE_LIMITS, KINDS } from "@sextant/validation";
import type { Finding } from "./findings.js";
import type { ManifestDocument } from "./manifests.js";

/** Istio's code for a resource its schema validation refuses (msg.SchemaValidationError). */
const SCHEMA_VALIDATION_ERROR = "IST0106";

/** Kubernetes kinds whose pods are workloads; the pod template is at spec.template (CronJob: spec.jobTemplate.spec.template). */
const WORKLOAD_KINDS = new Set([
  "Deployment",
  "StatefulSet",
  "DaemonSet",
  "ReplicaSet",
  "Job",
  "CronJob",
  "Pod",
]);

type Json = Record<string, unknown> & {
  kind?: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects from files, read defensively.
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
};

/** Validates and analyses the documents of the files, as ingest would once they were applied. */
export function analyzeFiles(documents: readonly ManifestDocument[], domainSuffix: string): Finding[] {
  const findings: Finding[] = [];
  const resources: ConfigResource[] = [];
  const origins = new Map<string, ManifestDocument>();
  const registryHosts = new Set<string>();
  const workloads: AnalysisWorkload[] = [];
  const credentials = new Map<string, SecretPresence>();

  for (const document of documents) {
    const object = (
      typeof document.value === "object" && document.value !== null ? document.value : {}
    ) as Json;
    const namespace = object.metadata?.namespace || "default";
    const name = object.metadata?.name ?? "";
    if (object.kind && KINDS.has(object.kind)) {
      const prepared = prepareDocuments(document.text, { ...DEFAULT_PARSE_LIMITS, maxDocuments: 1 });
      for (const error of prepared.errors)
        findings.push({
          level: "Error",
          code: SCHEMA_VALIDATION_ERROR,
          kind: object.kind,
          namespace,
          name,
          origin: originOf(document, error.path),
          message: `Schema validation error: ${error.path ? `${error.path}: ` : ""}${error.message}`,
        });
      for (const { resource, warnings } of prepared.resources) {
        resources.push(resource);
        origins.set(configKey(resource), document);
        for (const warning of warnings)
          findings.push({
            level: "Warning",
            code: SCHEMA_VALIDATION_ERROR,
            kind: resource.kind,
            namespace,
            name,
            origin: originOf(document, warning.path),
            message: `Schema validation warning: ${warning.path ? `${warning.path}: ` : ""}${warning.message}`,
          });
      }
    } else if (object.kind === "Service" && name) {
      registryHosts.add(`${name}.${namespace}.svc.${domainSuffix}`);
    } else if (object.kind && WORKLOAD_KINDS.has(object.kind)) {
      const template =
        object.kind === "Pod"
          ? object
          : object.kind === "CronJob"
            ? object.spec?.jobTemplate?.spec?.template
            : object.spec?.template;
      workloads.push({ namespace, labels: template?.metadata?.labels ?? {} });
    } else if (object.kind === "Secret" && name) {
      credentials.set(credentialKey({ namespace, name }), secretPresence(object));
    }
  }

  const result = analyze({ resources, registryHosts, workloads, credentials, domainSuffix });
  for (const resource of resources)
    for (const message of result.get(configKey(resource)) ?? [])
      findings.push({
        origin: originOf(origins.get(configKey(resource))!, message.field),
        level: levelName(message.severity),
        code: message.code,
        kind: resource.kind,
        namespace: resource.namespace,
        name: resource.name,
        message: message.message,
      });
  return findings;
}

/**
 * Where a message points, as istioctl prints it: the file and the line of the
 * field when the document has it, else of the document; JSON files without a
 * line (istioctl does not count JSON lines either).
 */
function originOf(document: ManifestDocument, field: string): string {
  if (/\.json$/i.test(document.file)) return document.file;
  return `${document.file}:${(field && document.lineOf(field)) || document.line}`;
}

/** Which parts a Secret holds, by the data keys istiod reads (a generic Secret's first, then kubernetes.io/tls's). */
function secretPresence(secret: Json): SecretPresence {
  const has = (key: string) => Boolean(secret.data?.[key] || secret.stringData?.[key]);
  return {
    hasCertificate: (has("cert") && has("key")) || (has("tls.crt") && has("tls.key")),
    hasCaCertificate: has("cacert") || has("ca.crt"),
  };
}
