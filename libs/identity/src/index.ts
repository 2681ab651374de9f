/**
 * @sextant/identity: mesh workload identity, shared by the agent, push and
 * the tests: SPIFFE ids, the CA client with rotation (WorkloadIdentity),
 * trust bundle sources, and grpc-js mTLS credentials that follow both.
 */

export { type BusTrustBundleSourceOptions, busTrustBundleSource } from "./bus-trust-source.js";
export { type CaTrustBundleSourceOptions, caTrustBundleSource } from "./ca-trust-source.js";
export {
  callerSpiffeId,
  identityCertificateProvider,
  mtlsChannelCredentials,
  mtlsServerCredentials,
} from "./credentials.js";
export { mergeRoots, rootsOfBundle } from "./roots.js";
export {
  DEFAULT_GRACE_PERIOD_RATIO,
  DEFAULT_GRACE_PERIOD_RATIO_JITTER,
  MIN_ROTATION_DELAY_MS,
  type RotationPolicy,
  rotationDelayMs,
} from "./rotation.js";
export { type IdentitySettings, identityOptions, readCaRootFile, readTokenFile } from "./settings.js";
export { formatSpiffeId, parseSpiffeId, spiffeIdOfPeer } from "./spiffe.js";
export type { TrustBundleSource } from "./trust-source.js";
export type { IdentitySnapshot, IdentitySource, SpiffeId, WorkloadCertificate } from "./types.js";
export { WorkloadIdentity, type WorkloadIdentityOptions } from "./workload-identity.js";
export { x509 } from "./x509.js";
