export {
  CA_CERT_SUFFIX,
  credentialKey,
  credentialResourceName,
  destinationRuleCredentialNames,
  gatewayCredentialNames,
  KUBERNETES_SECRET_PREFIX,
  parseSecretResourceName,
  type SecretRef,
  tlsKeyPairProblem,
} from "./credentials.js";
export { type DnsEndpoint, type DnsService, headlessDnsNames } from "./dns.js";
export { DEFAULT_DOMAIN_SUFFIX, hostMatches, resolveHost } from "./hosts.js";
export { type ConfigRefLike, configKey, configKindFilter, describeRef, parseConfigKey } from "./keys.js";
export { registrationIdentityMismatch } from "./registration.js";
export {
  type ConfigTraceRecord,
  configTraceKey,
  type ProxyTrace,
  type ProxyTypeTrace,
  type PushTraceRecord,
  pushTraceFilter,
  pushTraceKey,
} from "./trace.js";
