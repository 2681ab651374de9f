import { formatSpiffeId } from "@sextant/identity";

/** The trust domain when none is configured (Istio's default, and TRUST_DOMAIN's). */
export const DEFAULT_TRUST_DOMAIN = "cluster.local";

/**
 * A workload's SPIFFE URI in Istio's form,
 * spiffe://<trustDomain>/ns/<namespace>/sa/<serviceAccount>, from
 * @sextant/identity's formatSpiffeId. That one throws for names that are not
 * SPIFFE path segments; here such an identity is written as is instead of
 * being dropped, because it goes into SAN lists, where one identity fewer
 * could leave the list empty, and an empty list accepts any certificate.
 * No CA issues a certificate with such a URI, so it only ever fails to match.
 */
export function spiffeUri(trustDomain: string, namespace: string, serviceAccount: string): string {
  try {
    return formatSpiffeId({ trustDomain, namespace, serviceAccount });
  } catch {
    return `spiffe://${trustDomain}/ns/${namespace}/sa/${serviceAccount}`;
  }
}
