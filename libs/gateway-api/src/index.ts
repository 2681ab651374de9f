export { convertGatewayApi, ISTIO_CONTROLLER, SEXTANT_CONTROLLER } from "./convert.js";
export { type CrossNamespaceReference, GATEWAY_GROUP, ReferenceGrants } from "./references.js";
export { ROUTE_SEMANTICS_ANNOTATION } from "./rules/index.js";
export type * from "./types.js";
