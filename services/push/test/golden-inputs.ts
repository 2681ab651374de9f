// What the golden harnesses share: a case's input as a PushContext, and
// generated Anys as the JSON the .out.yaml files hold.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Any, EndpointShard, Service } from "@sextant/proto";
import { DownstreamTlsContext, HttpRBAC, TypeUrl, UpstreamTlsContext } from "@sextant/proto/envoy";
import { bookinfoNetworkingDir } from "@sextant/testing";
import { findKindOf, parseDocuments } from "@sextant/validation";
import { parseMeshConfig } from "../src/model/mesh-config.js";
import { PushContext } from "../src/model/push-context.js";
import { configDumpDecoder } from "../src/server/debug.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { messageFiles } from "./envoy-validate.js";
import { storedConfig } from "./stored-config.js";

/** A golden case's input: the proxy asking, the registry, the config and what the proxy subscribes to. */
export interface GoldenInput {
  /** The proxy asking: its namespace, labels, address and service account (Istio's node metadata). */
  proxy?: { namespace?: string; labels?: Record<string, string>; ip?: string; serviceAccount?: string };
  services: Array<Record<string, unknown>>;
  endpoints?: Array<{ hostname: string; endpoints: Array<Record<string, unknown>> }>;
  config?: string;
  /** The SPIFFE trust domain push is configured with (default cluster.local). */
  trustDomain?: string;
  /** Istio's MeshConfig YAML push is configured with (MESH_CONFIG_FILE), if any. */
  meshConfig?: string;
  subscribe: Partial<Record<"listeners" | "routes" | "clusters" | "endpoints", string[]>>;
}

/** The four xDS types of a golden case, by the name its output files use. */
export const TYPES = {
  listeners: TypeUrl.Listener,
  routes: TypeUrl.RouteConfiguration,
  clusters: TypeUrl.Cluster,
  endpoints: TypeUrl.ClusterLoadAssignment,
} as const;

/** The name of an xDS type in golden files. */
export type GoldenType = keyof typeof TYPES;

/** Builds the snapshot a golden case describes: config as ingest stores it, the registry as discovery writes it. */
export function contextOf(input: Omit<GoldenInput, "subscribe" | "proxy">): PushContext {
  const documents = parseDocuments(input.config ?? "", { maxDocuments: 100 }).documents.map(({ value }) => {
    const document = value as {
      kind: string;
      apiVersion: string;
      metadata: { name: string; namespace?: string; annotations?: Record<string, string> };
      spec: unknown;
    };
    return {
      // The Gateway API's Gateway is stored as KubernetesGateway.
      kind: findKindOf(document.apiVersion, document.kind)?.kind ?? document.kind,
      apiVersion: document.apiVersion,
      name: document.metadata.name,
      namespace: document.metadata.namespace,
      annotations: document.metadata.annotations,
      spec: document.spec,
    };
  });
  const config = storedConfig(documents);
  const services = new Map(input.services.map((s) => [String(s.hostname), Service.fromJSON(s)]));
  const shards = new Map(
    (input.endpoints ?? []).map((shard) => [
      shard.hostname,
      {
        hostname: shard.hostname,
        endpoints: EndpointShard.fromJSON({
          endpoints: shard.endpoints.map((e) => ({ health: "HEALTH_STATUS_HEALTHY", ...e })),
        }).endpoints,
      },
    ]),
  );
  return PushContext.build({
    config,
    services,
    endpointShards: shards,
    domainSuffix: "cluster.local",
    ...(input.trustDomain ? { trustDomain: input.trustDomain } : {}),
    ...(input.meshConfig ? { meshConfig: parseMeshConfig(input.meshConfig) } : {}),
  });
}

/** Anys as /debug/config_dump shows them. */
const anyToJson = configDumpDecoder(XDS_TYPES);

/** A ts-proto message codec, as far as dumping needs it. */
export interface Codec {
  decode(bytes: Uint8Array): unknown;
  toJSON(message: never): unknown;
}

/** The nested Anys the proxyless goldens decode (server listeners' RBAC and TLS contexts). */
export const GRPC_NESTED: Readonly<Record<string, Codec>> = {
  [TypeUrl.RBAC]: HttpRBAC,
  [TypeUrl.DownstreamTlsContext]: DownstreamTlsContext,
  [TypeUrl.UpstreamTlsContext]: UpstreamTlsContext,
};

/**
 * An Any as JSON, as /debug/config_dump shows it, with the nested Anys that
 * `nested` knows decoded too (an unknown one stays `{typeUrl, value}` in base64).
 * With `emptyAnys`, a known nested Any with no bytes (a Router, a listener
 * filter) is shown as `{"@type": …}` too; the proxyless goldens keep it as
 * `{typeUrl}`.
 */
export function dumpAny(
  any: Any,
  nested: Readonly<Record<string, Codec>> = GRPC_NESTED,
  { emptyAnys = false } = {},
): unknown {
  const expand = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(expand);
    if (value === null || typeof value !== "object") return value;
    const object = value as Record<string, unknown>;
    const codec = typeof object.typeUrl === "string" ? nested[object.typeUrl] : undefined;
    const bytes =
      typeof object.value === "string"
        ? object.value
        : emptyAnys && object.value === undefined
          ? ""
          : undefined;
    if (codec && bytes !== undefined) {
      const decoded = codec.toJSON(codec.decode(Buffer.from(bytes, "base64")) as never);
      return { "@type": object.typeUrl, ...(expand(decoded) as object) };
    }
    return Object.fromEntries(Object.entries(object).map(([key, inner]) => [key, expand(inner)]));
  };
  return expand(anyToJson(any));
}

/**
 * Violations of Envoy's validate rules that proxyless gRPC resources are
 * allowed: grpc-js-xds does not enforce protoc-gen-validate, and these are
 * what the proxyless generators send today (and, for the last, the only
 * form gRPC's certificate providers have). Each is a finding for Envoy, not
 * for gRPC; the Envoy sidecar goldens accept none.
 */
export const GRPC_ACCEPTED_VIOLATIONS: readonly RegExp[] = [
  // Roots come from gRPC's certificate provider instance, not from SDS, as in istiod's grpcgen:
  // the combined validation context's SDS config, required by Envoy's rules, has no meaning for gRPC.
  /combined_validation_context\.validation_context_sds_secret_config: required$/,
];

/** The violations of a proxyless gRPC resource that are not in {@link GRPC_ACCEPTED_VIOLATIONS}. */
export const unacceptedGrpcViolations = (violations: readonly string[]): string[] =>
  violations.filter((v) => !GRPC_ACCEPTED_VIOLATIONS.some((accepted) => accepted.test(v)));

let allCodecs: Promise<Readonly<Record<string, Codec>>> | undefined;

/**
 * A codec for every Envoy message @sextant/proto generates, by type URL, so
 * that every nested Any of a sidecar resource is dumped as JSON. ts-proto
 * names a nested message `Outer_Inner` in its file's module.
 */
export function envoyCodecs(): Promise<Readonly<Record<string, Codec>>> {
  allCodecs ??= (async () => {
    const byFile = new Map<string, string[]>();
    for (const [fullName, file] of messageFiles()) {
      if (!file.startsWith("envoy/")) continue;
      byFile.set(file, [...(byFile.get(file) ?? []), fullName]);
    }
    const codecs: Record<string, Codec> = {};
    for (const [file, names] of byFile) {
      const module = (await import(`@sextant/proto/gen/${file.replace(/\.proto$/, "")}`)) as Record<
        string,
        unknown
      >;
      const pkg = names
        .reduce((a, b) => (a.length <= b.length ? a : b))
        .split(".")
        .slice(0, -1)
        .join(".");
      for (const fullName of names) {
        const exported = module[fullName.slice(pkg.length + 1).replaceAll(".", "_")] as Codec | undefined;
        if (typeof exported?.decode === "function" && typeof exported.toJSON === "function")
          codecs[`type.googleapis.com/${fullName}`] = exported;
      }
    }
    return codecs;
  })();
  return allCodecs;
}

/** A golden case's config: the Bookinfo samples it names (Istio's files, unchanged), then its own YAML. */
export function caseConfig(testCase: { bookinfo?: string[]; config?: string }): string {
  const samples = (testCase.bookinfo ?? []).map((file) =>
    readFileSync(join(bookinfoNetworkingDir(), file), "utf8"),
  );
  return [...samples, testCase.config ?? ""].filter((text) => text.trim()).join("\n---\n");
}

/** Every string value under `key` anywhere in a JSON tree. */
export function collectStrings(value: unknown, key: string, out: string[] = []): string[] {
  if (Array.isArray(value)) for (const item of value) collectStrings(item, key, out);
  else if (value && typeof value === "object") {
    for (const [k, inner] of Object.entries(value)) {
      if (k === key && typeof inner === "string") out.push(inner);
      else collectStrings(inner, key, out);
    }
  }
  return out;
}
