// What @sextant/fuzz feeds untrusted bytes to (fuzz/src/targets/).
export { XdsCache } from "./cache/xds-cache.js";
export { PushContext } from "./model/push-context.js";
export { DiscoveryServer } from "./server/discovery-server.js";
export { XdsMetrics } from "./server/metrics.js";
export { pushSettings } from "./settings.js";
export { XDS_TYPES } from "./xds-types.js";
