// What @sextant/fuzz feeds untrusted bytes to (fuzz/src/targets/).
export { CsrError, checkCsr } from "./pki/csr.js";
export { caSettings } from "./settings.js";
