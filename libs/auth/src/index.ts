/**
 * @sextant/auth: bearer-token authentication and authorization of Sextant's
 * HTTP APIs (ingest's config API, the debug endpoints).
 */
export { type AccessRequest, type Decision, describeAccess, type Verb } from "./access.js";
export { AuthUnavailableError, type Identity } from "./authenticator.js";
export { ANONYMOUS, type AuthChain, type AuthFailureReason, type AuthOutcome, type Caller } from "./chain.js";
export { debugRoute } from "./debug-route.js";
export { DEBUG_RESOURCE } from "./kubernetes.js";
export { type ApiAuth, authSettings, checkAuthSettings, createApiAuth } from "./settings.js";
export { tokenSha256 } from "./token-file.js";
