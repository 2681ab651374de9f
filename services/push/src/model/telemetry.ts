import type { ConfigRef } from "@sextant/proto";
import {
  type AccessLogging,
  type Telemetry,
  type Tracing,
  type Tracing_CustomTag,
  WorkloadMode,
} from "@sextant/proto/gen/istio/telemetry/v1alpha1/telemetry";
import type { PolicyTargetReference } from "@sextant/proto/gen/istio/type/v1beta1/selector";
import type { MeshProxy } from "./proxy.js";
import type { PushContext } from "./push-context.js";
import {
  DEFAULT_TELEMETRY_MESH_CONFIG,
  findTelemetryProvider,
  type TelemetryMeshConfig,
  type TelemetryProvider,
} from "./telemetry-providers.js";
import type { TypedConfig } from "./types.js";

/**
 * The Telemetry that applies to a proxy, merged as istiod's Telemetries
 * (pilot/pkg/model/telemetry.go) merges it: the root namespace's
 * namespace-wide Telemetry (the mesh default), then the proxy namespace's
 * namespace-wide one, then every Telemetry of the proxy's namespace whose
 * selector (or Gateway targetRef) picks the proxy; later levels override
 * earlier ones.
 */
export interface EffectiveTelemetry {
  /** The Telemetry resources that took part, in order of precedence (for NACK tracing and cache keys). */
  readonly sources: readonly ConfigRef[];
  /**
   * Access logs per direction (CLIENT: outbound and gateways; SERVER:
   * inbound). Undefined: neither Telemetry nor defaultProviders configure
   * them, so MeshConfig accessLogFile applies (Istio's fallback).
   */
  readonly accessLogs:
    | { readonly client: readonly LoggingChoice[]; readonly server: readonly LoggingChoice[] }
    | undefined;
  /** Tracing per direction; undefined: no Telemetry and no default tracing provider (no tracing). */
  readonly tracing: { readonly client: TracingSpec; readonly server: TracingSpec } | undefined;
}

/** One access log provider's outcome for a direction, sorted by provider name. */
export interface LoggingChoice {
  readonly provider: TelemetryProvider;
  readonly disabled: boolean;
  /** The CEL expression of the Telemetry's filter, if any. */
  readonly filter: string | undefined;
}

/** What tracing a direction gets (Istio's TracingSpec). */
export interface TracingSpec {
  /** The provider spans are reported to; undefined: none found, so tracing is off. */
  readonly provider: TelemetryProvider | undefined;
  readonly disabled: boolean;
  readonly randomSamplingPercentage: number | undefined;
  readonly customTags: Readonly<Record<string, Tracing_CustomTag>>;
  readonly useRequestIdForTraceSampling: boolean;
  readonly enableIstioTags: boolean;
  readonly disableContextPropagation: boolean;
}

/** The mesh's telemetry settings, Istio's defaults when MeshConfig has none. */
export function telemetryMeshConfig(push: PushContext): TelemetryMeshConfig {
  return push.meshConfig.telemetry ?? DEFAULT_TELEMETRY_MESH_CONFIG;
}

/** The Telemetry resources that apply to proxy, in precedence order (least specific first). */
export function applicableTelemetries(push: PushContext, proxy: MeshProxy): TypedConfig<Telemetry>[] {
  const out: TypedConfig<Telemetry>[] = [];
  const root = namespaceWide(push, push.rootNamespace);
  if (root) out.push(root);
  if (proxy.namespace !== push.rootNamespace) {
    const own = namespaceWide(push, proxy.namespace);
    if (own) out.push(own);
  }
  for (const telemetry of push.telemetries) {
    if (telemetry.ref.namespace !== proxy.namespace || isNamespaceWide(telemetry.spec)) continue;
    if (selects(telemetry.spec, proxy)) out.push(telemetry);
  }
  return out;
}

/** The merged Telemetry of proxy (see {@link EffectiveTelemetry}). */
export function effectiveTelemetry(push: PushContext, proxy: MeshProxy): EffectiveTelemetry {
  const mesh = telemetryMeshConfig(push);
  const telemetries = applicableTelemetries(push, proxy);
  const logging = telemetries.map((t) => t.spec.accessLogging).filter((entries) => entries.length > 0);
  const tracing = telemetries.flatMap((t) => t.spec.tracing);
  return {
    sources: telemetries.map((t) => t.ref),
    accessLogs:
      logging.length === 0 && mesh.defaultProviders.accessLogging.length === 0
        ? undefined
        : {
            client: loggingChoices(mesh, logging, WorkloadMode.CLIENT),
            server: loggingChoices(mesh, logging, WorkloadMode.SERVER),
          },
    tracing:
      tracing.length === 0 && mesh.defaultProviders.tracing.length === 0
        ? undefined
        : mergeTracing(mesh, tracing),
  };
}

// Istio takes the first namespace-wide Telemetry of a namespace (its list is
// by creation time, then name; Sextant's by name: a second one is an error
// the analyzer reports).
function namespaceWide(push: PushContext, namespace: string): TypedConfig<Telemetry> | undefined {
  return push.telemetries.find((t) => t.ref.namespace === namespace && isNamespaceWide(t.spec));
}

function isNamespaceWide(spec: Telemetry): boolean {
  return Object.keys(spec.selector?.matchLabels ?? {}).length === 0 && targetRefs(spec).length === 0;
}

function targetRefs(spec: Telemetry): PolicyTargetReference[] {
  return spec.targetRef ? [spec.targetRef] : spec.targetRefs;
}

/** The Gateway API's label on the pods of a Gateway it deploys. */
const GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name";

// A selector matches labels; a targetRef to a Gateway API Gateway matches
// the routers deployed for it (Istio's PolicyMatcher). Other targets
// (Services, waypoints) select no sidecar or router.
function selects(spec: Telemetry, proxy: MeshProxy): boolean {
  const refs = targetRefs(spec);
  if (refs.length > 0) {
    return refs.some(
      (ref) =>
        ref.kind === "Gateway" &&
        ref.group === "gateway.networking.k8s.io" &&
        proxy.labels[GATEWAY_NAME_LABEL] === ref.name,
    );
  }
  return Object.entries(spec.selector?.matchLabels ?? {}).every(
    ([key, value]) => proxy.labels[key] === value,
  );
}

function modeMatches(selector: { mode: WorkloadMode } | undefined, mode: WorkloadMode): boolean {
  return !selector || selector.mode === WorkloadMode.CLIENT_AND_SERVER || selector.mode === mode;
}

const providerNames = (entry: { providers: { name: string }[] }) => entry.providers.map((p) => p.name);

/** The provider types Istio builds access logs from (Sextant builds the file one; see the push README). */
const ACCESS_LOG_PROVIDER_TYPES = new Set([
  "envoyFileAccessLog",
  "envoyHttpAls",
  "envoyTcpAls",
  "envoyOtelAls",
]);

/**
 * Istio's mergeLogs for one direction: the providers in scope are those the
 * most specific level names (else the defaults); each level's entries then
 * enable (with the filter of the entry that named the provider) or disable
 * them, an entry without providers meaning the previous entry's.
 */
function loggingChoices(
  mesh: TelemetryMeshConfig,
  levels: readonly AccessLogging[][],
  mode: WorkloadMode,
): LoggingChoice[] {
  const outcome = new Map<string, { disabled: boolean; filter: string | undefined }>();
  if (levels.length === 0) {
    for (const name of mesh.defaultProviders.accessLogging)
      outcome.set(name, { disabled: false, filter: undefined });
  } else {
    let inScope: readonly string[] = mesh.defaultProviders.accessLogging;
    const filters = new Map<string, string | undefined>();
    for (const level of levels) {
      const named = new Set<string>();
      for (const entry of level) {
        if (!modeMatches(entry.match, mode)) continue;
        for (const name of providerNames(entry)) {
          named.add(name);
          filters.set(name, entry.filter?.expression);
        }
      }
      if (named.size > 0) inScope = [...named];
    }
    const scope = new Set(inScope);
    let parent: readonly string[] = mesh.defaultProviders.accessLogging;
    for (const level of levels) {
      for (const entry of level) {
        const names = entry.providers.length > 0 ? providerNames(entry) : parent;
        parent = names;
        if (!modeMatches(entry.match, mode)) continue;
        for (const name of names) {
          if (!scope.has(name)) continue;
          outcome.set(
            name,
            entry.disabled === true
              ? { disabled: true, filter: undefined }
              : { disabled: false, filter: filters.get(name) },
          );
        }
      }
    }
  }
  const choices: LoggingChoice[] = [];
  for (const [name, { disabled, filter }] of outcome) {
    // Istio keeps only providers that make an access log (a metrics or tracing provider named here makes none,
    // so a Telemetry naming only such providers falls back to MeshConfig's accessLogFile).
    const provider = findTelemetryProvider(mesh, name);
    if (provider && ACCESS_LOG_PROVIDER_TYPES.has(provider.type))
      choices.push({ provider, disabled, filter });
  }
  return choices.sort((a, b) =>
    a.provider.name < b.provider.name ? -1 : a.provider.name > b.provider.name ? 1 : 0,
  );
}

/**
 * Istio's Tracing(): the default provider (the first of defaultProviders),
 * then each Tracing entry in precedence order overrides, per direction its
 * match selects, the provider (its first) and each field it sets. No
 * provider found: that direction is disabled.
 */
function mergeTracing(
  mesh: TelemetryMeshConfig,
  entries: readonly Tracing[],
): { client: TracingSpec; server: TracingSpec } {
  const initial = (): Mutable<TracingSpec> => ({
    provider: mesh.defaultProviders.tracing[0]
      ? findTelemetryProvider(mesh, mesh.defaultProviders.tracing[0])
      : undefined,
    disabled: false,
    randomSamplingPercentage: undefined,
    customTags: {},
    useRequestIdForTraceSampling: true,
    enableIstioTags: true,
    disableContextPropagation: false,
  });
  const client = initial();
  const server = initial();
  for (const entry of entries) {
    const mode = entry.match?.mode ?? WorkloadMode.CLIENT_AND_SERVER;
    const specs =
      mode === WorkloadMode.CLIENT ? [client] : mode === WorkloadMode.SERVER ? [server] : [client, server];
    for (const spec of specs) {
      if (entry.providers[0]) spec.provider = findTelemetryProvider(mesh, entry.providers[0].name);
      if (entry.disableSpanReporting !== undefined) spec.disabled = entry.disableSpanReporting;
      if (Object.keys(entry.customTags).length > 0) spec.customTags = entry.customTags;
      if (entry.randomSamplingPercentage !== undefined)
        spec.randomSamplingPercentage = entry.randomSamplingPercentage;
      if (entry.useRequestIdForTraceSampling !== undefined)
        spec.useRequestIdForTraceSampling = entry.useRequestIdForTraceSampling;
      if (entry.enableIstioTags !== undefined) spec.enableIstioTags = entry.enableIstioTags;
      if (entry.disableContextPropagation !== undefined)
        spec.disableContextPropagation = entry.disableContextPropagation;
    }
  }
  for (const spec of [client, server]) if (!spec.provider) spec.disabled = true;
  return { client, server };
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
