import { type DurationValue, parseDuration } from "@sextant/validation";

/**
 * The telemetry part of Istio's MeshConfig that push reads: the legacy
 * access log settings, `defaultProviders`, and the extension providers a
 * Telemetry can name for access logs and tracing. Parsed from the same YAML
 * as the ext_authz providers (see ./mesh-config.ts).
 */
export interface TelemetryMeshConfig {
  /** Istio's `accessLogFile`: empty is no access log (Istio's default). */
  readonly accessLogFile: string;
  readonly accessLogEncoding: "TEXT" | "JSON";
  /** `accessLogFormat`: a text format, or a JSON object as text for JSON; empty is Istio's default. */
  readonly accessLogFormat: string;
  /** `disableEnvoyListenerLog`: no access log on listeners themselves (those of connections no chain matched). */
  readonly disableEnvoyListenerLog: boolean;
  /** `defaultProviders`: what applies where no Telemetry names providers. */
  readonly defaultProviders: {
    readonly tracing: readonly string[];
    readonly accessLogging: readonly string[];
    readonly metrics: readonly string[];
  };
  /** `defaultConfig.tracing.sampling` (0 when unset). */
  readonly proxyTracingSampling: number;
  /** Every provider, with Istio's built-in `prometheus`, `stackdriver` and `envoy` unless redefined. */
  readonly providers: readonly TelemetryProvider[];
}

/** An Envoy file access log provider (`envoyFileAccessLog`). */
export interface FileAccessLogProvider {
  readonly name: string;
  readonly type: "envoyFileAccessLog";
  /** Istio's default: /dev/stdout. */
  readonly path: string;
  /** `logFormat`: text, JSON labels, or none (Istio's text format). */
  readonly format: { text: string } | { labels: Record<string, unknown> } | undefined;
  readonly omitEmptyValues: boolean;
}

/** Where a tracer sends spans, and how long its tags may be: what Zipkin and OpenTelemetry providers share. */
interface TracingCollector {
  readonly service: string;
  readonly port: number;
  readonly maxTagLength: number;
}

/** A Zipkin tracer (`zipkin`). */
export interface ZipkinProvider extends TracingCollector {
  readonly name: string;
  readonly type: "zipkin";
  /** The collector's path; Istio's default /api/v2/spans. */
  readonly path: string;
  readonly enable64bitTraceId: boolean;
}

/** An OpenTelemetry tracer (`opentelemetry`), exporting over gRPC or HTTP. */
export interface OpenTelemetryProvider extends TracingCollector {
  readonly name: string;
  readonly type: "opentelemetry";
  readonly grpc: { timeout: DurationValue | undefined };
  readonly http: { path: string; timeout: DurationValue | undefined } | undefined;
  /** Whether a sampler (dynatraceSampler) is set: Istio then samples 100 % and leaves the decision to it. */
  readonly sampler: boolean;
  readonly resourceDetectors: boolean;
}

/** Any provider push does not build (metrics, other tracers, gRPC log services, ext_authz): known by type only. */
export interface OtherProvider {
  readonly name: string;
  /** The provider's field in MeshConfig, e.g. `datadog`, `envoyOtelAls`, `prometheus`. */
  readonly type: string;
}

export type TelemetryProvider =
  | FileAccessLogProvider
  | ZipkinProvider
  | OpenTelemetryProvider
  | OtherProvider;

/** What a MeshConfig without telemetry settings means: Istio's defaults. */
export const DEFAULT_TELEMETRY_MESH_CONFIG: TelemetryMeshConfig = {
  accessLogFile: "",
  accessLogEncoding: "TEXT",
  accessLogFormat: "",
  disableEnvoyListenerLog: false,
  defaultProviders: { tracing: [], accessLogging: [], metrics: [] },
  proxyTracingSampling: 0,
  providers: builtinProviders(),
};

// Istio's DefaultMeshConfig lists these three; a user provider of the same name replaces one.
function builtinProviders(): TelemetryProvider[] {
  return [
    { name: "prometheus", type: "prometheus" },
    { name: "stackdriver", type: "stackdriver" },
    {
      name: "envoy",
      type: "envoyFileAccessLog",
      path: "/dev/stdout",
      format: undefined,
      omitEmptyValues: false,
    },
  ];
}

/** The MeshConfig fields that can name a provider, in the order Istio's ExtensionProvider oneof lists them. */
const PROVIDER_TYPES = [
  "envoyExtAuthzHttp",
  "envoyExtAuthzGrpc",
  "zipkin",
  "lightstep",
  "datadog",
  "stackdriver",
  "opencensus",
  "skywalking",
  "opentelemetry",
  "prometheus",
  "envoyFileAccessLog",
  "envoyHttpAls",
  "envoyTcpAls",
  "envoyOtelAls",
  "sds",
];

/** Reads the telemetry settings from a parsed MeshConfig document; what is malformed is left at its default. */
export function parseTelemetryMeshConfig(document: Record<string, unknown>): TelemetryMeshConfig {
  const providers = builtinProviders();
  const list = Array.isArray(document.extensionProviders) ? document.extensionProviders : [];
  for (const entry of list) {
    if (!isRecord(entry) || typeof entry.name !== "string" || entry.name === "") continue;
    const provider = parseProvider(entry.name, entry);
    if (!provider) continue;
    const existing = providers.findIndex((candidate) => candidate.name === provider.name);
    if (existing >= 0) providers[existing] = provider;
    else providers.push(provider);
  }
  const defaults = isRecord(document.defaultProviders) ? document.defaultProviders : {};
  const tracing = isRecord(document.defaultConfig) ? document.defaultConfig.tracing : undefined;
  const sampling = isRecord(tracing) ? Number(tracing.sampling ?? 0) : 0;
  return {
    accessLogFile: typeof document.accessLogFile === "string" ? document.accessLogFile : "",
    accessLogEncoding: document.accessLogEncoding === "JSON" ? "JSON" : "TEXT",
    accessLogFormat: typeof document.accessLogFormat === "string" ? document.accessLogFormat : "",
    disableEnvoyListenerLog: document.disableEnvoyListenerLog === true,
    defaultProviders: {
      tracing: strings(defaults.tracing),
      accessLogging: strings(defaults.accessLogging),
      metrics: strings(defaults.metrics),
    },
    proxyTracingSampling: Number.isFinite(sampling) ? sampling : 0,
    providers,
  };
}

/** The provider named (case-insensitively, as Istio's fetchProvider looks it up). */
export function findTelemetryProvider(
  mesh: TelemetryMeshConfig,
  name: string,
): TelemetryProvider | undefined {
  const wanted = name.toLowerCase();
  return mesh.providers.find((provider) => provider.name.toLowerCase() === wanted);
}

function parseProvider(name: string, entry: Record<string, unknown>): TelemetryProvider | undefined {
  const type = PROVIDER_TYPES.find((candidate) => entry[candidate] !== undefined);
  if (!type) return undefined;
  const body = isRecord(entry[type]) ? (entry[type] as Record<string, unknown>) : {};
  if (type === "envoyFileAccessLog") {
    const format = isRecord(body.logFormat) ? body.logFormat : undefined;
    return {
      name,
      type,
      path: nonEmptyString(body.path, "/dev/stdout"),
      format:
        format === undefined
          ? undefined
          : isRecord(format.labels)
            ? { labels: format.labels }
            : { text: typeof format.text === "string" ? format.text : "" },
      omitEmptyValues: body.omitEmptyValues === true,
    };
  }
  const collector: TracingCollector = {
    service: typeof body.service === "string" ? body.service : "",
    port: Number(body.port ?? 0),
    maxTagLength: Number(body.maxTagLength ?? 0),
  };
  if (type === "zipkin") {
    return {
      name,
      type,
      ...collector,
      path: nonEmptyString(body.path, "/api/v2/spans"),
      enable64bitTraceId: body.enable64bitTraceId === true,
    };
  }
  if (type === "opentelemetry") {
    const http = isRecord(body.http) ? body.http : undefined;
    const grpc = isRecord(body.grpc) ? body.grpc : {};
    return {
      name,
      type,
      ...collector,
      grpc: { timeout: duration(grpc.timeout) },
      http: http && { path: typeof http.path === "string" ? http.path : "", timeout: duration(http.timeout) },
      sampler: body.dynatraceSampler !== undefined,
      resourceDetectors: body.resourceDetectors !== undefined,
    };
  }
  return { name, type };
}

/** value if it is a string other than "" (an unset proto3 string), else fallback (Istio's default for it). */
function nonEmptyString(value: unknown, fallback: string): string {
  return typeof value === "string" && value !== "" ? value : fallback;
}

function duration(value: unknown): DurationValue | undefined {
  return typeof value === "string" ? parseDuration(value) : undefined;
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
