// Envoy sidecar translation, with golden files: testdata/sidecar/<case>.in.yaml
// over the Bookinfo registry (testdata/sidecar/bookinfo-registry.yaml) gives
// <case>.{listeners,routes,clusters,endpoints}.out.yaml. Each case's proxy
// subscribes as Envoy does: listeners and clusters by wildcard, then the
// route configs its listeners name and the EDS clusters its clusters name,
// so the four outputs of a case are consistent with each other. Every
// resource must also meet the validate rules of Envoy's protos.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { checkGoldenDir, goldenCases } from "@sextant/testing";
import { parse, stringify } from "yaml";
import { configChanges } from "../src/cache/dependencies.js";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import type { PushContext } from "../src/model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../src/model/types.js";
import type { GenerationContext } from "../src/translate/generator.js";
import { NAME_TABLE_TYPE_URL } from "../src/translate/sidecar/name-table.js";
import { XDS_TYPES } from "../src/xds-types.js";
import { envoyFilterPatcher, failuresGolden } from "./envoy-filter-patching.js";
import { renderExtensionConfigs } from "./extension-configs.js";
import {
  type Codec,
  caseConfig,
  collectStrings,
  contextOf,
  dumpAny,
  envoyCodecs,
  type GoldenInput,
  type GoldenType,
} from "./golden-inputs.js";
import { inconsistencies, missingGatewayApiBackends, undefinedSubsets } from "./snapshot-consistency.js";
import { snapshotViolations } from "./xds-checks.js";

const testdata = fileURLToPath(new URL("./testdata/sidecar", import.meta.url));

/** A pod of the registry: an injected Bookinfo workload, and a possible proxy of a case. */
interface Pod {
  ip: string;
  /** Its further addresses, after ip in INSTANCE_IPS (a dual-stack pod's IPv6 address). */
  moreIps?: string[];
  pod: string;
  /** The service whose endpoint it is (in its namespace). */
  service?: string;
  namespace?: string;
  labels: Record<string, string>;
  zone: string;
  serviceAccount?: string;
}

/** The registry file, and what a case may add to it. */
interface Registry {
  services?: GoldenInput["services"];
  endpoints?: GoldenInput["endpoints"];
  pods?: Record<string, Pod>;
}

/** A sidecar case. */
interface SidecarCase extends Registry {
  /** The pod whose sidecar asks (default productpage-v1). */
  proxy?: string;
  /** Files of Istio's samples/bookinfo/networking applied unchanged, before `config`. */
  bookinfo?: string[];
  config?: string;
  /** Istio's MeshConfig YAML push reads from MESH_CONFIG_FILE (extension providers). */
  meshConfig?: string;
  /** Node metadata the proxy adds to what the agent sends (e.g. DNS_CAPTURE: "true"). */
  proxyMetadata?: Record<string, string>;
  /** Also render the proxy's NDS name table, as <case>.nametable.out.yaml. */
  nameTable?: boolean;
  /** Also render the ECDS resources its listeners' filters name, as <case>.ecds.out.yaml. */
  extensionConfigs?: boolean;
}

type SidecarGenerate = (context: GenerationContext, watched: WatchedNames) => GeneratedResource[];

/** The sidecar generators, by golden type: where each is to be exported from. */
const SIDECAR_GENERATORS: Record<GoldenType, { module: string; name: string }> = {
  listeners: { module: "listeners", name: "generateSidecarListeners" },
  routes: { module: "routes", name: "generateSidecarRoutes" },
  clusters: { module: "clusters", name: "generateSidecarClusters" },
  endpoints: { module: "endpoints", name: "generateSidecarEndpoints" },
};

/** Imports the four generators, failing with the file and export that are missing. */
async function loadGenerators(): Promise<Record<GoldenType, SidecarGenerate>> {
  const loaded: Partial<Record<GoldenType, SidecarGenerate>> = {};
  const missing: string[] = [];
  for (const [type, { module, name }] of Object.entries(SIDECAR_GENERATORS)) {
    const path = `../src/translate/sidecar/${module}.js`;
    let exports: Record<string, unknown> = {};
    try {
      exports = (await import(path)) as Record<string, unknown>;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code !== "ERR_MODULE_NOT_FOUND") throw error;
    }
    if (typeof exports[name] === "function") loaded[type as GoldenType] = exports[name] as SidecarGenerate;
    else missing.push(`${name} (from src/translate/sidecar/${module}.ts)`);
  }
  if (missing.length > 0)
    throw new Error(`the sidecar generators are not exported yet: ${missing.join(", ")}`);
  return loaded as Record<GoldenType, SidecarGenerate>;
}

const registry = parse(readFileSync(join(testdata, "bookinfo-registry.yaml"), "utf8")) as Registry;

/** The endpoint discovery writes for an injected pod (labels as the injector sets them). */
function endpointOf(pod: Pod, namespace: string): Record<string, unknown> {
  return {
    address: pod.ip,
    ports: { http: 9080 },
    labels: podLabels(pod),
    serviceAccount: pod.serviceAccount ?? `bookinfo-${pod.labels.app}`,
    workloadName: `${pod.labels.app}-${pod.labels.version}`,
    namespace,
    locality: { region: "us-east1", zone: pod.zone },
  };
}

function podLabels(pod: Pod): Record<string, string> {
  return {
    ...pod.labels,
    "security.istio.io/tlsMode": "istio",
    "service.istio.io/canonical-name": pod.labels.app ?? "",
    "service.istio.io/canonical-revision": pod.labels.version ?? "latest",
  };
}

/** The node the agent's Envoy bootstrap announces for a pod (services/agent/src/node/proxy-node.ts). */
function sidecarNode(pod: Pod, extraMetadata: Record<string, string> = {}) {
  const namespace = pod.namespace ?? "default";
  return {
    id: `sidecar~${pod.ip}~${pod.pod}.${namespace}~${namespace}.svc.cluster.local`,
    cluster: `${pod.labels.app}.${namespace}`,
    locality: { region: "us-east1", zone: pod.zone, subZone: "" },
    metadata: {
      CLUSTER_ID: "Kubernetes",
      ENVOY_PROMETHEUS_PORT: 15090,
      ENVOY_STATUS_PORT: 15021,
      INSTANCE_IPS: [pod.ip, ...(pod.moreIps ?? [])].join(","),
      ISTIO_VERSION: "sextant",
      LABELS: podLabels(pod),
      MESH_ID: "cluster.local",
      NAME: pod.pod,
      NAMESPACE: namespace,
      SERVICE_ACCOUNT: pod.serviceAccount ?? `bookinfo-${pod.labels.app}`,
      ...extraMetadata,
    },
  };
}

function renderCase(
  testCase: SidecarCase,
  generators: Record<GoldenType, SidecarGenerate>,
  codecs: Readonly<Record<string, Codec>>,
  cache = new XdsCache(),
  /** Collects what a real Envoy would reject in the case's snapshot (xds-checks.ts). */
  violations?: string[],
  /** Collects why the case's resources are not consistent with each other (dangling names, orphans). */
  inconsistent?: string[],
  /** Called with the case's snapshot before anything is generated (as the server brings its cache up to date). */
  beforeGenerate?: (push: PushContext) => void,
): Record<string, string> {
  const pods = { ...registry.pods, ...testCase.pods };
  const endpoints = new Map<string, Array<Record<string, unknown>>>();
  for (const pod of Object.values(pods)) {
    if (!pod.service) continue;
    const namespace = pod.namespace ?? "default";
    const host = `${pod.service}.${namespace}.svc.cluster.local`;
    endpoints.set(host, [...(endpoints.get(host) ?? []), endpointOf(pod, namespace)]);
  }
  for (const shard of [...(registry.endpoints ?? []), ...(testCase.endpoints ?? [])]) {
    endpoints.set(shard.hostname, [...(endpoints.get(shard.hostname) ?? []), ...shard.endpoints]);
  }
  const push = contextOf({
    services: [...(registry.services ?? []), ...(testCase.services ?? [])],
    endpoints: [...endpoints].map(([hostname, list]) => ({ hostname, endpoints: list })),
    config: caseConfig(testCase),
    ...(testCase.meshConfig ? { meshConfig: testCase.meshConfig } : {}),
  });
  const proxyPod = pods[testCase.proxy ?? "productpage-v1"];
  assert.ok(proxyPod, `no pod ${testCase.proxy} in the registry or the case`);
  const proxy = parseProxy(sidecarNode(proxyPod, testCase.proxyMetadata) as never);
  assert.equal(proxy.kind, "sidecar");
  beforeGenerate?.(push);
  const context = { push, proxy, cache };
  // What GeneratedResources does after the generators: the proxy's EnvoyFilters.
  const envoyFilters = envoyFilterPatcher(push, proxy);
  const generate = (type: GoldenType, names: WatchedNames) =>
    envoyFilters.patch(type, generators[type](context, names), names);

  const generated: Record<GoldenType, GeneratedResource[]> = {
    listeners: generate("listeners", "*"),
    clusters: generate("clusters", "*"),
    routes: [],
    endpoints: [],
  };
  const dumped = (resources: GeneratedResource[]) =>
    resources.map((r) => dumpAny(r.resource, codecs, { emptyAnys: true }));
  // As Envoy: RDS for the route configs the listeners' HCMs name, EDS for the EDS clusters.
  const routeNames = new Set(collectStrings(dumped(generated.listeners), "routeConfigName"));
  generated.routes = generate("routes", routeNames);
  const edsNames = new Set(
    dumped(generated.clusters)
      .filter((c) => (c as { type?: string }).type === "EDS")
      .map((c) => {
        const cluster = c as { name: string; edsClusterConfig?: { serviceName?: string } };
        return cluster.edsClusterConfig?.serviceName || cluster.name;
      }),
  );
  generated.endpoints = generate("endpoints", edsNames);
  inconsistent?.push(
    ...inconsistencies(
      generated,
      { listeners: "*", clusters: "*" },
      (any) => dumpAny(any, codecs, { emptyAnys: true }),
      (type, name) => undefinedSubsets(push)(type, name) || missingGatewayApiBackends(push)(type, name),
    ),
  );

  violations?.push(...snapshotViolations(generated, { proxy: "sidecar" }));
  const out: Record<string, string> = {};
  for (const type of ["listeners", "routes", "clusters", "endpoints"] as const) {
    out[type] = stringify(
      generated[type].map((r) => ({
        sources: r.sources,
        resource: dumpAny(r.resource, codecs, { emptyAnys: true }),
      })),
      { aliasDuplicateObjects: false },
    );
  }
  const refused = failuresGolden(envoyFilters.failures);
  if (refused) out.envoyfilter = refused;
  if (testCase.extensionConfigs) {
    const rendered = renderExtensionConfigs(context, dumped(generated.listeners), codecs);
    violations?.push(...rendered.violations);
    out.ecds = rendered.yaml;
  }
  if (testCase.nameTable) {
    // The agent asks for the table by wildcard, on the same stream.
    const nameTable = XDS_TYPES.generator("sidecar", NAME_TABLE_TYPE_URL)?.generate(context, "*") ?? [];
    out.nametable = stringify(
      nameTable.map((r) => ({ name: r.name, resource: dumpAny(r.resource, codecs) })),
      { aliasDuplicateObjects: false },
    );
  }
  return out;
}

describe("Envoy sidecar translation (golden files)", () => {
  // Loaded by each test, so that a missing generator fails the tests by name, not a hook.
  const loaded = Promise.all([loadGenerators(), envoyCodecs()]);
  loaded.catch(() => {});

  it("matches testdata/sidecar/<case>.<type>.out.yaml", async () => {
    const [generators, codecs] = await loaded;
    const produced = checkGoldenDir(testdata, (testCase) => {
      try {
        return renderCase(parse(testCase.input) as SidecarCase, generators, codecs);
      } catch (error) {
        throw new Error(`case ${testCase.name}: ${(error as Error).message}`, { cause: error });
      }
    });
    assert.ok(produced.length >= 40, `only ${produced.length} golden outputs`);
  });

  it("generates only resources that meet the validate rules of Envoy's protos and what Envoy checks when it loads them, in every case", async () => {
    const [generators, codecs] = await loaded;
    const violations: string[] = [];
    for (const testCase of goldenCases(testdata)) {
      const found: string[] = [];
      renderCase(parse(testCase.input) as SidecarCase, generators, codecs, new XdsCache(), found);
      violations.push(...found.map((v) => `${testCase.name}: ${v}`));
    }
    assert.deepEqual(violations, []);
  });

  it("gives every case's proxy a consistent snapshot: no name without its resource, no orphan", async () => {
    const [generators, codecs] = await loaded;
    const problems: string[] = [];
    for (const testCase of goldenCases(testdata)) {
      const found: string[] = [];
      renderCase(parse(testCase.input) as SidecarCase, generators, codecs, new XdsCache(), undefined, found);
      problems.push(...found.map((problem) => `${testCase.name}: ${problem}`));
    }
    assert.deepEqual(problems, []);
  });

  it("gives the same output from a cache shared by every case's proxies as from a fresh one", async () => {
    const [generators, codecs] = await loaded;
    const shared = new XdsCache();
    const input = parse(
      readFileSync(join(testdata, "virtual-service-reviews-90-10.in.yaml"), "utf8"),
    ) as SidecarCase;
    for (const proxy of ["productpage-v1", "reviews-v1", "reviews-v2", "productpage-v1"]) {
      assert.deepEqual(
        renderCase({ ...input, proxy }, generators, codecs, shared),
        renderCase({ ...input, proxy }, generators, codecs),
        proxy,
      );
    }
    assert.ok(shared.stats.hits > 0, "the shared cache was never hit");
  });

  it("gives the same output from a cache carried from case to case, dropping what each change reaches, as from a fresh one", async () => {
    const [generators, codecs] = await loaded;
    const cases = goldenCases(testdata);
    // Forwards and backwards: each case's change against its neighbour both ways.
    for (const order of [cases, [...cases].reverse()]) {
      const carried = new XdsCache();
      let last: PushContext | undefined;
      const invalidate = (push: PushContext) => {
        carried.invalidate(configChanges(last, push));
        last = push;
      };
      for (const testCase of order) {
        const input = parse(testCase.input) as SidecarCase;
        assert.deepEqual(
          renderCase(input, generators, codecs, carried, undefined, undefined, invalidate),
          renderCase(input, generators, codecs),
          testCase.name,
        );
      }
      assert.ok(carried.stats.hits > 0, "the carried cache was never hit");
    }
  });
});
