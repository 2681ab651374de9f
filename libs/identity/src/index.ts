/**
 * @sextant/identity: mesh workload identity, shared by the agent, push and
 * the tests.
 */
export type { IdentitySnapshot, IdentitySource, SpiffeId, WorkloadCertificate } from "./types.js";
