export { convertGatewayApi, ISTIO_CONTROLLER, SEXTANT_CONTROLLER } from "./convert.js";
export { type CrossNamespaceReference, ReferenceGrants } from "./references.js";
export type * from "./types.js";
