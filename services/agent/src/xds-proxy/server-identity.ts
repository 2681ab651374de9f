import type { SpiffeId } from "@sextant/identity";
import type { ExpectedSpiffeId } from "../settings.js";

const format = (id: SpiffeId | ExpectedSpiffeId) =>
  `spiffe://${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;

/**
 * The check of push's serving certificate, for mtlsChannelCredentials: the
 * agent talks to push only if it presents exactly XDS_SERVER_SPIFFE_ID, so a
 * workload with a mesh certificate of its own cannot pose as the control
 * plane (a DNS name would not tell them apart: every mesh certificate is
 * signed by the same root). Returns why a server is refused, or undefined.
 */
export function acceptXdsServer(
  expected: ExpectedSpiffeId,
): (id: SpiffeId | undefined) => string | undefined {
  return (id) => {
    if (!id)
      return `push's certificate carries no SPIFFE identity; expected ${format(expected)} (XDS_SERVER_SPIFFE_ID)`;
    if (
      id.trustDomain === expected.trustDomain &&
      id.namespace === expected.namespace &&
      id.serviceAccount === expected.serviceAccount
    )
      return undefined;
    return `push presented ${format(id)}, but the agent accepts only ${format(expected)} (XDS_SERVER_SPIFFE_ID)`;
  };
}
