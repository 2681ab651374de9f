import { type ConfigRefLike, configKey, hostMatches, resolveHost } from "@sextant/model";
import { type ConfigMessage, type ConfigResource, Severity } from "@sextant/proto";
import {
  type ClientTLSSettings,
  ClientTLSSettings_TLSmode,
  type TrafficPolicy,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { Destination } from "@sextant/proto/gen/istio/networking/v1alpha3/virtual_service";
import { decodeStoredOfKind } from "@sextant/validation";
import { analyzeEnvoyFilters } from "./envoy-filter-analyzers.js";
import { type AnalysisWorkload, analyzeGateways, type CredentialIndex } from "./gateway-analyzers.js";
import { ignoredFields } from "./ignored-fields.js";
import { analyzeTelemetries } from "./telemetry-analyzers.js";
import { analyzeWasmPlugins } from "./wasm-plugin-analyzers.js";

/**
 * Analysis message codes, after `istioctl analyze`. Istio's codes are used
 * where Istio has the same check, so users can look them up.
 */
export const AnalysisCodes = {
  /** A reference to a gateway, host, subset or (a Gateway's selector) workload that does not exist. */
  ReferencedResourceNotFound: "IST0101",
  /** Several VirtualServices bound to the mesh gateway claim one host. */
  ConflictingMeshGatewayVirtualServiceHosts: "IST0109",
  /** Gateways on one workload with servers on one port whose hosts overlap. */
  ConflictingGateways: "IST0145",
  /** A DestinationRule names a credentialName secret, which Sextant does not serve to sidecars yet. */
  CredentialNameNotServed: "SXT0002",
  /** A Gateway's credentialName names a Secret without a certificate and key, or, mutual, without a CA. */
  CredentialIncomplete: "SXT0003",
  /** A field Istio's API has and Sextant accepts, but whose effect Sextant's proxies do not give (ignored-fields.ts). */
  FieldIgnored: "SXT0004",
  /** A WasmPlugin's module would be downloaded (oci, https, http), which Sextant's agent does not do. */
  WasmModuleNotFetched: "SXT0030",
  /** A WasmPlugin field Sextant stores but does not honour (FAIL_RELOAD, pull secrets, proxyless clients). */
  WasmPluginIgnored: "SXT0031",
  /** Several Telemetries in one namespace select one workload. */
  ConflictingTelemetryWorkloadSelectors: "IST0159",
  /** Several Telemetries in one namespace have no selector. */
  MultipleTelemetriesWithoutWorkloadSelectors: "IST0160",
  /** A Telemetry setting Sextant stores but does not build (metrics, some tracing fields, non-Gateway targets). */
  TelemetryIgnored: "SXT0022",
} as const;

/** Everything analysis looks at. */
export interface AnalysisInput {
  readonly resources: readonly ConfigResource[];
  /** Hostnames in the service registry (sextant-services). */
  readonly registryHosts: ReadonlySet<string>;
  /** The registry's workloads (sextant-endpoints), which Gateway selectors pick. */
  readonly workloads: readonly AnalysisWorkload[];
  /** The Secrets named by credentialName that exist (sextant-credential-index). */
  readonly credentials: CredentialIndex;
  readonly domainSuffix: string;
}

/** Messages per resource, keyed by config key; resources without messages are absent. */
export type AnalysisResult = Map<string, ConfigMessage[]>;

const MESH_GATEWAY = "mesh";

/**
 * Runs every analyzer over a snapshot of the config, like `istioctl analyze`:
 * the checks that need more than one resource, which validation cannot make.
 */
export function analyze(input: AnalysisInput): AnalysisResult {
  const result: AnalysisResult = new Map();
  const report = (
    ref: ConfigRefLike,
    code: string,
    field: string,
    message: string,
    severity = Severity.SEVERITY_ERROR,
  ) => {
    const key = configKey(ref);
    const messages = result.get(key) ?? [];
    messages.push({ code, severity, field, message, origin: "analysis" });
    result.set(key, messages);
  };

  const virtualServices = decodeStoredOfKind(input.resources, "VirtualService");
  const destinationRules = decodeStoredOfKind(input.resources, "DestinationRule");
  const serviceEntries = decodeStoredOfKind(input.resources, "ServiceEntry");
  const gateways = new Set(
    input.resources.filter((r) => r.kind === "Gateway").map((r) => `${r.namespace}/${r.name}`),
  );
  const knownHosts = new Set(input.registryHosts);
  for (const { resource, spec } of serviceEntries) {
    for (const host of spec.hosts) knownHosts.add(resolveHost(host, resource.namespace, input.domainSuffix));
  }
  const subsetsByHost = new Map<string, Set<string>>();
  for (const { resource, spec } of destinationRules) {
    const host = resolveHost(spec.host, resource.namespace, input.domainSuffix);
    const subsets = subsetsByHost.get(host) ?? new Set<string>();
    for (const subset of spec.subsets) subsets.add(subset.name);
    subsetsByHost.set(host, subsets);
  }

  // VirtualService -> Gateway references.
  for (const { resource, spec } of virtualServices) {
    spec.gateways.forEach((gateway, index) => {
      if (gateway === MESH_GATEWAY) return;
      const ref = gatewayRef(gateway, resource.namespace);
      if (!gateways.has(ref)) {
        report(
          resource,
          AnalysisCodes.ReferencedResourceNotFound,
          `spec.gateways[${index}]`,
          `Referenced gateway not found: "${ref}"`,
        );
      }
    });
  }

  // Gateway -> its workloads and its credentials' Secrets, and Gateways contending for one port of a workload.
  const gatewayCodes = {
    selectorNotFound: AnalysisCodes.ReferencedResourceNotFound,
    credentialNotFound: AnalysisCodes.ReferencedResourceNotFound,
    credentialIncomplete: AnalysisCodes.CredentialIncomplete,
    conflictingServers: AnalysisCodes.ConflictingGateways,
  } as const;
  const gatewayFindings = analyzeGateways(
    decodeStoredOfKind(input.resources, "Gateway"),
    input.workloads,
    input.credentials,
  );
  for (const finding of gatewayFindings)
    report(finding.resource, gatewayCodes[finding.kind], finding.field, finding.message);

  // WasmPlugin: what Sextant accepts but does not run as Istio does.
  const wasmCodes = {
    moduleNotFetched: [AnalysisCodes.WasmModuleNotFetched, Severity.SEVERITY_WARNING],
    ignored: [AnalysisCodes.WasmPluginIgnored, Severity.SEVERITY_INFO],
  } as const;
  for (const finding of analyzeWasmPlugins(decodeStoredOfKind(input.resources, "WasmPlugin"))) {
    const [code, severity] = wasmCodes[finding.kind];
    report(finding.resource, code, finding.field, finding.message, severity);
  }

  // Telemetry: undefined precedence, and what Sextant accepts but ignores.
  const telemetryCodes = {
    multipleNamespaceWide: [
      AnalysisCodes.MultipleTelemetriesWithoutWorkloadSelectors,
      Severity.SEVERITY_ERROR,
    ],
    conflictingSelectors: [AnalysisCodes.ConflictingTelemetryWorkloadSelectors, Severity.SEVERITY_ERROR],
    ignored: [AnalysisCodes.TelemetryIgnored, Severity.SEVERITY_INFO],
  } as const;
  for (const finding of analyzeTelemetries(
    decodeStoredOfKind(input.resources, "Telemetry"),
    input.workloads,
  )) {
    const [code, severity] = telemetryCodes[finding.kind];
    report(finding.resource, code, finding.field, finding.message, severity);
  }

  // VirtualService route -> DestinationRule subset references.
  for (const { resource, spec } of virtualServices) {
    const check = (destination: Destination | undefined, field: string) => {
      if (!destination?.subset) return;
      const host = resolveHost(destination.host, resource.namespace, input.domainSuffix);
      const defined = [...subsetsByHost].some(
        ([pattern, subsets]) => hostMatches(pattern, host) && subsets.has(destination.subset),
      );
      if (!defined) {
        report(
          resource,
          AnalysisCodes.ReferencedResourceNotFound,
          `${field}.destination.subset`,
          `Referenced host+subset in DestinationRule not found: "${host}+${destination.subset}"`,
        );
      }
    };
    for (const [section, routes] of [
      ["http", spec.http],
      ["tcp", spec.tcp],
      ["tls", spec.tls],
    ] as const) {
      routes.forEach((route, i) => {
        route.route.forEach((r, j) => {
          check(r.destination, `spec.${section}[${i}].route[${j}]`);
        });
      });
    }
  }

  // DestinationRule -> a known service.
  for (const { resource, spec } of destinationRules) {
    const host = resolveHost(spec.host, resource.namespace, input.domainSuffix);
    const known = [...knownHosts].some(
      (candidate) => hostMatches(host, candidate) || hostMatches(candidate, host),
    );
    if (!known) {
      report(
        resource,
        AnalysisCodes.ReferencedResourceNotFound,
        "spec.host",
        `Referenced host not found: "${host}"`,
      );
    }
  }

  // DestinationRule credentialName without workloadSelector: istiod (and push) give sidecars no TLS for it.
  // With one, sidecars' clusters name `kubernetes://<name>` and push's SDS serves it: nothing to say.
  for (const { resource, spec } of destinationRules) {
    if (Object.keys(spec.workloadSelector?.matchLabels ?? {}).length > 0) continue;
    const message =
      "credentialName on a DestinationRule without workloadSelector is ignored for sidecars, as in Istio: " +
      "the cluster gets no TLS; add a workloadSelector (gateways still use it)";
    for (const field of credentialNameFields(spec.trafficPolicy, spec.subsets))
      report(resource, AnalysisCodes.CredentialNameNotServed, field, message, Severity.SEVERITY_WARNING);
  }

  for (const { resource, field, message } of ignoredFields(input.resources))
    report(resource, AnalysisCodes.FieldIgnored, field, message, Severity.SEVERITY_WARNING);

  // Two VirtualServices bound to the mesh gateway claiming one host.
  const claims = new Map<string, Array<{ resource: ConfigResource; index: number }>>();
  for (const { resource, spec } of virtualServices) {
    if (spec.gateways.length > 0 && !spec.gateways.includes(MESH_GATEWAY)) continue;
    spec.hosts.forEach((host, index) => {
      const fqdn = resolveHost(host, resource.namespace, input.domainSuffix);
      claims.set(fqdn, [...(claims.get(fqdn) ?? []), { resource, index }]);
    });
  }
  for (const [host, claimants] of claims) {
    if (claimants.length < 2) continue;
    const names = claimants.map(({ resource }) => `${resource.namespace}/${resource.name}`).sort();
    for (const { resource, index } of claimants) {
      report(
        resource,
        AnalysisCodes.ConflictingMeshGatewayVirtualServiceHosts,
        `spec.hosts[${index}]`,
        `The VirtualServices ${names.join(", ")} bound to the mesh gateway all define host "${host}"; ` +
          "which one routes is undefined. Merge them into one VirtualService.",
      );
    }
  }

  // EnvoyFilter patches stored but never applied, and those Envoy always rejects.
  for (const finding of analyzeEnvoyFilters(decodeStoredOfKind(input.resources, "EnvoyFilter")))
    report(finding.resource, finding.code, finding.field, finding.message, Severity.SEVERITY_WARNING);
  return result;
}

/**
 * The SIMPLE and MUTUAL TLS settings of a DestinationRule that name a
 * secret (credentialName other than a `configmap://` CA, which Istio lets
 * anyone read): the field path of each credentialName.
 */
function credentialNameFields(
  trafficPolicy: TrafficPolicy | undefined,
  subsets: readonly { trafficPolicy?: TrafficPolicy | undefined }[],
): string[] {
  const found: string[] = [];
  const visit = (policy: TrafficPolicy | undefined, path: string) => {
    const check = (tls: ClientTLSSettings | undefined, field: string) => {
      if (!tls?.credentialName || tls.credentialName.startsWith("configmap://")) return;
      if (tls.mode !== ClientTLSSettings_TLSmode.SIMPLE && tls.mode !== ClientTLSSettings_TLSmode.MUTUAL)
        return;
      found.push(`${field}.tls.credentialName`);
    };
    check(policy?.tls, path);
    policy?.portLevelSettings.forEach((port, index) => {
      check(port.tls, `${path}.portLevelSettings[${index}]`);
    });
  };
  visit(trafficPolicy, "spec.trafficPolicy");
  subsets.forEach((subset, index) => {
    visit(subset.trafficPolicy, `spec.subsets[${index}].trafficPolicy`);
  });
  return found;
}

/** "name" (the VirtualService's namespace), "ns/name" or the older "name.ns.svc..." form. */
function gatewayRef(gateway: string, namespace: string): string {
  if (gateway.includes("/")) return gateway;
  const [name, gatewayNamespace] = gateway.split(".");
  return `${gateway.includes(".") ? gatewayNamespace : namespace}/${name}`;
}
