import { packAny } from "@sextant/proto";
import { TypedExtensionConfig, TypeUrl } from "@sextant/proto/envoy";
import { cacheKey } from "../../cache/xds-cache.js";
import type { GeneratedResource, WatchedNames } from "../../model/types.js";
import { wasmPluginsByName } from "../../model/wasm-plugin.js";
import type { GenerationContext } from "../generator.js";
import { wasmExtensionConfig } from "./wasm-config.js";

/**
 * ECDS (istiod's BuildExtensionConfiguration for WasmPlugins): the
 * TypedExtensionConfigs a proxy asks for by name, one per plugin its filters
 * refer to. A proxy gets only plugins of its own namespace or of the root
 * namespace; any other name, and a wildcard, get nothing. A resource
 * depends only on its plugin, so the cache key is its name and the config
 * version.
 */
export function generateExtensionConfigs(
  context: GenerationContext,
  watched: WatchedNames,
): GeneratedResource[] {
  if (watched === "*") return [];
  const { push, proxy, cache } = context;
  const plugins = wasmPluginsByName(push, proxy, watched);
  const resources: GeneratedResource[] = [];
  for (const [name, plugin] of [...plugins].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const resource = cache.get(cacheKey("ecds", name, push.configVersion), () => ({
      name,
      resource: packAny(TypeUrl.TypedExtensionConfig, TypedExtensionConfig, wasmExtensionConfig(plugin)),
      sources: [plugin.ref],
    }));
    if (resource) resources.push(resource);
  }
  return resources;
}
