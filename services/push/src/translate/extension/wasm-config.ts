import { packAny, typeUrlOf } from "@sextant/proto";
import {
  HttpRBAC,
  NetworkRBAC,
  NetworkWasm,
  TypedExtensionConfig,
  TypeUrl,
  Wasm,
} from "@sextant/proto/envoy";
import type { Any } from "@sextant/proto/gen/google/protobuf/any";
import { StringValue } from "@sextant/proto/gen/google/protobuf/wrappers";
import {
  EnvValueSource,
  FailStrategy,
  PluginType,
  PullPolicy,
  type WasmPlugin,
} from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";
import type { TypedConfig } from "../../model/types.js";
import { wasmPluginConfigName, wasmPluginResourceName } from "../../model/wasm-plugin.js";

/** What an HTTP plugin's ECDS resource may be: the Wasm filter, or the RBAC filter standing in for it. */
export const HTTP_WASM_TYPE_URLS = [TypeUrl.Wasm, TypeUrl.RBAC];
/** The same for a NETWORK plugin. */
export const NETWORK_WASM_TYPE_URLS = [TypeUrl.NetworkWasm, TypeUrl.NetworkRBAC];

/** Istio hands the plugin its configuration as JSON in a StringValue. */
const STRING_VALUE_TYPE_URL = typeUrlOf("google.protobuf.StringValue");
/** Istio's Wasm runtime. */
const WASM_RUNTIME = "envoy.wasm.runtime.v8";
/** The VM environment variables istiod adds for istio-agent (pkg/model/wasm.go). */
const PULL_POLICY_ENV = "ISTIO_META_WASM_IMAGE_PULL_POLICY";
const RESOURCE_VERSION_ENV = "ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION";
/** The stat prefixes of istio-agent's stand-ins for a module it could not fetch (pkg/wasm/convert.go). */
const DEFAULT_ALLOW_STAT_PREFIX = "wasm-default-allow";
const DEFAULT_DENY_STAT_PREFIX = "wasm-default-deny";

/** Where the module of a plugin comes from: a file on the proxy's machine, or somewhere to download it from. */
export type ModuleSource = { kind: "file"; filename: string } | { kind: "remote"; scheme: string };

/**
 * The plugin's url as Istio reads it: `file://<path>` is a local file (the
 * path is the rest of the url); any other scheme (oci, https, http, or none,
 * which means oci) is a module istio-agent downloads.
 */
export function moduleSource(url: string): ModuleSource {
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*):\/\//.exec(url)?.[1]?.toLowerCase() ?? "";
  if (scheme === "file") return { kind: "file", filename: url.slice("file://".length) };
  return { kind: "remote", scheme: scheme || "oci" };
}

/**
 * The ECDS resource of a plugin (envoy.config.core.v3.TypedExtensionConfig,
 * named as the filters that refer to it).
 *
 * A `file://` module is Istio's Wasm filter as istiod builds it: the V8
 * runtime, the file as local code, the plugin's configuration as a JSON
 * string, pluginName as root id, the VM's environment (istiod's pull policy
 * and resource version variables, then the INLINE values; HOST names as
 * host_env_keys), fail_open for FAIL_OPEN.
 *
 * Any other module would be downloaded by istio-agent, which rewrites the
 * resource to a local file before Envoy sees it. Sextant's agent passes xDS
 * through unchanged and downloads nothing, so push sends what istio-agent
 * sends when a download fails: an RBAC filter that allows everything for
 * FAIL_OPEN and denies everything otherwise (ingest's analysis says so).
 */
export function wasmExtensionConfig(plugin: TypedConfig<WasmPlugin>): TypedExtensionConfig {
  const network = plugin.spec.type === PluginType.NETWORK;
  const source = moduleSource(plugin.spec.url);
  const failOpen = plugin.spec.failStrategy === FailStrategy.FAIL_OPEN;
  const typedConfig =
    source.kind === "file"
      ? wasmFilter(plugin, source.filename, failOpen, network)
      : standInFilter(failOpen, network);
  return TypedExtensionConfig.fromPartial({ name: wasmPluginResourceName(plugin.ref), typedConfig });
}

function wasmFilter(
  plugin: TypedConfig<WasmPlugin>,
  filename: string,
  failOpen: boolean,
  network: boolean,
): Any {
  const { spec } = plugin;
  const keyValues: Record<string, string> = {};
  if (spec.imagePullPolicy !== PullPolicy.UNSPECIFIED_POLICY)
    keyValues[PULL_POLICY_ENV] = spec.imagePullPolicy === PullPolicy.Always ? "Always" : "IfNotPresent";
  keyValues[RESOURCE_VERSION_ENV] = String(plugin.generation);
  const hostEnvKeys: string[] = [];
  for (const env of spec.vmConfig?.env ?? []) {
    if (env.valueFrom === EnvValueSource.HOST) hostEnvKeys.push(env.name);
    else keyValues[env.name] = env.value;
  }
  const config = {
    name: wasmPluginConfigName(plugin.ref),
    rootId: spec.pluginName,
    // Without a configuration Istio sends an empty Any, which the module reads as no bytes, as it reads none.
    ...(spec.pluginConfig && Object.keys(spec.pluginConfig).length > 0
      ? {
          configuration: packAny(STRING_VALUE_TYPE_URL, StringValue, {
            value: sortedJson(spec.pluginConfig),
          }),
        }
      : {}),
    vmConfig: {
      runtime: WASM_RUNTIME,
      code: { local: { filename } },
      environmentVariables: { keyValues, hostEnvKeys },
    },
    failOpen,
  };
  return network
    ? packAny(TypeUrl.NetworkWasm, NetworkWasm, NetworkWasm.fromPartial({ config }))
    : packAny(TypeUrl.Wasm, Wasm, Wasm.fromPartial({ config }));
}

/** istio-agent's stand-in for a module it cannot load: no rules allow everything, empty rules deny everything. */
function standInFilter(failOpen: boolean, network: boolean): Any {
  const rules = failOpen ? {} : { rules: {} };
  const prefix = failOpen ? DEFAULT_ALLOW_STAT_PREFIX : DEFAULT_DENY_STAT_PREFIX;
  return network
    ? packAny(TypeUrl.NetworkRBAC, NetworkRBAC, NetworkRBAC.fromPartial({ ...rules, statPrefix: prefix }))
    : packAny(TypeUrl.RBAC, HttpRBAC, HttpRBAC.fromPartial({ ...rules, rulesStatPrefix: prefix }));
}

/** JSON with every object's keys sorted, as Go's protojson writes a Struct (its fields are a map). */
function sortedJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner) =>
    inner && typeof inner === "object" && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : inner,
  );
}
