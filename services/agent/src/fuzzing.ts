// What @sextant/fuzz feeds untrusted bytes to (fuzz/src/targets/).
export {
  bootstrapText,
  envoyBootstrapFromSettings,
  grpcBootstrapFromSettings,
} from "./bootstrap/from-settings.js";
export { SdsService } from "./sds/sds-service.js";
export { agentSettings } from "./settings.js";
export { PASSTHROUGH_ADS_SERVICE } from "./xds-proxy/xds-proxy.js";
export { xdsProxyRunner } from "./xds-proxy/xds-proxy-runner.js";
