import type { ServerDuplexStream } from "@grpc/grpc-js";
import { formatSpiffeId, spiffeIdOfPeer } from "@sextant/identity";
import type { MeshProxy } from "../model/proxy.js";

/**
 * Istio's XDS_AUTH check for the mTLS port: the SPIFFE identity of the
 * client certificate must name the namespace the node claims, and its service
 * account when the node names one. Otherwise one workload could ask for (and
 * read) another's config. Returns why the stream is refused, or undefined.
 */
export function checkConnectionIdentity(
  stream: Pick<ServerDuplexStream<unknown, unknown>, "getAuthContext">,
  proxy: MeshProxy,
): string | undefined {
  const peer = spiffeIdOfPeer(stream.getAuthContext()?.sslPeerCertificate);
  if (!peer) return "authorization failed: the client certificate carries no SPIFFE identity";
  if (peer.namespace !== proxy.namespace)
    return `authorization failed: the certificate's identity ${formatSpiffeId(peer)} is in namespace "${peer.namespace}", but the node ${proxy.id} says namespace "${proxy.namespace}"`;
  if (proxy.serviceAccount && peer.serviceAccount !== proxy.serviceAccount)
    return `authorization failed: the certificate's identity ${formatSpiffeId(peer)} has service account "${peer.serviceAccount}", but the node ${proxy.id} says "${proxy.serviceAccount}"`;
  return undefined;
}
