import type { ConfigRef } from "@sextant/proto";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import type { Filter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import type { HttpFilter } from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import { PluginPhase, type WasmPlugin } from "@sextant/proto/gen/istio/extensions/v1alpha1/wasm";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import type { TypedConfig } from "../../model/types.js";
import {
  type FilterChainType,
  type ListenerInfo,
  type PluginsByPhase,
  wasmPluginResourceName,
  wasmPluginsFor,
} from "../../model/wasm-plugin.js";
import { HTTP_WASM_TYPE_URLS, NETWORK_WASM_TYPE_URLS } from "./wasm-config.js";

/**
 * Istio's defaultConfigSource for extension filters: over ADS, and the
 * listener waits for the config however long it takes (initial fetch
 * timeout 0), because a plugin may be what enforces authentication or
 * authorization.
 */
const EXTENSION_CONFIG_SOURCE = {
  ads: {},
  initialFetchTimeout: { seconds: 0, nanos: 0 },
  resourceApiVersion: ApiVersion.V3,
};

/** Istio's own filters of a chain that Wasm plugins are placed around (each group may be empty). */
export interface IstioFilters<F> {
  /** CUSTOM authorization (its RBAC marker and ext_authz). */
  readonly custom?: readonly F[];
  /** Authentication (JWT, istio_authn). */
  readonly authn?: readonly F[];
  /** AUDIT, DENY and ALLOW authorization. */
  readonly authz?: readonly F[];
}

/**
 * The Wasm plugins of one listener (one class and port of one proxy), ready
 * to be placed in its filter chains: HTTP plugins into each HCM, NETWORK
 * plugins before each HCM or tcp_proxy.
 */
export interface ListenerExtensions {
  /**
   * Istio's HTTP filters before gRPC-Web, fault, CORS and the router, with
   * the plugins in their phases' slots: CUSTOM authorization, AUTHN plugins,
   * authentication, AUTHZ plugins, authorization, STATS plugins, plugins of
   * no phase.
   */
  httpFilters(istio?: IstioFilters<HttpFilter>): HttpFilter[];
  /** The same for network filters, before an HCM (no Istio filters) or tcp_proxy. */
  networkFilters(istio?: IstioFilters<Filter>): Filter[];
  /** The plugins placed, for NACK tracing. */
  readonly sources: readonly ConfigRef[];
}

/** The plugins of a listener of the proxy, for {@link ListenerExtensions}. */
export function listenerExtensions(
  push: PushContext,
  proxy: MeshProxy,
  listener: ListenerInfo,
): ListenerExtensions {
  const http = wasmPluginsFor(push, proxy, listener, "http");
  const network = wasmPluginsFor(push, proxy, listener, "network");
  return {
    httpFilters: (istio = {}) =>
      placed(http, istio, (plugin) => discoveredFilter(plugin, "http") as HttpFilter),
    networkFilters: (istio = {}) =>
      placed(network, istio, (plugin) => discoveredFilter(plugin, "network") as Filter),
    sources: [...http.values(), ...network.values()].flat().map((plugin) => plugin.ref),
  };
}

/** Istio's PopAppend sequence: each phase's plugins in the slot before the Istio filters of that stage. */
function placed<F>(
  plugins: PluginsByPhase,
  istio: IstioFilters<F>,
  filterOf: (plugin: TypedConfig<WasmPlugin>) => F,
): F[] {
  const phase = (p: PluginPhase) => (plugins.get(p) ?? []).map(filterOf);
  return [
    ...(istio.custom ?? []),
    ...phase(PluginPhase.AUTHN),
    ...(istio.authn ?? []),
    ...phase(PluginPhase.AUTHZ),
    ...(istio.authz ?? []),
    ...phase(PluginPhase.STATS),
    ...phase(PluginPhase.UNSPECIFIED_PHASE),
  ];
}

/**
 * A filter that refers to the plugin by ECDS (Istio's config_discovery):
 * named as the resource, with the types the resource may have: the Wasm
 * filter, or the RBAC filter that stands in for a module that cannot be
 * loaded (./wasm-config.ts).
 */
function discoveredFilter(plugin: TypedConfig<WasmPlugin>, chain: FilterChainType) {
  return {
    name: wasmPluginResourceName(plugin.ref),
    configDiscovery: {
      configSource: EXTENSION_CONFIG_SOURCE,
      typeUrls: chain === "http" ? HTTP_WASM_TYPE_URLS : NETWORK_WASM_TYPE_URLS,
    },
  };
}
