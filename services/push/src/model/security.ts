import type { ConfigRef } from "@sextant/proto";
import {
  type AuthorizationPolicy,
  AuthorizationPolicy_Action,
} from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import {
  PeerAuthentication_MutualTLS_Mode as Mode,
  type PeerAuthentication,
  type PeerAuthentication_MutualTLS,
} from "@sextant/proto/gen/istio/security/v1beta1/peer_authentication";
import type { TypedConfig } from "./types.js";

/** Istio's root namespace: policies there apply to the whole mesh. */
export const DEFAULT_ROOT_NAMESPACE = "istio-system";

/** The mTLS mode a workload's inbound traffic gets (Istio's model.MutualTLSMode). */
export type MtlsMode = "DISABLE" | "PERMISSIVE" | "STRICT";

/** The PeerAuthentication that applies to one workload, composed as Istio composes it. */
export interface MergedPeerAuthentication {
  /** The workload-wide mode. */
  readonly mode: MtlsMode;
  /** Port-level modes of the workload-level policy, by workload (target) port. */
  readonly perPort: ReadonlyMap<number, MtlsMode>;
  /** The policies the result was built from: mesh, namespace and workload level, those that exist. */
  readonly sources: readonly ConfigRef[];
}

/**
 * The AuthorizationPolicies that apply to one workload, by action, each
 * list in Istio's order (root namespace first, then by name). Dry-run
 * policies are in the lists too: {@link isDryRun} tells them apart.
 */
export interface WorkloadAuthorizationPolicies {
  readonly allow: readonly TypedConfig<AuthorizationPolicy>[];
  readonly deny: readonly TypedConfig<AuthorizationPolicy>[];
  readonly audit: readonly TypedConfig<AuthorizationPolicy>[];
  readonly custom: readonly TypedConfig<AuthorizationPolicy>[];
}

/** The annotation that makes an AuthorizationPolicy dry-run: evaluated and logged, never enforced. */
export const DRY_RUN_ANNOTATION = "istio.io/dry-run";

/**
 * Istio's isDryRun: the annotation parsed as Go's strconv.ParseBool
 * ("1", "t", "T", "true", "TRUE", "True"); any other value, or none, is not
 * dry-run (Istio logs a value it cannot parse and enforces the policy).
 */
export function isDryRun(policy: TypedConfig<AuthorizationPolicy>): boolean {
  const value = policy.annotations?.[DRY_RUN_ANNOTATION];
  return value !== undefined && ["1", "t", "T", "true", "TRUE", "True"].includes(value);
}

/** The label istio-agent puts on workloads that have mesh certificates ("istio" means they take mTLS). */
export const TLS_MODE_LABEL = "security.istio.io/tlsMode";

/** A workload selector matches when every label it names has the workload's value; empty matches all. */
export function selectorMatches(
  matchLabels: Readonly<Record<string, string>> | undefined,
  labels: Readonly<Record<string, string>>,
): boolean {
  return Object.entries(matchLabels ?? {}).every(([key, value]) => labels[key] === value);
}

const hasSelector = (matchLabels: Readonly<Record<string, string>> | undefined) =>
  Object.keys(matchLabels ?? {}).length > 0;

/**
 * Istio's ComposePeerAuthentication for a workload in namespace with labels:
 * the workload-level policy (a selector that matches, not in the root
 * namespace) over the namespace-wide one over the mesh-wide one (no
 * selector, in the root namespace); an UNSET mode inherits from the level
 * above, and an UNSET port-level mode from the workload's. With no policy
 * at all, PERMISSIVE. Istio breaks ties in a level by creation time, which
 * ingest does not keep: here the first by namespace/name wins, as for the
 * other kinds. Port-level settings count only on a workload-level policy.
 */
export function composePeerAuthentication(
  policies: readonly TypedConfig<PeerAuthentication>[],
  rootNamespace: string,
  namespace: string,
  labels: Readonly<Record<string, string>>,
): MergedPeerAuthentication {
  let mesh: TypedConfig<PeerAuthentication> | undefined;
  let namespaceWide: TypedConfig<PeerAuthentication> | undefined;
  let workload: TypedConfig<PeerAuthentication> | undefined;
  for (const policy of policies) {
    const policyNamespace = policy.ref.namespace;
    if (policyNamespace !== namespace && policyNamespace !== rootNamespace) continue;
    const matchLabels = policy.spec.selector?.matchLabels;
    if (!hasSelector(matchLabels)) {
      if (policyNamespace === rootNamespace) mesh ??= policy;
      else namespaceWide ??= policy;
    } else if (policyNamespace !== rootNamespace && selectorMatches(matchLabels, labels)) {
      workload ??= policy;
    }
  }
  let mode: MtlsMode = "PERMISSIVE";
  for (const level of [mesh, namespaceWide, workload]) {
    const set = modeOf(level?.spec.mtls);
    if (set) mode = set;
  }
  const perPort = new Map<number, MtlsMode>();
  for (const [port, mtls] of Object.entries(workload?.spec.portLevelMtls ?? {}))
    perPort.set(Number(port), modeOf(mtls) ?? mode);
  const sources = [mesh, namespaceWide, workload].filter((c) => c !== undefined).map((c) => c.ref);
  return { mode, perPort, sources };
}

function modeOf(mtls: PeerAuthentication_MutualTLS | undefined): MtlsMode | undefined {
  switch (mtls?.mode) {
    case Mode.DISABLE:
      return "DISABLE";
    case Mode.PERMISSIVE:
      return "PERMISSIVE";
    case Mode.STRICT:
      return "STRICT";
    default:
      return undefined;
  }
}

/**
 * Istio's ListAuthorizationPolicies for a sidecar-like workload: the
 * policies of the root namespace and of the workload's namespace whose
 * selector is empty or matches its labels (a root-namespace selector
 * matches workloads of every namespace). Policies with targetRef(s) attach
 * to gateways and waypoints, never to a workload, so they are left out.
 */
export function authorizationPoliciesFor(
  policies: readonly TypedConfig<AuthorizationPolicy>[],
  rootNamespace: string,
  namespace: string,
  labels: Readonly<Record<string, string>>,
): WorkloadAuthorizationPolicies {
  const applicable = policies
    .filter((policy) => policy.ref.namespace === rootNamespace || policy.ref.namespace === namespace)
    .filter((policy) => !policy.spec.targetRef && policy.spec.targetRefs.length === 0)
    .filter((policy) => selectorMatches(policy.spec.selector?.matchLabels, labels))
    // The root namespace's first, then the workload's, each by name, as istiod lists them.
    .sort((a, b) => rank(a) - rank(b) || (a.ref.name < b.ref.name ? -1 : a.ref.name > b.ref.name ? 1 : 0));
  function rank(policy: TypedConfig<AuthorizationPolicy>) {
    return policy.ref.namespace === rootNamespace ? 0 : 1;
  }
  const withAction = (action: AuthorizationPolicy_Action) =>
    applicable.filter((policy) => policy.spec.action === action);
  return {
    allow: withAction(AuthorizationPolicy_Action.ALLOW),
    deny: withAction(AuthorizationPolicy_Action.DENY),
    audit: withAction(AuthorizationPolicy_Action.AUDIT),
    custom: withAction(AuthorizationPolicy_Action.CUSTOM),
  };
}
