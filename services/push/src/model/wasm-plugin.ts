import type { ConfigRef } from "@sextant/proto";
import {
  type PluginPhase,
  PluginType,
  type WasmPlugin,
  type WasmPlugin_TrafficSelector,
} from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";
import { WorkloadMode } from "@sextant/proto/gen/istio/type/v1beta1/selector";
import type { MeshProxy } from "./proxy.js";
import type { PushContext } from "./push-context.js";
import { selectorMatches } from "./security.js";
import type { TypedConfig } from "./types.js";

/**
 * Istio 1.30 serves a WasmPlugin as a TrafficExtension named after it: the
 * ECDS resource and the filter that refers to it are
 * `extensions.istio.io/trafficextension/<namespace>.<name>~istio-translated-wasmplugin`
 * (the `~` keeps it apart from a real TrafficExtension's name).
 */
export const EXTENSION_RESOURCE_PREFIX = "extensions.istio.io/trafficextension/";
export const TRANSLATED_WASM_PLUGIN_SUFFIX = "~istio-translated-wasmplugin";

/** The label Kubernetes Gateway API deployments carry: it makes a proxy a target of targetRefs. */
const GATEWAY_NAME_LABEL = "gateway.networking.k8s.io/gateway-name";
const GATEWAY_API_GROUP = "gateway.networking.k8s.io";

/** Which listener a filter chain belongs to (Istio's ListenerClass), which decides the traffic mode. */
export type ListenerClass = "outbound" | "inbound" | "gateway";

/** The listener a plugin is matched against: its class and port (0: the catch-all of virtualInbound). */
export interface ListenerInfo {
  readonly class: ListenerClass;
  readonly port: number;
}

/** HTTP plugins go into HCMs, NETWORK ones before them and before tcp_proxy. */
export type FilterChainType = "http" | "network";

/** The name of a plugin's ECDS resource and filter. */
export function wasmPluginResourceName(ref: ConfigRef): string {
  return `${EXTENSION_RESOURCE_PREFIX}${ref.namespace}.${ref.name}${TRANSLATED_WASM_PLUGIN_SUFFIX}`;
}

/** The plugin's own name in Envoy's PluginConfig (`<namespace>.<name>` of the translated resource). */
export function wasmPluginConfigName(ref: ConfigRef): string {
  return `${ref.namespace}.${ref.name}${TRANSLATED_WASM_PLUGIN_SUFFIX}`;
}

/** The plugins of one listener, by phase, each phase ordered by priority (higher first). */
export type PluginsByPhase = ReadonlyMap<PluginPhase, readonly TypedConfig<WasmPlugin>[]>;

/**
 * Istio's TrafficExtensionsByListenerInfo for a WasmPlugin: the plugins of
 * the proxy's namespace, then of the root namespace, that attach to the
 * proxy, are of the chain's type and whose `match` takes the listener;
 * grouped by phase and sorted by priority, highest first (no priority is
 * the lowest), stably, so equal priorities keep that order.
 */
export function wasmPluginsFor(
  push: PushContext,
  proxy: MeshProxy,
  listener: ListenerInfo,
  chain: FilterChainType,
): PluginsByPhase {
  const namespaces = [...new Set([proxy.namespace, push.rootNamespace])];
  const byPhase = new Map<PluginPhase, TypedConfig<WasmPlugin>[]>();
  for (const namespace of namespaces) {
    for (const plugin of push.wasmPlugins) {
      if (plugin.ref.namespace !== namespace) continue;
      if (chainTypeOf(plugin.spec) !== chain) continue;
      if (!attaches(plugin, proxy) || !matchesListener(plugin.spec.match, listener)) continue;
      const list = byPhase.get(plugin.spec.phase) ?? [];
      list.push(plugin);
      byPhase.set(plugin.spec.phase, list);
    }
  }
  for (const list of byPhase.values()) list.sort((a, b) => priorityOf(b) - priorityOf(a));
  return byPhase;
}

/**
 * The plugins a proxy asked for by ECDS resource name, as Istio's
 * TrafficExtensionsByName: only of the proxy's namespace or the root
 * namespace (whatever the selector says, as Istio); unknown names are skipped.
 */
export function wasmPluginsByName(
  push: PushContext,
  proxy: MeshProxy,
  names: Iterable<string>,
): Map<string, TypedConfig<WasmPlugin>> {
  const allowed = new Set([proxy.namespace, push.rootNamespace]);
  const byName = new Map<string, TypedConfig<WasmPlugin>>();
  for (const plugin of push.wasmPlugins) {
    if (allowed.has(plugin.ref.namespace)) byName.set(wasmPluginResourceName(plugin.ref), plugin);
  }
  const found = new Map<string, TypedConfig<WasmPlugin>>();
  for (const name of names) {
    const plugin = byName.get(name);
    if (plugin) found.set(name, plugin);
  }
  return found;
}

/** The plugins that attach to the proxy, whatever listener their `match` takes (for NACK tracing). */
export function wasmPluginsAttached(push: PushContext, proxy: MeshProxy): ConfigRef[] {
  return push.wasmPlugins
    .filter(
      (plugin) => plugin.ref.namespace === proxy.namespace || plugin.ref.namespace === push.rootNamespace,
    )
    .filter((plugin) => attaches(plugin, proxy))
    .map((plugin) => plugin.ref);
}

/** An unset type is HTTP, as Istio reads it for backward compatibility. */
function chainTypeOf(plugin: WasmPlugin): FilterChainType {
  return plugin.type === PluginType.NETWORK ? "network" : "http";
}

/** No priority sorts as the lowest int32, as in Istio (so it ties with an explicit -2147483648). */
function priorityOf(plugin: TypedConfig<WasmPlugin>): number {
  return plugin.spec.priority ?? -2147483648;
}

/**
 * Istio's ShouldAttachPolicy: a proxy of a Gateway API Gateway (it has the
 * gateway-name label) takes the plugins whose targetRef(s) name its Gateway
 * in its namespace, and selector-based ones without targetRefs; any other
 * proxy takes only selector-based plugins (a plugin with targetRefs is for
 * gateways and waypoints) whose selector is unset or matches its labels.
 */
function attaches(plugin: TypedConfig<WasmPlugin>, proxy: MeshProxy): boolean {
  const { spec } = plugin;
  const targetRefs = spec.targetRefs.length > 0 ? spec.targetRefs : spec.targetRef ? [spec.targetRef] : [];
  const selected = selectorMatches(spec.selector?.matchLabels, proxy.labels);
  const gatewayName = proxy.labels[GATEWAY_NAME_LABEL];
  if (gatewayName === undefined) return targetRefs.length === 0 && selected;
  if (targetRefs.length === 0) return selected;
  return (
    plugin.ref.namespace === proxy.namespace &&
    targetRefs.some(
      (ref) =>
        ref.group === GATEWAY_API_GROUP &&
        ref.kind === "Gateway" &&
        ref.name === gatewayName &&
        (ref.namespace === "" || ref.namespace === proxy.namespace),
    )
  );
}

/** No selector takes every listener; otherwise one must take its mode and port. */
function matchesListener(selectors: readonly WasmPlugin_TrafficSelector[], listener: ListenerInfo): boolean {
  if (selectors.length === 0) return true;
  return selectors.some(
    (selector) =>
      matchesMode(selector.mode, listener.class) &&
      (selector.ports.length === 0 ||
        selector.ports.some((port) => port.number !== 0 && port.number === listener.port)),
  );
}

/** A gateway's traffic is client traffic, as a sidecar's outbound; inbound is server traffic. */
function matchesMode(mode: WorkloadMode, listenerClass: ListenerClass): boolean {
  if (mode === WorkloadMode.UNDEFINED || mode === WorkloadMode.CLIENT_AND_SERVER) return true;
  return mode === (listenerClass === "inbound" ? WorkloadMode.SERVER : WorkloadMode.CLIENT);
}
