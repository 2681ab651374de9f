// What @sextant/fuzz feeds untrusted bytes to (fuzz/src/targets/).
export { discoverySettings } from "./settings.js";
