/** Why a proven identity may not register into a WorkloadGroup. */
type RegistrationMismatch = "namespace" | "service_account";

/**
 * Istio's rule for workload auto-registration, which push applies before
 * publishing a registration and discovery again before writing the
 * WorkloadEntry: the identity a proxy proved (its certificate's SPIFFE
 * namespace and service account) must be the group's namespace, and the
 * group template's service account when the template names one. Otherwise
 * any workload could make itself an endpoint of another team's service.
 * Returns the mismatch with a message for the log, or undefined if the
 * identity may register.
 */
export function registrationIdentityMismatch(
  identity: { readonly namespace: string; readonly serviceAccount: string },
  group: { readonly namespace: string; readonly name: string; readonly serviceAccount?: string | undefined },
): { reason: RegistrationMismatch; message: string } | undefined {
  if (identity.namespace !== group.namespace)
    return {
      reason: "namespace",
      message: `the identity's namespace "${identity.namespace}" is not the WorkloadGroup ${group.namespace}/${group.name}'s`,
    };
  if (group.serviceAccount && identity.serviceAccount !== group.serviceAccount)
    return {
      reason: "service_account",
      message: `the identity's service account "${identity.serviceAccount}" is not "${group.serviceAccount}", which the WorkloadGroup ${group.namespace}/${group.name}'s template names`,
    };
  return undefined;
}
