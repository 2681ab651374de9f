/**
 * The RBAC translation of AuthorizationPolicy, shared with the Envoy sidecar
 * generators (src/translate/common/rbac.ts); re-exported here for the gRPC generators.
 */
export { buildRbac, RBAC_DENY_FILTER_NAME, RBAC_FILTER_NAME } from "../common/rbac.js";
