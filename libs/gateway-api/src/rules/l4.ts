// TCPRoute and TLSRoute rules as Istio TCP and TLS routes (conversion.go's
// convertTCPRoute and convertTLSRoute).
import type { ConfigResource } from "@sextant/proto";
import {
  RouteDestination,
  type TCPRoute,
  TLSMatchAttributes,
  type TLSRoute,
} from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { type BackendRef, l4Destinations, type Referrer, weightSum } from "./backends.js";
import type { RuleContext, RuleResult, RuleTarget } from "./types.js";

/**
 * Where a rule without a nonzero-weight backend sends connections: a host
 * that resolves to no cluster, so they are refused (TCP has no 500; Istio
 * writes the same placeholder).
 */
const rejectAll = (): RouteDestination[] => [
  RouteDestination.fromPartial({
    destination: { host: "internal.cluster.local", subset: "zero-weight", port: { number: 65535 } },
    weight: 0,
  }),
];

function* l4Rules(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget,
): Generator<RuleResult<RouteDestination[]> & { rejected?: boolean }> {
  const referrer: Referrer = { kind: route.kind, namespace: route.namespace, target };
  for (const rule of (route.spec as { rules?: Array<{ backendRefs?: BackendRef[] }> }).rules ?? []) {
    if (weightSum(rule.backendRefs) === 0) {
      yield { route: rejectAll(), rejected: true };
      continue;
    }
    const { destinations, error } = l4Destinations(rule.backendRefs ?? [], referrer, ctx);
    yield destinations ? { route: destinations, ...(error ? { error } : {}) } : error ? { error } : {};
  }
}

export function* tcpRules(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget,
): Generator<RuleResult<TCPRoute>> {
  for (const { route: destinations, error } of l4Rules(route, ctx, target)) {
    yield {
      ...(destinations ? { route: { match: [], route: destinations } } : {}),
      ...(error ? { error } : {}),
    };
  }
}

/** The SNI match is the route's hostnames, or "*" without any (a mesh parent puts its own hosts there). */
export function* tlsRules(
  route: ConfigResource,
  ctx: RuleContext,
  target: RuleTarget,
): Generator<RuleResult<TLSRoute>> {
  const hostnames = (route.spec as { hostnames?: string[] }).hostnames ?? [];
  const sniHosts = hostnames.length > 0 ? hostnames : ["*"];
  for (const { route: destinations, error, rejected } of l4Rules(route, ctx, target)) {
    // The placeholder of a rule without backends has no match, as Istio writes it.
    const tls: TLSRoute | undefined = destinations && {
      match: rejected ? [] : [TLSMatchAttributes.fromPartial({ sniHosts })],
      route: destinations,
    };
    yield { ...(tls ? { route: tls } : {}), ...(error ? { error } : {}) };
  }
}
