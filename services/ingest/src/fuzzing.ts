// What @sextant/fuzz feeds untrusted bytes to (fuzz/src/targets/).
export { prepareDocuments } from "./apply/prepare.js";
export { ingestSettings } from "./settings.js";
