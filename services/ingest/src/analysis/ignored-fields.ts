// Fields Sextant accepts, because Istio's API has them, but whose effect
// Sextant's proxies do not give: reported so that a user is not left to
// believe they work. The list is the "Accepted but ignored" section of this
// package's README and of @sextant/validation's.
import type { ConfigResource } from "@sextant/proto";
import type { TrafficPolicy } from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import { decodeStoredOfKind } from "@sextant/validation";

/** One accepted field that has no effect. */
export interface IgnoredField {
  readonly resource: ConfigResource;
  readonly field: string;
  readonly message: string;
}

/** Every field in resources that is accepted but not honoured. */
export function ignoredFields(resources: readonly ConfigResource[]): IgnoredField[] {
  const found: IgnoredField[] = [];
  for (const { resource, spec } of decodeStoredOfKind(resources, "RequestAuthentication")) {
    spec.jwtRules.forEach((rule, i) => {
      if (rule.spaceDelimitedClaims.length === 0) return;
      found.push({
        resource,
        field: `spec.jwtRules[${i}].spaceDelimitedClaims`,
        message:
          "spaceDelimitedClaims is accepted but has no effect: Sextant's proxies do not validate JWTs yet " +
          "(push builds no JWT authentication filter), so no claim is split for authorization",
      });
    });
  }
  for (const { resource, spec } of decodeStoredOfKind(resources, "DestinationRule")) {
    const policies: Array<[string, TrafficPolicy | undefined]> = [
      ["spec.trafficPolicy", spec.trafficPolicy],
      ...spec.subsets.map((subset, i): [string, TrafficPolicy | undefined] => [
        `spec.subsets[${i}].trafficPolicy`,
        subset.trafficPolicy,
      ]),
    ];
    for (const [path, policy] of policies) {
      if (policy?.proxyProtocol)
        found.push({
          resource,
          field: `${path}.proxyProtocol`,
          message:
            "proxyProtocol is accepted but has no effect: push does not wrap the upstream connection " +
            "in Envoy's PROXY protocol transport socket yet",
        });
      if (policy?.tunnel)
        found.push({
          resource,
          field: `${path}.tunnel`,
          message: "tunnel is accepted but has no effect: push builds no HTTP CONNECT/POST tunnelling yet",
        });
    }
  }
  for (const { resource, spec } of decodeStoredOfKind(resources, "VirtualService")) {
    spec.http.forEach((route, i) => {
      if (!route.retries?.retryRemoteLocalities) return;
      found.push({
        resource,
        field: `spec.http[${i}].retries.retryRemoteLocalities`,
        message:
          "retryRemoteLocalities is accepted but has no effect: push sets no retry priority " +
          "(envoy.retry_priorities.previous_priorities) yet",
      });
    });
  }
  for (const { resource, spec } of decodeStoredOfKind(resources, "Sidecar")) {
    if (!spec.outboundTrafficPolicy?.egressProxy) continue;
    found.push({
      resource,
      field: "spec.outboundTrafficPolicy.egressProxy",
      message:
        "egressProxy is accepted but has no effect: traffic to unknown destinations still goes to " +
        "PassthroughCluster, not to the egress proxy",
    });
  }
  for (const { resource, spec } of decodeStoredOfKind(resources, "Gateway")) {
    spec.servers.forEach((server, i) => {
      if ((server.tls?.tlsCertificates.length ?? 0) === 0) return;
      found.push({
        resource,
        field: `spec.servers[${i}].tls.tlsCertificates`,
        message:
          "tlsCertificates is accepted, but the Sextant agent serves no certificate files mounted in the " +
          "gateway (file-cert: secrets), so the server gets no certificate; use credentialName(s)",
      });
    });
  }
  return found;
}
