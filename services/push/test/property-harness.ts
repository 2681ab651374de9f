// Runs one property case (test/arbitraries.ts): validates its config as
// ingest would, builds the push snapshot from its registry and config, runs
// every generator for its proxy subscribing as Envoy or gRPC does, and
// returns what the xDS checker and the snapshot-consistency check find.
// Shared by property.test.ts and the long-run script property-run.ts.

import { isIP } from "node:net";
import { configKey } from "@sextant/model";
import { type ConfigResource, EndpointShard, Resolution, Service } from "@sextant/proto";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";
import { decodeSpec, findKind, validateResource } from "@sextant/validation";
import type fc from "fast-check";
import { parse, parseAllDocuments, stringify } from "yaml";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import { selectorMatches } from "../src/model/security.js";
import type { GeneratedResource, WatchedNames } from "../src/model/types.js";
import type { GenerationContext } from "../src/translate/generator.js";
import { INBOUND_LISTENER_PREFIX, parseOutboundClusterName } from "../src/translate/names.js";
import { NAME_TABLE_TYPE_URL } from "../src/translate/sidecar/name-table.js";
import { XDS_TYPES } from "../src/xds-types.js";
import type { Resource, Scenario, Workload } from "./arbitraries.js";
import { type Codec, dumpAny, type GoldenType, TYPES } from "./golden-inputs.js";
import {
  type AcceptedMissing,
  followReferences,
  inconsistencies,
  type Subscription,
} from "./snapshot-consistency.js";
import { snapshotViolations } from "./xds-checks.js";

/** Why the case's config would not be accepted by ingest: `<kind> <ns>/<name>: <path>: <message>`; empty if it would. */
export function configProblems(scenario: Scenario): string[] {
  return [...scenario.registry.serviceEntries, ...scenario.config].flatMap((resource) =>
    validateResource(resource).errors.map(
      (e) =>
        `${resource.kind} ${resource.metadata.namespace}/${resource.metadata.name}: ${e.path}: ${e.message}`,
    ),
  );
}

/** The config as ingest stores it (labels and annotations kept: dry-run is an annotation). */
function storedConfig(resources: readonly Resource[]): Map<string, ConfigResource> {
  const config = new Map<string, ConfigResource>();
  for (const resource of resources) {
    const decoded = decodeSpec(resource.kind, resource.spec);
    if (decoded.errors.length > 0)
      throw new Error(`${resource.kind} ${resource.metadata.name} does not decode`);
    const stored: ConfigResource = {
      kind: resource.kind,
      apiVersion: resource.apiVersion,
      namespace: resource.metadata.namespace,
      name: resource.metadata.name,
      labels: {},
      annotations: { ...resource.metadata.annotations },
      generation: 1,
      revision: 0,
      spec: findKind(resource.kind)!.codec.toJSON(decoded.value) as Record<string, unknown>,
    };
    config.set(configKey(stored), stored);
  }
  return config;
}

/** The push snapshot of a case: registry as discovery writes it, config as ingest stores it. */
export function pushContextOf(scenario: Scenario): PushContext {
  const { registry } = scenario;
  return PushContext.build({
    config: storedConfig([...registry.serviceEntries, ...scenario.config]),
    services: new Map(registry.services.map((s) => [s.hostname, Service.fromJSON(s)])),
    endpointShards: new Map(
      registry.endpoints.map((shard) => [
        shard.hostname,
        {
          hostname: shard.hostname,
          endpoints: EndpointShard.fromJSON({
            endpoints: shard.endpoints.map((e) => ({ health: "HEALTH_STATUS_HEALTHY", ...e })),
          }).endpoints,
        },
      ]),
    ),
    domainSuffix: "cluster.local",
  });
}

/** The node a workload's proxy announces: the agent's Envoy bootstrap, or a proxyless gRPC client's. */
export function nodeOf(workload: Workload, kind: Scenario["kind"]) {
  const { namespace } = workload;
  return {
    id: `${kind === "router" ? "router" : "sidecar"}~${workload.ip}~${workload.pod}.${namespace}~${namespace}.svc.cluster.local`,
    cluster: `${workload.labels.app}.${namespace}`,
    locality: {
      region: workload.locality.region,
      zone: workload.locality.zone,
      subZone: workload.locality.subzone,
    },
    metadata: {
      ...(kind === "grpc" ? { GENERATOR: "grpc" } : {}),
      CLUSTER_ID: "Kubernetes",
      INSTANCE_IPS: workload.ip,
      LABELS: workload.labels,
      NAME: workload.pod,
      NAMESPACE: namespace,
      SERVICE_ACCOUNT: workload.serviceAccount,
    },
  };
}

/**
 * What a proxy subscribes to first. Envoy: every listener and cluster
 * (wildcard), then what they name. gRPC: by name only, a client listener
 * `<host>:<port>` per service port (the FQDN, and the short name for a
 * service of its own namespace, as a target `xds:///name:port` gives), and
 * a server listener for each port its own services deliver to it on.
 */
export function subscriptionOf(scenario: Scenario): Subscription {
  if (scenario.kind !== "grpc") return { listeners: "*", clusters: "*" };
  const workload = scenario.registry.workloads[scenario.proxy]!;
  const names = new Set<string>();
  for (const service of scenario.registry.services) {
    for (const port of service.ports) {
      names.add(`${service.hostname}:${port.number}`);
      if (service.registry === "kubernetes" && service.namespace === workload.namespace)
        names.add(`${service.name}:${port.number}`);
    }
    const selected =
      service.namespace === workload.namespace &&
      Object.keys(service.selector).length > 0 &&
      Object.entries(service.selector).every(([k, v]) => workload.labels[k] === v);
    if (selected) {
      for (const port of service.ports)
        names.add(`${INBOUND_LISTENER_PREFIX}0.0.0.0:${port.targetPort || port.number}`);
    }
  }
  return { listeners: names };
}

/**
 * The missing clusters a config mistake explains, which istiod sends as
 * written (a route to them fails its requests; ingest's analysis reports
 * IST0101): a destination host no service visible from the proxy's namespace
 * has (Istio completes only a short name without dots, so `name.namespace`
 * is such a host too), a port the service does not have, a subset
 * that the DestinationRule applying to the host in the proxy's namespace
 * does not define, and a subset of a DNS service that selects none of its
 * endpoints.
 */
function configMistakes(push: PushContext, namespace: string): AcceptedMissing {
  return (type, name) => {
    const cluster = type === "clusters" ? parseOutboundClusterName(name) : undefined;
    if (!cluster) return false;
    const service = push.serviceFor(cluster.host, namespace);
    if (!service?.ports.some((port) => port.number === cluster.port)) return true;
    if (!cluster.subset) return false;
    const rule = push.destinationRuleFor(cluster.host, namespace);
    const subset = rule?.spec.subsets.find((entry) => entry.name === cluster.subset);
    if (!subset) return true;
    // istiod's buildCluster gives no STRICT_DNS/LOGICAL_DNS cluster without endpoints, and its
    // routes name the subset cluster all the same.
    const dns =
      service.resolution === Resolution.RESOLUTION_DNS ||
      service.resolution === Resolution.RESOLUTION_DNS_ROUND_ROBIN;
    const endpoints = push.endpointsByHost.get(cluster.host) ?? [];
    return dns && !endpoints.some((endpoint) => selectorMatches(subset.labels, endpoint.labels));
  };
}

/** What one case produced and what is wrong with it. */
export interface CaseResult {
  /** Resources generated, by type. */
  counts: Record<GoldenType, number>;
  /** One line per problem: a checker violation, an inconsistency, or a generator that threw. */
  violations: string[];
}

/** Runs every generator for the case's proxy and checks the snapshot. */
export function checkScenario(scenario: Scenario, codecs: Readonly<Record<string, Codec>>): CaseResult {
  const push = pushContextOf(scenario);
  const proxy = parseProxy(nodeOf(scenario.registry.workloads[scenario.proxy]!, scenario.kind) as never);
  const context = { push, proxy, cache: new XdsCache() };
  const decode = (any: GeneratedResource["resource"]) => dumpAny(any, codecs, { emptyAnys: true });
  const subscription = subscriptionOf(scenario);
  const thrown: string[] = [];
  const generate = (type: GoldenType, names: WatchedNames): GeneratedResource[] => {
    const generator = XDS_TYPES.generator(proxy.kind, TYPES[type]);
    if (!generator) return [];
    try {
      return generator.generate(context, names);
    } catch (error) {
      thrown.push(`${type} generator threw: ${(error as Error).stack ?? error}`);
      return [];
    }
  };
  const snapshot = followReferences(subscription, generate, decode);
  const violations = [
    ...thrown,
    ...nameTableViolations(context),
    ...snapshotViolations(snapshot, { proxy: proxy.kind }),
    ...inconsistencies(snapshot, subscription, decode, configMistakes(push, proxy.namespace)),
  ];
  const counts = Object.fromEntries(
    Object.entries(snapshot).map(([type, resources]) => [type, resources.length]),
  ) as Record<GoldenType, number>;
  return { counts, violations };
}

/**
 * What the agent's DNS proxy could not use in the proxy's NDS table, asked
 * as an agent that captures DNS with auto-allocation asks: a name with a
 * `*` other than a leading `*.`, an absolute name, a name without
 * addresses, an address that is not an IP.
 */
function nameTableViolations(context: GenerationContext): string[] {
  const proxy = {
    ...context.proxy,
    metadata: { ...context.proxy.metadata, DNS_CAPTURE: "true", DNS_AUTO_ALLOCATE: "true" },
  };
  const generator = XDS_TYPES.generator(proxy.kind, NAME_TABLE_TYPE_URL);
  try {
    const resources = generator?.generate({ ...context, proxy }, "*") ?? [];
    return resources.flatMap(({ resource }) =>
      Object.entries(NameTable.decode(resource.value).table).flatMap(([name, info]) => [
        // A wildcard host with an address is a pattern the agent matches ("*." then a domain), as Istio's.
        ...(name.slice(name.startsWith("*.") ? 2 : 0).includes("*") || name.endsWith(".")
          ? [`nametable: name ${name} cannot be asked`]
          : []),
        ...(info.ips.length === 0 ? [`nametable: ${name} has no address`] : []),
        ...info.ips.filter((ip) => isIP(ip) === 0).map((ip) => `nametable: ${name} answers ${ip}, not an IP`),
      ]),
    );
  } catch (error) {
    return [`nametable generator threw: ${(error as Error).stack ?? error}`];
  }
}

/**
 * A case as YAML in the form of a sidecar golden input
 * (testdata/sidecar/<case>.in.yaml): its services, endpoints, the proxy's
 * pod and the config, so that a counter-example can become a golden case.
 */
export function scenarioYaml(scenario: Scenario): string {
  const { registry } = scenario;
  const workload = registry.workloads[scenario.proxy]!;
  const config = [...registry.serviceEntries, ...scenario.config]
    .map((r) => stringify(r).trimEnd())
    .join("\n---\n");
  return stringify(
    {
      proxyKind: scenario.kind,
      proxy: workload.pod,
      pods: {
        [workload.pod]: {
          ip: workload.ip,
          pod: workload.pod,
          namespace: workload.namespace,
          labels: workload.labels,
          region: workload.locality.region,
          zone: workload.locality.zone,
          subzone: workload.locality.subzone,
          serviceAccount: workload.serviceAccount,
        },
      },
      services: registry.services,
      endpoints: registry.endpoints,
      config: `${config}\n`,
    },
    { lineWidth: 0, aliasDuplicateObjects: false },
  );
}

/**
 * A failed run as a report: how to replay it (seed and path, for fast-check's
 * `seed`/`path` parameters or SEED/REPLAY_PATH of property-run.ts), the shrunk
 * case's violations, and the case as golden-input YAML.
 */
export function failureReport(
  details: fc.RunDetails<[Scenario]>,
  codecs: Readonly<Record<string, Codec>>,
): string {
  const scenario = details.counterexample?.[0];
  if (!scenario) return `property failed: ${String(details.errorInstance)}`;
  const problems = configProblems(scenario);
  const violations = problems.length > 0 ? problems : checkScenario(scenario, codecs).violations;
  return [
    `property failed after ${details.numRuns} case(s), shrunk ${details.numShrinks} time(s)`,
    `replay: SEED=${details.seed} REPLAY_PATH=${details.counterexamplePath} NUM_RUNS=1 pnpm --filter @sextant/push run property`,
    `${violations.length} ${problems.length > 0 ? "validation error(s)" : "violation(s)"} for a ${scenario.kind} proxy:`,
    ...violations.map((v) => `  ${v}`),
    "case (golden-input YAML):",
    scenarioYaml(scenario),
  ].join("\n");
}

/** A case back from {@link scenarioYaml} (a counter-example file, possibly minimised by hand). */
export function scenarioFromYaml(text: string): Scenario {
  const input = parse(text) as {
    proxyKind: Scenario["kind"];
    proxy: string;
    pods: Record<string, Omit<Workload, "locality"> & { region: string; zone: string; subzone?: string }>;
    services: Scenario["registry"]["services"];
    endpoints?: Scenario["registry"]["endpoints"];
    config?: string;
  };
  const resources = parseAllDocuments(input.config ?? "")
    .map((document) => document.toJS() as Resource | null)
    .filter((resource): resource is Resource => resource !== null);
  const { region, zone, subzone = "", ...pod } = input.pods[input.proxy]!;
  return {
    kind: input.proxyKind,
    proxy: 0,
    registry: {
      services: input.services,
      endpoints: input.endpoints ?? [],
      workloads: [{ ...pod, locality: { region, zone, subzone } }],
      serviceEntries: resources.filter((r) => r.kind === "ServiceEntry"),
    },
    config: resources.filter((r) => r.kind !== "ServiceEntry"),
  };
}
