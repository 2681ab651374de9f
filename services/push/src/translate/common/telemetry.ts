import { createHash } from "node:crypto";
import { packAny, unpackAny } from "@sextant/proto";
import { HttpConnectionManager, Listener, TcpProxy, TypeUrl } from "@sextant/proto/envoy";
import type { AccessLog, AccessLogFilter } from "@sextant/proto/gen/envoy/config/accesslog/v3/accesslog";
import { TrafficDirection } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { Filter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import { OpenTelemetryConfig } from "@sextant/proto/gen/envoy/config/trace/v3/opentelemetry";
import {
  ZipkinConfig,
  ZipkinConfig_CollectorEndpointVersion,
} from "@sextant/proto/gen/envoy/config/trace/v3/zipkin";
import { FileAccessLog } from "@sextant/proto/gen/envoy/extensions/access_loggers/file/v3/file";
import { ExpressionFilter } from "@sextant/proto/gen/envoy/extensions/access_loggers/filters/cel/v3/cel";
import type {
  HttpConnectionManager_Tracing,
  RequestIDExtension,
} from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import { UuidRequestIdConfig } from "@sextant/proto/gen/envoy/extensions/request_id/uuid/v3/uuid";
import type { CustomTag } from "@sextant/proto/gen/envoy/type/tracing/v3/custom_tag";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import {
  effectiveTelemetry,
  type LoggingChoice,
  type TracingSpec,
  telemetryMeshConfig,
} from "../../model/telemetry.js";
import type {
  FileAccessLogProvider,
  OpenTelemetryProvider,
  TelemetryMeshConfig,
  ZipkinProvider,
} from "../../model/telemetry-providers.js";
import type { GeneratedResource } from "../../model/types.js";
import type { DebugCodec } from "../../server/xds-type-table.js";
import { HCM_FILTER_NAME, TCP_PROXY_FILTER_NAME } from "../sidecar/filters.js";
import { lookupCluster } from "./lookup-cluster.js";

/** Envoy's file access logger. */
export const FILE_ACCESS_LOG_NAME = "envoy.access_loggers.file";
/** The access log filter extension that evaluates a CEL expression. */
export const CEL_FILTER_NAME = "envoy.access_loggers.extension_filters.cel";
const ZIPKIN_TRACER = "envoy.tracers.zipkin";
const OPENTELEMETRY_TRACER = "envoy.tracers.opentelemetry";

/** Istio's default text access log format (EnvoyTextLogFormat, Istio 1.9 onwards): a fact, not wording. */
export const ISTIO_TEXT_LOG_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% "%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% ' +
  '%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" ' +
  '"%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% ' +
  "%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n";

/** Istio's default JSON access log fields (EnvoyJSONLogFormatIstio), by key. */
export const ISTIO_JSON_LOG_FORMAT: Readonly<Record<string, string>> = {
  authority: "%REQ(:AUTHORITY)%",
  bytes_received: "%BYTES_RECEIVED%",
  bytes_sent: "%BYTES_SENT%",
  connection_termination_details: "%CONNECTION_TERMINATION_DETAILS%",
  downstream_local_address: "%DOWNSTREAM_LOCAL_ADDRESS%",
  downstream_remote_address: "%DOWNSTREAM_REMOTE_ADDRESS%",
  duration: "%DURATION%",
  method: "%REQ(:METHOD)%",
  path: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
  protocol: "%PROTOCOL%",
  request_id: "%REQ(X-REQUEST-ID)%",
  requested_server_name: "%REQUESTED_SERVER_NAME%",
  response_code: "%RESPONSE_CODE%",
  response_code_details: "%RESPONSE_CODE_DETAILS%",
  response_flags: "%RESPONSE_FLAGS%",
  route_name: "%ROUTE_NAME%",
  start_time: "%START_TIME%",
  upstream_cluster: "%UPSTREAM_CLUSTER_RAW%",
  upstream_host: "%UPSTREAM_HOST%",
  upstream_local_address: "%UPSTREAM_LOCAL_ADDRESS%",
  upstream_service_time: "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%",
  upstream_transport_failure_reason: "%UPSTREAM_TRANSPORT_FAILURE_REASON%",
  user_agent: "%REQ(USER-AGENT)%",
  x_forwarded_for: "%REQ(X-FORWARDED-FOR)%",
};

/** The Anys telemetry adds to listeners, for /debug/config_dump to show decoded. */
export const TELEMETRY_NESTED_CODECS: Readonly<Record<string, DebugCodec>> = {
  [TypeUrl.FileAccessLog]: FileAccessLog,
  [TypeUrl.CelExpressionFilter]: ExpressionFilter,
  [TypeUrl.ZipkinConfig]: ZipkinConfig,
  [TypeUrl.OpenTelemetryConfig]: OpenTelemetryConfig,
  [TypeUrl.UuidRequestIdConfig]: UuidRequestIdConfig,
};

/** Istio's ListenerClass: which Telemetry direction a listener's filters take (gateways and outbound: CLIENT). */
export type ListenerClass = "gateway" | "sidecar-inbound" | "sidecar-outbound";

interface ClassTelemetry {
  readonly accessLogs: readonly AccessLog[];
  /** The listener's own access logs (virtualOutbound, virtualInbound, gateways): connections no chain matched (NR). */
  readonly listenerAccessLogs: readonly AccessLog[];
  readonly tracing: HttpConnectionManager_Tracing | undefined;
  readonly requestIdExtension: RequestIDExtension | undefined;
}

/**
 * What Telemetry (and MeshConfig's legacy access log) adds to one proxy's
 * listeners, computed once per generation: access logs for each HCM and
 * tcp_proxy, tracing for each HCM. `key` identifies it for listener cache
 * keys; `sources` are the Telemetry resources it came from.
 */
export interface ListenerTelemetry {
  readonly key: string;
  readonly sources: GeneratedResource["sources"];
  readonly byClass: Readonly<Record<ListenerClass, ClassTelemetry>>;
}

/** The listener telemetry of proxy (sidecar or router). */
export function listenerTelemetry(push: PushContext, proxy: MeshProxy): ListenerTelemetry {
  const mesh = telemetryMeshConfig(push);
  const effective = effectiveTelemetry(push, proxy);
  const forClass = (listenerClass: ListenerClass): ClassTelemetry => {
    const client = listenerClass !== "sidecar-inbound";
    const choices =
      effective.accessLogs && (client ? effective.accessLogs.client : effective.accessLogs.server);
    const tracingSpec = effective.tracing && (client ? effective.tracing.client : effective.tracing.server);
    const tracing = tracingSpec ? hcmTracing(push, proxy, mesh, tracingSpec) : undefined;
    const accessLogs =
      choices && choices.length > 0 ? telemetryAccessLogs(mesh, choices) : legacyAccessLogs(mesh);
    return {
      accessLogs,
      listenerAccessLogs: mesh.disableEnvoyListenerLog ? [] : accessLogs.map(noRouteOnly),
      tracing,
      requestIdExtension:
        tracing && tracingSpec
          ? {
              typedConfig: packAny(
                TypeUrl.UuidRequestIdConfig,
                UuidRequestIdConfig,
                UuidRequestIdConfig.fromPartial({
                  useRequestIdForTraceSampling: tracingSpec.useRequestIdForTraceSampling,
                }),
              ),
            }
          : undefined,
    };
  };
  const byClass = {
    gateway: forClass("gateway"),
    "sidecar-inbound": forClass("sidecar-inbound"),
    "sidecar-outbound": forClass("sidecar-outbound"),
  };
  const empty = Object.values(byClass).every((c) => c.accessLogs.length === 0 && !c.tracing);
  return {
    key: empty
      ? ""
      : createHash("sha256")
          .update(
            JSON.stringify(byClass, (_k, v) =>
              v instanceof Uint8Array ? Buffer.from(v).toString("base64") : v,
            ),
          )
          .digest("hex")
          .slice(0, 16),
    sources: effective.sources,
    byClass,
  };
}

/**
 * The listener with its HCMs and tcp_proxies given the proxy's access logs
 * and tracing (Istio sets them while building each filter; Sextant adds
 * them to the built listener, one place for every listener builder).
 * Inbound listeners (traffic_direction INBOUND) take the SERVER direction,
 * the rest CLIENT. Unchanged when there is nothing to add.
 */
export function withTelemetry(
  resource: GeneratedResource,
  telemetry: ListenerTelemetry,
  proxyKind: MeshProxy["kind"],
): GeneratedResource {
  if (telemetry.key === "") return resource;
  const listener = unpackAny(resource.resource, TypeUrl.Listener, Listener);
  const listenerClass: ListenerClass =
    proxyKind === "router"
      ? "gateway"
      : listener.trafficDirection === TrafficDirection.INBOUND
        ? "sidecar-inbound"
        : "sidecar-outbound";
  const settings = telemetry.byClass[listenerClass];
  const chains = [
    ...listener.filterChains,
    ...(listener.defaultFilterChain ? [listener.defaultFilterChain] : []),
  ];
  // Istio logs on the listener itself only where a connection can match no chain.
  if (
    listenerClass === "gateway" ||
    listener.name === "virtualOutbound" ||
    listener.name === "virtualInbound"
  )
    listener.accessLog = [...listener.accessLog, ...settings.listenerAccessLogs];
  for (const chain of chains)
    chain.filters = chain.filters.map((filter) => withFilterTelemetry(filter, settings));
  return {
    ...resource,
    resource: packAny(TypeUrl.Listener, Listener, listener),
    sources: [...resource.sources, ...telemetry.sources],
  };
}

function withFilterTelemetry(filter: Filter, settings: ClassTelemetry): Filter {
  if (!filter.typedConfig) return filter;
  if (filter.name === HCM_FILTER_NAME && filter.typedConfig.typeUrl === TypeUrl.HttpConnectionManager) {
    const manager = unpackAny(filter.typedConfig, TypeUrl.HttpConnectionManager, HttpConnectionManager);
    if (settings.accessLogs.length === 0 && !settings.tracing) return filter;
    manager.accessLog = [...manager.accessLog, ...settings.accessLogs];
    if (settings.tracing) manager.tracing = settings.tracing;
    if (settings.requestIdExtension) manager.requestIdExtension = settings.requestIdExtension;
    return { ...filter, typedConfig: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager) };
  }
  if (filter.name === TCP_PROXY_FILTER_NAME && filter.typedConfig.typeUrl === TypeUrl.TcpProxy) {
    if (settings.accessLogs.length === 0) return filter;
    const proxy = unpackAny(filter.typedConfig, TypeUrl.TcpProxy, TcpProxy);
    proxy.accessLog = [...proxy.accessLog, ...settings.accessLogs];
    return { ...filter, typedConfig: packAny(TypeUrl.TcpProxy, TcpProxy, proxy) };
  }
  return filter;
}

/** The access log as a listener's: only connections no filter chain matched (response flag NR), and its own filter. */
function noRouteOnly(log: AccessLog): AccessLog {
  const noRoute: AccessLogFilter = { responseFlagFilter: { flags: ["NR"] } };
  return { ...log, filter: log.filter ? { andFilter: { filters: [noRoute, log.filter] } } : noRoute };
}

/** MeshConfig accessLogFile (Istio's fallback when no Telemetry configures access logs). */
function legacyAccessLogs(mesh: TelemetryMeshConfig): AccessLog[] {
  if (mesh.accessLogFile === "") return [];
  return [fileAccessLog(mesh.accessLogFile, meshConfigFormat(mesh), false, undefined)];
}

function meshConfigFormat(mesh: TelemetryMeshConfig): FileAccessLogProvider["format"] {
  if (mesh.accessLogEncoding === "TEXT") return { text: mesh.accessLogFormat };
  if (mesh.accessLogFormat === "") return { labels: {} };
  try {
    const parsed: unknown = JSON.parse(mesh.accessLogFormat);
    // Istio logs a parse error and keeps its default fields.
    return {
      labels: typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : {},
    };
  } catch {
    return { labels: {} };
  }
}

/** The access logs of Telemetry's providers: enabled file providers; other kinds build none here. */
function telemetryAccessLogs(mesh: TelemetryMeshConfig, choices: readonly LoggingChoice[]): AccessLog[] {
  const logs: AccessLog[] = [];
  for (const choice of choices) {
    if (choice.disabled || choice.provider.type !== "envoyFileAccessLog") continue;
    const provider = choice.provider as FileAccessLogProvider;
    // Istio's built-in "envoy" provider without its own format follows MeshConfig's accessLogEncoding/Format.
    const format =
      provider.name === "envoy" && provider.format === undefined && !provider.omitEmptyValues
        ? meshConfigFormat(mesh)
        : provider.format;
    logs.push(fileAccessLog(provider.path, format, provider.omitEmptyValues, choice.filter));
  }
  return logs;
}

function fileAccessLog(
  path: string,
  format: FileAccessLogProvider["format"],
  omitEmptyValues: boolean,
  celExpression: string | undefined,
): AccessLog {
  const logFormat =
    format !== undefined && "labels" in format
      ? {
          jsonFormat: Object.keys(format.labels).length > 0 ? format.labels : { ...ISTIO_JSON_LOG_FORMAT },
          jsonFormatOptions: { sortProperties: false },
          omitEmptyValues,
        }
      : { textFormatSource: { inlineString: textFormat(format?.text ?? "") }, omitEmptyValues };
  const filter: AccessLogFilter | undefined =
    celExpression === undefined
      ? undefined
      : {
          extensionFilter: {
            name: CEL_FILTER_NAME,
            typedConfig: packAny(
              TypeUrl.CelExpressionFilter,
              ExpressionFilter,
              ExpressionFilter.fromPartial({ expression: celExpression }),
            ),
          },
        };
  return {
    name: FILE_ACCESS_LOG_NAME,
    filter,
    typedConfig: packAny(
      TypeUrl.FileAccessLog,
      FileAccessLog,
      FileAccessLog.fromPartial({ path, logFormat }),
    ),
  };
}

/** A user's text format ends in a newline (Istio adds one); empty is Istio's default. */
function textFormat(text: string): string {
  if (text === "") return ISTIO_TEXT_LOG_FORMAT;
  return text.endsWith("\n") ? text : `${text}\n`;
}

/** Why a tracing provider cannot be built for a proxy, or its HCM tracing. */
type ProviderTracer =
  | { tracer: Pick<HttpConnectionManager_Tracing, "provider" | "maxPathTagLength"> }
  | { error: string };

/**
 * Istio's configureTracingFromTelemetry for one direction: the provider's
 * tracer, sampling (client and overall 100 %, random from the Telemetry,
 * else defaultConfig.tracing.sampling, else PILOT_TRACE_SAMPLING's 1 %),
 * and custom tags. A provider that cannot be built leaves the HCM without
 * tracing (Istio logs it; Sextant's analysis reports it).
 */
function hcmTracing(
  push: PushContext,
  proxy: MeshProxy,
  mesh: TelemetryMeshConfig,
  spec: TracingSpec,
): HttpConnectionManager_Tracing | undefined {
  if (spec.disabled || !spec.provider) return undefined;
  const built = providerTracer(push, proxy, spec.provider);
  if ("error" in built) return undefined;
  const sampling = spec.randomSamplingPercentage ?? proxySampling(mesh);
  return {
    clientSampling: { value: 100 },
    randomSampling: { value: sampling },
    overallSampling: { value: 100 },
    verbose: false,
    maxPathTagLength: built.tracer.maxPathTagLength,
    customTags: customTags(proxy, spec),
    provider: built.tracer.provider,
    spawnUpstreamSpan: proxy.kind === "router" ? true : undefined,
  } as HttpConnectionManager_Tracing;
}

/** defaultConfig.tracing.sampling when set (above 100 means 1, as Istio reads it), else PILOT_TRACE_SAMPLING's default. */
function proxySampling(mesh: TelemetryMeshConfig): number {
  if (mesh.proxyTracingSampling === 0) return 1;
  return mesh.proxyTracingSampling > 100 ? 1 : mesh.proxyTracingSampling;
}

/** The tracer for a provider: Zipkin or OpenTelemetry over gRPC (or HTTP with a timeout); others are not built. */
function providerTracer(
  push: PushContext,
  proxy: MeshProxy,
  provider: NonNullable<TracingSpec["provider"]>,
): ProviderTracer {
  if (provider.type === "zipkin") {
    const zipkin = provider as ZipkinProvider;
    const found = lookupCluster(push, zipkin.service, zipkin.port);
    if ("error" in found) return found;
    const config = ZipkinConfig.fromPartial({
      collectorCluster: found.cluster,
      collectorEndpoint: zipkin.path,
      traceId128bit: !zipkin.enable64bitTraceId,
      sharedSpanContext: false,
      collectorEndpointVersion: ZipkinConfig_CollectorEndpointVersion.HTTP_JSON,
      collectorHostname: found.hostname,
    });
    return tracer(ZIPKIN_TRACER, packAny(TypeUrl.ZipkinConfig, ZipkinConfig, config), zipkin.maxTagLength);
  }
  if (provider.type === "opentelemetry") {
    const otel = provider as OpenTelemetryProvider;
    if (otel.sampler)
      return { error: `provider ${otel.name}: a custom sampler (dynatraceSampler) is not supported` };
    const found = lookupCluster(push, otel.service, otel.port);
    if ("error" in found) return found;
    const serviceName = serviceCluster(proxy);
    let config: OpenTelemetryConfig;
    if (otel.http) {
      // Envoy requires the HTTP exporter's timeout; Istio passes the provider's as it is.
      if (!otel.http.timeout) return { error: `provider ${otel.name}: http export needs a timeout` };
      const path = otel.http.path.replace(/^\/*/, "");
      config = OpenTelemetryConfig.fromPartial({
        serviceName,
        httpService: {
          httpUri: { uri: `${found.hostname}/${path}`, cluster: found.cluster, timeout: otel.http.timeout },
        },
      });
    } else {
      config = OpenTelemetryConfig.fromPartial({
        serviceName,
        grpcService: {
          envoyGrpc: { clusterName: found.cluster, authority: found.hostname },
          ...(otel.grpc.timeout ? { timeout: otel.grpc.timeout } : {}),
        },
      });
    }
    return tracer(
      OPENTELEMETRY_TRACER,
      packAny(TypeUrl.OpenTelemetryConfig, OpenTelemetryConfig, config),
      otel.maxTagLength,
    );
  }
  return { error: `provider ${provider.name} (${provider.type}) is not a tracer Sextant builds` };
}

function tracer(name: string, typedConfig: ReturnType<typeof packAny>, maxTagLength: number): ProviderTracer {
  return {
    tracer: {
      provider: { name, typedConfig },
      maxPathTagLength: maxTagLength !== 0 ? maxTagLength : undefined,
    },
  };
}

/** The span service name: the node's cluster as istio-agent sets it (`<app>.<namespace>`). */
function serviceCluster(proxy: MeshProxy): string {
  const app = proxy.labels["service.istio.io/canonical-name"] ?? proxy.labels.app ?? "istio-proxy";
  return `${app}.${proxy.namespace}`;
}

// Istio's tags for an authorization dry run: the RBAC filter's shadow-rule metadata.
const DRY_RUN_TAGS: readonly [string, string][] = [
  ["istio.authorization.dry_run.allow_policy.name", "istio_dry_run_allow_shadow_effective_policy_id"],
  ["istio.authorization.dry_run.allow_policy.result", "istio_dry_run_allow_shadow_engine_result"],
  ["istio.authorization.dry_run.deny_policy.name", "istio_dry_run_deny_shadow_effective_policy_id"],
  ["istio.authorization.dry_run.deny_policy.result", "istio_dry_run_deny_shadow_engine_result"],
];

/** Istio's custom tags: its service and dry-run tags (enableIstioTags), then the Telemetry's, sorted by tag. */
function customTags(proxy: MeshProxy, spec: TracingSpec): CustomTag[] {
  const tags: CustomTag[] = [];
  const literal = (tag: string, value: string) => ({ tag, literal: { value } }) as CustomTag;
  if (spec.enableIstioTags) {
    const meshId = typeof proxy.metadata.MESH_ID === "string" ? proxy.metadata.MESH_ID : "";
    tags.push(
      literal("istio.canonical_revision", proxy.labels["service.istio.io/canonical-revision"] || "latest"),
      literal("istio.canonical_service", proxy.labels["service.istio.io/canonical-name"] || "unknown"),
      literal("istio.mesh_id", meshId || "unknown"),
      literal("istio.namespace", proxy.namespace || "default"),
      literal("istio.cluster_id", proxy.clusterId || "unknown"),
    );
    for (const [tag, key] of DRY_RUN_TAGS) {
      tags.push({
        tag,
        metadata: {
          kind: { request: {} },
          metadataKey: { key: "envoy.filters.http.rbac", path: [{ key }] },
          defaultValue: "",
        },
      } as CustomTag);
    }
  }
  for (const [tag, value] of Object.entries(spec.customTags)) {
    // A formatter tag needs an Envoy newer than the API Sextant builds; Istio leaves it out for such proxies too.
    if (value.literal) tags.push(literal(tag, value.literal.value));
    else if (value.environment)
      tags.push({
        tag,
        environment: { name: value.environment.name, defaultValue: value.environment.defaultValue },
      } as CustomTag);
    else if (value.header)
      tags.push({
        tag,
        requestHeader: { name: value.header.name, defaultValue: value.header.defaultValue },
      } as CustomTag);
  }
  return tags.sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}
