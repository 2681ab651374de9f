import type { AuthorizationPolicy } from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { isDryRun } from "../../model/security.js";
import type { TypedConfig } from "../../model/types.js";

/**
 * The RBAC translation of AuthorizationPolicy, shared with the Envoy sidecar
 * generators (src/translate/common/rbac.ts); re-exported here for the gRPC generators.
 */
export { buildRbac, RBAC_DENY_FILTER_NAME, RBAC_FILTER_NAME } from "../common/rbac.js";

/**
 * The policies a gRPC server's DENY and ALLOW RBAC filters are built from.
 * gRPC runs RBAC only (gRFC A41): no ext_authz, and no shadow rules
 * (grpc-js-xds reads `rules` alone). So:
 * - CUSTOM policies deny what they match: a server that cannot ask the
 *   authorization provider must not let those requests through (istiod's
 *   grpcgen drops CUSTOM policies, which lets them all through);
 * - dry-run (`istio.io/dry-run: "true"`) policies are left out: gRPC could
 *   only enforce them (istiod's grpcgen does enforce them);
 * - AUDIT policies are left out, as in grpcgen: gRPC's RBAC has no LOG action.
 */
export function grpcAuthorizationPolicies(
  push: PushContext,
  proxy: MeshProxy,
): { allow: TypedConfig<AuthorizationPolicy>[]; deny: TypedConfig<AuthorizationPolicy>[] } {
  const { allow, deny, custom } = push.authorizationPoliciesFor(proxy.namespace, proxy.labels);
  const enforced = (policies: readonly TypedConfig<AuthorizationPolicy>[]) =>
    policies.filter((policy) => !isDryRun(policy));
  return { allow: enforced(allow), deny: [...enforced(custom), ...enforced(deny)] };
}
