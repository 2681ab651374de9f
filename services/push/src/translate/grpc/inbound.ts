import { type ConfigRef, packAny } from "@sextant/proto";
import { HttpConnectionManager, HttpRBAC, Listener, Router, TypeUrl } from "@sextant/proto/envoy";
import type { RBAC } from "@sextant/proto/gen/envoy/config/rbac/v3/rbac";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { type MtlsMode, TLS_MODE_LABEL } from "../../model/security.js";
import type { GeneratedResource } from "../../model/types.js";
import { parseInboundListenerName } from "../names.js";
import { buildRbac, grpcAuthorizationPolicies, RBAC_DENY_FILTER_NAME, RBAC_FILTER_NAME } from "./rbac.js";
import { downstreamMtlsSocket } from "./tls.js";

/** The router filter, last in every HCM. */
export const ROUTER_FILTER_NAME = "envoy.filters.http.router";

/**
 * The mode a gRPC server's port gets, as istiod's grpcgen decides it: the
 * composed PeerAuthentication's mode for the port (port-level over
 * workload-wide); PERMISSIVE becomes STRICT on a workload labelled
 * `security.istio.io/tlsMode: istio` (its clients use mTLS) and DISABLE
 * otherwise, because a gRPC server cannot accept both on one port:
 * grpc-js-xds matches filter chains on addresses and ports only (no
 * transport_protocol other than "raw_buffer", no TLS inspector).
 */
export function inboundMtlsMode(
  push: PushContext,
  proxy: MeshProxy,
  port: number,
): { mode: "DISABLE" | "STRICT"; sources: readonly ConfigRef[] } {
  const merged = push.peerAuthenticationFor(proxy.namespace, proxy.labels);
  const configured: MtlsMode = merged.perPort.get(port) ?? merged.mode;
  if (configured !== "PERMISSIVE") return { mode: configured, sources: merged.sources };
  return { mode: proxy.labels[TLS_MODE_LABEL] === "istio" ? "STRICT" : "DISABLE", sources: merged.sources };
}

/**
 * The server listener a proxyless gRPC server (grpc-js-xds XdsServer) asks
 * for when it binds `<ip>:<port>`: named as asked, `address` exactly the
 * bound address (the server refuses any other), and one filter chain as
 * istiod's grpcgen builds it: `inbound-mtls` with a DownstreamTlsContext
 * requiring client certificates (STRICT), or `inbound-plaintext`; an HCM
 * (`inbound-hcm<suffix>`) with the inline route configuration "inbound"
 * (every path, non-forwarding: the server handles the call itself), the
 * DENY RBAC filter, the ALLOW RBAC filter, and the router.
 *
 * Unlike istiod, which answers only for a port some service of the workload
 * targets, every well-formed name gets its listener: istiod's answer for
 * another port is "does not exist", and a grpc-js-xds server then never
 * serves, whereas PeerAuthentication and AuthorizationPolicy select
 * workloads by labels, not by service, so they apply to any port alike.
 */
export function buildInboundListener(
  push: PushContext,
  proxy: MeshProxy,
  name: string,
): GeneratedResource | null {
  const address = parseInboundListenerName(name);
  if (!address) return null;
  const { mode, sources: mtlsSources } = inboundMtlsMode(push, proxy, address.port);
  const suffix = mode === "STRICT" ? "mtls" : "plaintext";
  const { filters, sources: authzSources } = httpFilters(push, proxy);
  const manager = HttpConnectionManager.fromPartial({
    // Not in istiod's form, and unused by gRPC, but needed: grpc-js-xds 1.14 skips a listener update
    // whose HCM bytes equal the current one's even when the transport socket changed (mTLS to
    // plaintext), and throws on the reverse; naming the mode here makes the bytes differ.
    statPrefix: `inbound-hcm${suffix}`,
    routeConfig: {
      name: "inbound",
      virtualHosts: [
        {
          // As istiod's grpcgen names it; Envoy's rules require a name.
          name: `inbound|http|${address.port}`,
          domains: ["*"],
          routes: [{ match: { prefix: "/" }, nonForwardingAction: {} }],
        },
      ],
    },
    httpFilters: filters,
  });
  const listener = Listener.fromPartial({
    name,
    address: { socketAddress: { address: address.host, portValue: address.port } },
    filterChains: [
      {
        name: `inbound-${suffix}`,
        filters: [
          {
            name: `inbound-hcm${suffix}`,
            typedConfig: packAny(TypeUrl.HttpConnectionManager, HttpConnectionManager, manager),
          },
        ],
        ...(mode === "STRICT" ? { transportSocket: downstreamMtlsSocket() } : {}),
      },
    ],
  });
  return {
    name,
    resource: packAny(TypeUrl.Listener, Listener, listener),
    sources: [...mtlsSources, ...authzSources],
  };
}

/**
 * The HCM's filters: DENY RBAC, ALLOW RBAC, router (istiod's order: a DENY
 * decision is final before ALLOW is asked). A DENY filter only when some
 * DENY rule exists; an ALLOW filter whenever an ALLOW policy applies, even
 * one with no rules, which allows nothing, as Istio documents (istiod's
 * grpcgen drops an ALLOW filter without rules, which would allow all).
 */
function httpFilters(push: PushContext, proxy: MeshProxy) {
  const { allow, deny } = grpcAuthorizationPolicies(push, proxy);
  const filters: Array<{ name: string; typedConfig: ReturnType<typeof packAny> }> = [];
  const rbacFilter = (filterName: string, rules: RBAC) => ({
    name: filterName,
    typedConfig: packAny(TypeUrl.RBAC, HttpRBAC, HttpRBAC.fromPartial({ rules })),
  });
  const denyRules = buildRbac("DENY", deny);
  if (Object.keys(denyRules.policies).length > 0) filters.push(rbacFilter(RBAC_DENY_FILTER_NAME, denyRules));
  if (allow.length > 0) filters.push(rbacFilter(RBAC_FILTER_NAME, buildRbac("ALLOW", allow)));
  filters.push({
    name: ROUTER_FILTER_NAME,
    typedConfig: packAny(TypeUrl.Router, Router, Router.fromPartial({})),
  });
  const sources: ConfigRef[] = [...deny, ...allow].map((policy) => policy.ref);
  return { filters, sources };
}
