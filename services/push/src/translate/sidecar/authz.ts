import { type ConfigRef, packAny } from "@sextant/proto";
import { HttpExtAuthz, HttpRBAC, NetworkExtAuthz, NetworkRBAC, TypeUrl } from "@sextant/proto/envoy";
import { ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import type { GrpcService } from "@sextant/proto/gen/envoy/config/core/v3/grpc_service";
import type { Filter } from "@sextant/proto/gen/envoy/config/listener/v3/listener_components";
import { RBAC_Action, type RBAC as RbacRules } from "@sextant/proto/gen/envoy/config/rbac/v3/rbac";
import type { HttpFilter } from "@sextant/proto/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager";
import type { ListStringMatcher } from "@sextant/proto/gen/envoy/type/matcher/v3/string";
import type { AuthorizationPolicy } from "@sextant/proto/gen/istio/security/v1beta1/authorization";
import type { ExtensionProvider } from "../../model/mesh-config.js";
import type { MeshProxy } from "../../model/proxy.js";
import type { PushContext } from "../../model/push-context.js";
import { isDryRun } from "../../model/security.js";
import type { TypedConfig } from "../../model/types.js";
import { lookupCluster } from "../common/lookup-cluster.js";
import { buildRbac, RBAC_FILTER_NAME } from "../common/rbac.js";
import { NETWORK_RBAC_FILTER_NAME } from "./filters.js";

// Names and prefixes of Istio's authz builder (pilot/pkg/security/authz).
const HTTP_EXT_AUTHZ_FILTER_NAME = "envoy.filters.http.ext_authz";
const NETWORK_EXT_AUTHZ_FILTER_NAME = "envoy.filters.network.ext_authz";
const TCP_STAT_PREFIX = "tcp.";
const DRY_RUN_ALLOW_PREFIX = "istio_dry_run_allow_";
const DRY_RUN_DENY_PREFIX = "istio_dry_run_deny_";
/** The shadow-rule prefix of the RBAC filter before ext_authz; its effective policy id is what ext_authz reads. */
const EXT_AUTHZ_SHADOW_PREFIX = "istio_ext_authz_";
const EXT_AUTHZ_MATCH_PREFIX = "istio-ext-authz";
const BAD_CUSTOM_SUFFIX = "-deny-due-to-bad-CUSTOM-action";

type Policies = readonly TypedConfig<AuthorizationPolicy>[];

/** Istio's RBAC policy names on sidecars: `ns[<ns>]-policy[<name>]-rule[<index>]`, CUSTOM ones with the provider's prefix. */
const policyNameWithPrefix = (prefix: string) => (namespace: string, name: string, index: number) =>
  `${prefix}ns[${namespace}]-policy[${name}]-rule[${index}]`;
const istioPolicyName = policyNameWithPrefix("");

/**
 * The authorization HTTP filters of a sidecar's inbound HCM, in Istio's
 * order: the CUSTOM filters (per provider: an RBAC filter whose shadow
 * rules mark the requests a CUSTOM policy matches, then ext_authz, which
 * runs only for marked requests), then the RBAC filters AUDIT, DENY, ALLOW.
 */
export function authzHttpFilters(push: PushContext, proxy: MeshProxy): HttpFilter[] {
  const { custom, local } = authzHttpFilterGroups(push, proxy);
  return [...custom, ...local];
}

/** The same filters in Istio's two groups (CUSTOM; AUDIT, DENY, ALLOW), between which Wasm plugins go. */
export function authzHttpFilterGroups(push: PushContext, proxy: MeshProxy): AuthzGroups<HttpFilter> {
  const policies = push.authorizationPoliciesFor(proxy.namespace, proxy.labels);
  const custom: HttpFilter[] = [];
  for (const { rbac, extAuthz } of customFilters(push, policies.custom, false)) {
    custom.push(httpRbacFilter(rbac));
    if (extAuthz) custom.push(httpFilter(HTTP_EXT_AUTHZ_FILTER_NAME, extAuthzHttp(extAuthz)));
  }
  return { custom, local: localRuleSets(policies, false).map(httpRbacFilter) };
}

/** Authorization filters split as Istio's builders make them: CUSTOM, then the local policies. */
export interface AuthzGroups<F> {
  custom: F[];
  local: F[];
}

/** The authorization network filters of a TCP chain, in the same order (stat prefix `tcp.`). */
export function authzNetworkFilters(push: PushContext, proxy: MeshProxy): Filter[] {
  const { custom, local } = authzNetworkFilterGroups(push, proxy);
  return [...custom, ...local];
}

/** The network filters in Istio's two groups (CUSTOM; AUDIT, DENY, ALLOW). */
export function authzNetworkFilterGroups(push: PushContext, proxy: MeshProxy): AuthzGroups<Filter> {
  const policies = push.authorizationPoliciesFor(proxy.namespace, proxy.labels);
  const custom: Filter[] = [];
  for (const { rbac, extAuthz } of customFilters(push, policies.custom, true)) {
    custom.push(networkRbacFilter(rbac));
    if (extAuthz) custom.push(extAuthzNetwork(extAuthz));
  }
  return { custom, local: localRuleSets(policies, true).map(networkRbacFilter) };
}

/** The AuthorizationPolicies the inbound listener is built from (for NACK tracing). */
export function authzSources(push: PushContext, proxy: MeshProxy): ConfigRef[] {
  const { custom, audit, deny, allow } = push.authorizationPoliciesFor(proxy.namespace, proxy.labels);
  return [...custom, ...audit, ...deny, ...allow].map((policy) => policy.ref);
}

/** One RBAC filter's config: enforced rules, shadow rules and the shadow rules' stat prefix. */
interface RbacFilterConfig {
  rules?: RbacRules;
  shadowRules?: RbacRules;
  shadowRulesStatPrefix: string;
}

/**
 * AUDIT (action LOG), DENY, ALLOW, as Istio's builder makes them: enforced
 * rules from the policies without `istio.io/dry-run: "true"`, shadow rules
 * from those with it, never enforced (Envoy only counts and logs what they
 * would decide, under `istio_dry_run_allow_` / `istio_dry_run_deny_`). An
 * enforced DENY or AUDIT set only with rules; an enforced ALLOW set
 * whenever an ALLOW policy applies (one without rules allows nothing).
 */
function localRuleSets(
  policies: { audit: Policies; deny: Policies; allow: Policies },
  tcp: boolean,
): RbacFilterConfig[] {
  const options = { policyName: istioPolicyName, tcp };
  const sets: RbacFilterConfig[] = [];
  for (const action of ["AUDIT", "DENY", "ALLOW"] as const) {
    const all = action === "AUDIT" ? policies.audit : action === "DENY" ? policies.deny : policies.allow;
    const enforced = all.filter((policy) => !isDryRun(policy));
    const dryRun = all.filter(isDryRun);
    const rules = buildRbac(action, enforced, options);
    const keepRules = action === "ALLOW" ? enforced.length > 0 : Object.keys(rules.policies).length > 0;
    if (!keepRules && dryRun.length === 0) continue;
    sets.push({
      ...(keepRules ? { rules } : {}),
      ...(dryRun.length > 0 ? { shadowRules: buildRbac(action, dryRun, options) } : {}),
      // Istio's prefix follows the shadow rules' action: allow (also when there are none), deny, none for AUDIT.
      shadowRulesStatPrefix:
        dryRun.length === 0 || action === "ALLOW"
          ? DRY_RUN_ALLOW_PREFIX
          : action === "DENY"
            ? DRY_RUN_DENY_PREFIX
            : "",
    });
  }
  return sets;
}

/** A CUSTOM provider's filters: the marking (or, when it cannot run, denying) RBAC filter, and its ext_authz. */
interface CustomFilters {
  rbac: RbacFilterConfig;
  extAuthz?: ResolvedExtAuthz;
}

/**
 * The CUSTOM filters, per provider (sorted by name), as Istio's builder
 * makes them. Each provider's rules are built as DENY rules (an attribute
 * the filter cannot evaluate widens the match, so ext_authz is asked more,
 * never less), named with the prefix `istio-ext-authz-<provider>-`, and
 * set as shadow rules: Envoy records the matching policy's name as dynamic
 * metadata `istio_ext_authz_shadow_effective_policy_id`, and ext_authz runs
 * only when that starts with the provider's prefix.
 *
 * Fails closed: a provider that is not in MeshConfig's extensionProviders,
 * is invalid, or names a service the registry does not have turns its
 * policies into an enforced DENY of what they match (the policy names with
 * `-deny-due-to-bad-CUSTOM-action`), as do several providers on one
 * workload (Istio allows that only behind
 * PILOT_ENABLE_MULTIPLE_CUSTOM_AUTHZ_PROVIDERS, off by default). On a TCP
 * chain an HTTP provider cannot run and is skipped, as Istio skips it.
 *
 * Dry-run CUSTOM policies are left out: ext_authz has no dry-run mode, and
 * the marking RBAC filter's shadow rules are taken. (Current istiod puts them
 * in that filter's enforced rules, which denies what they match.)
 */
function customFilters(push: PushContext, custom: Policies, tcp: boolean): CustomFilters[] {
  const byProvider = new Map<string, TypedConfig<AuthorizationPolicy>[]>();
  for (const policy of custom) {
    if (isDryRun(policy)) continue;
    const provider = policy.spec.provider?.name ?? "";
    byProvider.set(provider, [...(byProvider.get(provider) ?? []), policy]);
  }
  const providers = [...byProvider.keys()].sort();
  const out: CustomFilters[] = [];
  for (const provider of providers) {
    const policies = byProvider.get(provider) ?? [];
    const prefix = provider ? `${EXT_AUTHZ_MATCH_PREFIX}-${provider}-` : `${EXT_AUTHZ_MATCH_PREFIX}-`;
    const rules = buildRbac("DENY", policies, { policyName: policyNameWithPrefix(prefix), tcp });
    const resolved =
      providers.length > 1
        ? { error: "several CUSTOM providers on one workload" }
        : resolveProvider(push, provider);
    if ("error" in resolved) {
      out.push({ rbac: { rules: denyMatched(rules), shadowRulesStatPrefix: "" } });
      continue;
    }
    if (tcp && resolved.provider.kind === "http") continue;
    out.push({
      rbac: { shadowRules: rules, shadowRulesStatPrefix: EXT_AUTHZ_SHADOW_PREFIX },
      extAuthz: { ...resolved, filterPrefix: `${EXT_AUTHZ_MATCH_PREFIX}-${provider}` },
    });
  }
  return out;
}

/** Istio's getBadCustomDenyRules: the same policies, enforced as DENY, names suffixed. */
function denyMatched(rules: RbacRules): RbacRules {
  return {
    action: RBAC_Action.DENY,
    policies: Object.fromEntries(
      Object.entries(rules.policies).map(([name, policy]) => [name + BAD_CUSTOM_SUFFIX, policy]),
    ),
  } as RbacRules;
}

interface ResolvedProvider {
  provider: ExtensionProvider;
  hostname: string;
  cluster: string;
}

interface ResolvedExtAuthz extends ResolvedProvider {
  /** The value prefix of the effective-policy metadata that enables this ext_authz. */
  filterPrefix: string;
}

/**
 * The provider a CUSTOM policy names, and its service's cluster
 * `outbound|<port>||<hostname>`, as Istio's LookupCluster finds it:
 * `<namespace>/<hostname>` or a hostname the registry has.
 */
function resolveProvider(push: PushContext, name: string): ResolvedProvider | { error: string } {
  const provider = push.meshConfig.extensionProviders.find((candidate) => candidate.name === name);
  if (!provider) return { error: `no extension provider ${JSON.stringify(name)}` };
  if (provider.errors.length > 0) return { error: provider.errors.join("; ") };
  const found = lookupCluster(push, provider.service, provider.port);
  return "error" in found ? found : { provider, ...found };
}

/** The metadata ext_authz checks: the RBAC filter's effective shadow policy id starts with the provider's prefix. */
function filterEnabledMetadata(rbacFilter: string, prefix: string) {
  return {
    filter: rbacFilter,
    path: [{ key: `${EXT_AUTHZ_SHADOW_PREFIX}shadow_effective_policy_id` }],
    value: { stringMatch: { prefix, ignoreCase: false } },
    invert: false,
  };
}

/** Istio's header lists: "x*" a prefix, "*x" a suffix, else exact, all case-insensitive. */
function headerMatchers(headers: readonly string[]): ListStringMatcher | undefined {
  if (headers.length === 0) return undefined;
  return {
    patterns: headers.map((header) =>
      header.startsWith("*")
        ? { suffix: header.slice(1), ignoreCase: true }
        : header.endsWith("*")
          ? { prefix: header.slice(0, -1), ignoreCase: true }
          : { exact: header, ignoreCase: true },
    ),
  } as ListStringMatcher;
}

function grpcService(resolved: ResolvedExtAuthz): GrpcService {
  return {
    envoyGrpc: { clusterName: resolved.cluster, authority: resolved.hostname },
    timeout: resolved.provider.timeout,
  } as GrpcService;
}

/** Istio's ext_authz HTTP filter for an envoyExtAuthzHttp or envoyExtAuthzGrpc provider. */
function extAuthzHttp(resolved: ResolvedExtAuthz) {
  const { provider } = resolved;
  const common = {
    ...(provider.statusOnError !== undefined ? { statusOnError: { code: provider.statusOnError } } : {}),
    failureModeAllow: provider.failOpen,
    transportApiVersion: ApiVersion.V3,
    filterEnabledMetadata: filterEnabledMetadata(RBAC_FILTER_NAME, resolved.filterPrefix),
    ...(provider.includeRequestBodyInCheck ? { withRequestBody: provider.includeRequestBodyInCheck } : {}),
  };
  if (provider.kind === "grpc")
    return packAny(
      TypeUrl.ExtAuthz,
      HttpExtAuthz,
      HttpExtAuthz.fromPartial({ ...common, grpcService: grpcService(resolved) }),
    );
  const additional = Object.keys(provider.includeAdditionalHeadersInCheck).sort();
  const responseHeaders =
    provider.headersToUpstreamOnAllow.length +
      provider.headersToDownstreamOnDeny.length +
      provider.headersToDownstreamOnAllow.length >
    0;
  const allowedHeaders = headerMatchers(provider.includeRequestHeadersInCheck);
  return packAny(
    TypeUrl.ExtAuthz,
    HttpExtAuthz,
    HttpExtAuthz.fromPartial({
      ...common,
      httpService: {
        pathPrefix: provider.pathPrefix,
        // Envoy requires the URI but calls the cluster; Istio writes http://<hostname>.
        serverUri: {
          uri: `http://${resolved.hostname}`,
          cluster: resolved.cluster,
          timeout: provider.timeout,
        },
        ...(additional.length > 0
          ? {
              authorizationRequest: {
                headersToAdd: additional.map((key) => ({
                  key,
                  value: provider.includeAdditionalHeadersInCheck[key],
                })),
              },
            }
          : {}),
        ...(responseHeaders
          ? {
              authorizationResponse: {
                allowedUpstreamHeaders: headerMatchers(provider.headersToUpstreamOnAllow),
                allowedClientHeaders: headerMatchers(provider.headersToDownstreamOnDeny),
                allowedClientHeadersOnSuccess: headerMatchers(provider.headersToDownstreamOnAllow),
              },
            }
          : {}),
      },
      ...(allowedHeaders ? { allowedHeaders } : {}),
    } as never),
  );
}

/** Istio's network ext_authz filter (gRPC providers only). */
function extAuthzNetwork(resolved: ResolvedExtAuthz): Filter {
  return {
    name: NETWORK_EXT_AUTHZ_FILTER_NAME,
    typedConfig: packAny(
      TypeUrl.NetworkExtAuthz,
      NetworkExtAuthz,
      NetworkExtAuthz.fromPartial({
        statPrefix: TCP_STAT_PREFIX,
        failureModeAllow: resolved.provider.failOpen,
        transportApiVersion: ApiVersion.V3,
        grpcService: grpcService(resolved),
        filterEnabledMetadata: filterEnabledMetadata(NETWORK_RBAC_FILTER_NAME, resolved.filterPrefix),
      } as never),
    ),
  } as Filter;
}

function httpFilter(name: string, typedConfig: ReturnType<typeof packAny>): HttpFilter {
  return { name, typedConfig } as HttpFilter;
}

function httpRbacFilter(config: RbacFilterConfig): HttpFilter {
  return httpFilter(RBAC_FILTER_NAME, packAny(TypeUrl.RBAC, HttpRBAC, HttpRBAC.fromPartial(config)));
}

function networkRbacFilter(config: RbacFilterConfig): Filter {
  return {
    name: NETWORK_RBAC_FILTER_NAME,
    typedConfig: packAny(
      TypeUrl.NetworkRBAC,
      NetworkRBAC,
      NetworkRBAC.fromPartial({ ...config, statPrefix: TCP_STAT_PREFIX }),
    ),
  } as Filter;
}
