import type { JsonObject } from "./envoy-bootstrap.js";

/**
 * Istio's tag extraction for Envoy's stat names (envoy_bootstrap.json), in
 * its order; the extra tags go between mongo_prefix and cache.
 */
const TAGS_BEFORE_EXTRA: Array<[string, string]> = [
  ["cluster_name", "^cluster\\.((.+?(\\..+?\\.svc\\.cluster\\.local)?)\\.)"],
  ["tcp_prefix", "^tcp\\.((.*?)\\.)\\w+?$"],
  ["response_code", "_rq(_(\\d{3}))$"],
  ["response_code_class", "_rq(_(\\dxx))$"],
  [
    "http_conn_manager_listener_prefix",
    "^listener(?=\\.).*?\\.http\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)",
  ],
  ["http_conn_manager_prefix", "^http\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)"],
  ["listener_address", "^listener\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)"],
  ["mongo_prefix", "^mongo\\.(.+?)\\.(collection|cmd|cx_|op_|delays_|decoding_)(.*?)$"],
];
const TAGS_AFTER_EXTRA: Array<[string, string]> = [
  ["cache", "(cache\\.(.+?)\\.)"],
  ["component", "(component\\.(.+?)\\.)"],
  ["tag", "(tag\\.(.+?);\\.)"],
  ["wasm_filter", "(wasm_filter\\.(.+?)\\.)"],
  ["authz_enforce_result", "rbac(\\.(allowed|denied))"],
  ["authz_dry_run_action", "(\\.istio_dry_run_(allow|deny)_)"],
  ["authz_dry_run_result", "(\\.shadow_(allowed|denied))"],
];

/** An extra tag as Istio's stats filter writes it into stat names: `<tag>=.=<value>;.;`. */
const extraTagRegex = (tag: string) => `(${tag}=\\.=(.*?);\\.;)`;

/**
 * What Istio always keeps, whatever the pod asks: what readiness reads, the
 * agent's own xDS cluster, RBAC results, and per-route stats.
 */
const REQUIRED_PREFIXES = ["cluster_manager", "listener_manager", "server", "cluster.xds-grpc", "wasm"];
const REQUIRED_SUFFIXES = ["rbac.allowed", "rbac.denied", "shadow_allowed", "shadow_denied"];
const REQUIRED_REGEXES = ["vhost\\..*\\.route\\..*"];

/** Istio's per-pod stats annotations, read from the node's ANNOTATIONS. */
export const STATS_ANNOTATIONS = {
  extraStatTags: "sidecar.istio.io/extraStatTags",
  inclusionPrefixes: "sidecar.istio.io/statsInclusionPrefixes",
  inclusionSuffixes: "sidecar.istio.io/statsInclusionSuffixes",
  inclusionRegexps: "sidecar.istio.io/statsInclusionRegexps",
} as const;

/** What the stats configuration is built from: the node's annotations, ProxyConfig and IPs. */
export interface StatsInputs {
  annotations: Readonly<Record<string, string>>;
  proxyConfig: Readonly<Record<string, unknown>>;
  instanceIps: readonly string[];
}

const strings = (value: unknown): string[] | undefined =>
  Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : undefined;
const commaList = (value: string | undefined) => (value ?? "").split(",").filter((item) => item !== "");

/**
 * One inclusion list as Istio builds it: the annotation's entries when it is
 * set, else ProxyConfig.proxyStatsMatcher's (never both), then the required
 * ones; `{pod_ip}` becomes each of the pod's IPs (for inbound `http.{pod_ip}_`).
 */
function inclusion(
  annotation: string | undefined,
  fromConfig: string[] | undefined,
  required: string[],
  ips: readonly string[],
) {
  const chosen = annotation ? commaList(annotation) : (fromConfig ?? []);
  return [...chosen, ...required].flatMap((pattern) =>
    pattern.includes("{pod_ip}") ? ips.map((ip) => pattern.replaceAll("{pod_ip}", ip)) : [pattern],
  );
}

/**
 * Envoy's stats_config for a sidecar, as Istio's bootstrap builds it
 * (pkg/bootstrap getStatsOptions and envoy_bootstrap.json): Istio's tag
 * extractors plus the extra tags of ProxyConfig.extraStatTags and the
 * `sidecar.istio.io/extraStatTags` annotation, and a matcher that keeps
 * Istio's metrics, what readiness and RBAC need, and what the pod's
 * annotations (or its ProxyConfig.proxyStatsMatcher) add. Without a matcher
 * every stat of every cluster is kept, which is what makes large meshes'
 * sidecars heavy.
 */
export function statsConfig(inputs: StatsInputs): JsonObject {
  const { annotations, proxyConfig, instanceIps } = inputs;
  const extraTags = [
    ...new Set([
      ...(strings(proxyConfig.extraStatTags) ?? []).filter((tag) => tag !== ""),
      ...commaList(annotations[STATS_ANNOTATIONS.extraStatTags]),
    ]),
  ];
  const matcher = (proxyConfig.proxyStatsMatcher ?? {}) as Record<string, unknown>;
  const prefixes = inclusion(
    annotations[STATS_ANNOTATIONS.inclusionPrefixes],
    strings(matcher.inclusionPrefixes),
    REQUIRED_PREFIXES,
    instanceIps,
  );
  const suffixes = inclusion(
    annotations[STATS_ANNOTATIONS.inclusionSuffixes],
    strings(matcher.inclusionSuffixes),
    REQUIRED_SUFFIXES,
    instanceIps,
  );
  const regexes = inclusion(
    annotations[STATS_ANNOTATIONS.inclusionRegexps],
    strings(matcher.inclusionRegexps),
    REQUIRED_REGEXES,
    instanceIps,
  );
  const tags: Array<[string, string]> = [
    ...TAGS_BEFORE_EXTRA,
    ...extraTags.map((tag): [string, string] => [tag, extraTagRegex(tag)]),
    ...TAGS_AFTER_EXTRA,
  ];
  return {
    use_all_default_tags: false,
    stats_tags: tags.map(([tag_name, regex]) => ({ tag_name, regex })),
    stats_matcher: {
      inclusion_list: {
        // Istio's order: its standard metrics, the lists, then istio_build and Istio's own.
        patterns: [
          { prefix: "reporter=" },
          ...prefixes.map((prefix) => ({ prefix })),
          ...suffixes.map((suffix) => ({ suffix })),
          ...regexes.map((regex) => ({ safe_regex: { regex } })),
          { prefix: "component" },
          { prefix: "istio" },
        ],
      },
    },
  };
}
