// Router (gateway) translation, with golden files: testdata/gateway/<case>.in.yaml
// over the Bookinfo registry (testdata/sidecar/bookinfo-registry.yaml) and the
// gateway registry (testdata/gateway/gateway-registry.yaml: Istio's ingress and
// egress gateways in istio-system) gives <case>.{listeners,routes,clusters,endpoints}.out.yaml,
// as the router the case names (default istio-ingressgateway) receives them
// through the xDS type table: listeners and clusters by wildcard, then the
// route configs its listeners name and the EDS clusters its clusters name.
// Every output must pass the Envoy checker and be consistent.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { TypeUrl } from "@sextant/proto/envoy";
import { checkGoldenDir, goldenCases } from "@sextant/testing";
import { parse, stringify } from "yaml";
import { XdsCache } from "../src/cache/xds-cache.js";
import { parseProxy } from "../src/model/proxy.js";
import type { GeneratedResource, WatchedNames } from "../src/model/types.js";
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
  TYPES,
} from "./golden-inputs.js";
import { inconsistencies, undefinedSubsets } from "./snapshot-consistency.js";
import { snapshotViolations } from "./xds-checks.js";

const testdata = fileURLToPath(new URL("./testdata/gateway", import.meta.url));
const sidecarTestdata = fileURLToPath(new URL("./testdata/sidecar", import.meta.url));

/** A pod of a registry: its service's endpoint (ports by name), and a possible proxy of a case. */
interface Pod {
  ip: string;
  pod: string;
  service?: string;
  namespace?: string;
  labels: Record<string, string>;
  zone: string;
  serviceAccount?: string;
  /** Its endpoint's ports by name (default http: 9080, a Bookinfo pod's). */
  ports?: Record<string, number>;
}

interface Registry {
  services?: GoldenInput["services"];
  endpoints?: GoldenInput["endpoints"];
  pods?: Record<string, Pod>;
}

/** A gateway case. */
interface GatewayCase extends Registry {
  /** The pod whose router asks (default istio-ingressgateway). */
  proxy?: string;
  /** Files of Istio's samples/bookinfo/networking applied unchanged, before `config`. */
  bookinfo?: string[];
  config?: string;
  /** Node metadata the router adds to what the agent sends (e.g. UNPRIVILEGED_POD: "true"). */
  proxyMetadata?: Record<string, unknown>;
  /** Also render the ECDS resources its listeners' filters name, as <case>.ecds.out.yaml. */
  extensionConfigs?: boolean;
  /** Istio's MeshConfig YAML push is configured with, if any. */
  meshConfig?: string;
}

const registries = [
  parse(readFileSync(join(sidecarTestdata, "bookinfo-registry.yaml"), "utf8")) as Registry,
  parse(readFileSync(join(testdata, "gateway-registry.yaml"), "utf8")) as Registry,
];

function endpointOf(pod: Pod, namespace: string): Record<string, unknown> {
  return {
    address: pod.ip,
    ports: pod.ports ?? { http: 9080 },
    labels: pod.labels,
    serviceAccount: pod.serviceAccount ?? `bookinfo-${pod.labels.app}`,
    workloadName: pod.pod.split("-").slice(0, -2).join("-"),
    namespace,
    locality: { region: "us-east1", zone: pod.zone },
  };
}

/** The node the agent announces for a pod in router mode (`proxy router`): no injector labels. */
function routerNode(pod: Pod, extraMetadata: Record<string, unknown> = {}) {
  const namespace = pod.namespace ?? "default";
  return {
    id: `router~${pod.ip}~${pod.pod}.${namespace}~${namespace}.svc.cluster.local`,
    // The agent's service cluster: the app label, else the canonical name (a Gateway API deployment's pods have no app).
    cluster: `${pod.labels.app ?? pod.labels["service.istio.io/canonical-name"]}.${namespace}`,
    locality: { region: "us-east1", zone: pod.zone, subZone: "" },
    metadata: {
      CLUSTER_ID: "Kubernetes",
      INSTANCE_IPS: pod.ip,
      ISTIO_VERSION: "sextant",
      LABELS: pod.labels,
      MESH_ID: "cluster.local",
      NAME: pod.pod,
      NAMESPACE: namespace,
      SERVICE_ACCOUNT: pod.serviceAccount ?? `${pod.labels.app}-service-account`,
      ...extraMetadata,
    },
  };
}

interface SdsSecret {
  name?: string;
  sdsConfig?: {
    ads?: object;
    apiConfigSource?: { grpcServices?: Array<{ envoyGrpc?: { clusterName?: string } }> };
  };
}

/** Every SDS secret config of a JSON tree (certificates and validation contexts). */
function secretConfigs(value: unknown, out: SdsSecret[] = []): SdsSecret[] {
  if (Array.isArray(value)) for (const item of value) secretConfigs(item, out);
  else if (value && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) {
      if (key === "tlsCertificateSdsSecretConfigs") out.push(...(inner as SdsSecret[]));
      else if (key === "validationContextSdsSecretConfig") out.push(inner as SdsSecret);
      else secretConfigs(inner, out);
    }
  }
  return out;
}

interface Rendered {
  out: Record<string, string>;
  violations: string[];
  inconsistent: string[];
  generated: Record<GoldenType, GeneratedResource[]>;
  codecs: Readonly<Record<string, Codec>>;
}

function renderCase(
  testCase: GatewayCase,
  codecs: Readonly<Record<string, Codec>>,
  cache = new XdsCache(),
): Rendered {
  const pods: Record<string, Pod> = Object.assign({}, ...registries.map((r) => r.pods ?? {}), testCase.pods);
  const endpoints = new Map<string, Array<Record<string, unknown>>>();
  for (const pod of Object.values(pods)) {
    if (!pod.service) continue;
    const namespace = pod.namespace ?? "default";
    const host = `${pod.service}.${namespace}.svc.cluster.local`;
    endpoints.set(host, [...(endpoints.get(host) ?? []), endpointOf(pod, namespace)]);
  }
  for (const shard of [...registries.flatMap((r) => r.endpoints ?? []), ...(testCase.endpoints ?? [])])
    endpoints.set(shard.hostname, [...(endpoints.get(shard.hostname) ?? []), ...shard.endpoints]);
  const push = contextOf({
    services: [...registries.flatMap((r) => r.services ?? []), ...(testCase.services ?? [])],
    endpoints: [...endpoints].map(([hostname, list]) => ({ hostname, endpoints: list })),
    config: caseConfig(testCase),
    ...(testCase.meshConfig ? { meshConfig: testCase.meshConfig } : {}),
  });
  const proxyPod = pods[testCase.proxy ?? "istio-ingressgateway"];
  assert.ok(proxyPod, `no pod ${testCase.proxy} in the registries or the case`);
  const proxy = parseProxy(routerNode(proxyPod, testCase.proxyMetadata) as never);
  assert.equal(proxy.kind, "router");
  const context = { push, proxy, cache };
  // What GeneratedResources does after the generators: the proxy's EnvoyFilters.
  const envoyFilters = envoyFilterPatcher(push, proxy);
  const generate = (type: GoldenType, names: WatchedNames) => {
    const generator = XDS_TYPES.generator("router", TYPES[type]);
    assert.ok(generator, `no router generator for ${type}`);
    return envoyFilters.patch(type, generator.generate(context, names), names);
  };
  const dumped = (resources: GeneratedResource[]) =>
    resources.map((r) => dumpAny(r.resource, codecs, { emptyAnys: true }));
  const generated: Record<GoldenType, GeneratedResource[]> = {
    listeners: generate("listeners", "*"),
    clusters: generate("clusters", "*"),
    routes: [],
    endpoints: [],
  };
  generated.routes = generate(
    "routes",
    new Set(collectStrings(dumped(generated.listeners), "routeConfigName")),
  );
  const edsNames = new Set(
    dumped(generated.clusters)
      .filter((c) => (c as { type?: string }).type === "EDS")
      .map((c) => {
        const cluster = c as { name: string; edsClusterConfig?: { serviceName?: string } };
        return cluster.edsClusterConfig?.serviceName || cluster.name;
      }),
  );
  generated.endpoints = generate("endpoints", edsNames);
  const inconsistent = inconsistencies(
    generated,
    { listeners: "*", clusters: "*" },
    (any) => dumpAny(any, codecs, { emptyAnys: true }),
    undefinedSubsets(push),
  );
  const violations = snapshotViolations(generated, { proxy: "router" });
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
    violations.push(...rendered.violations);
    out.ecds = rendered.yaml;
  }
  return { out, violations, inconsistent, generated, codecs };
}

function render(
  testCase: { name: string; input: string },
  codecs: Readonly<Record<string, Codec>>,
): Rendered {
  try {
    return renderCase(parse(testCase.input) as GatewayCase, codecs);
  } catch (error) {
    throw new Error(`case ${testCase.name}: ${(error as Error).message}`, { cause: error });
  }
}

describe("router (gateway) translation (golden files)", () => {
  const codecs = envoyCodecs();
  codecs.catch(() => {});

  it("matches testdata/gateway/<case>.<type>.out.yaml", async () => {
    const loaded = await codecs;
    const produced = checkGoldenDir(testdata, (testCase) => render(testCase, loaded).out);
    assert.ok(produced.length >= 28, `only ${produced.length} golden outputs`);
  });

  it("generates only what Envoy accepts, in every case", async () => {
    const loaded = await codecs;
    const violations = goldenCases(testdata).flatMap((testCase) =>
      render(testCase, loaded).violations.map((v) => `${testCase.name}: ${v}`),
    );
    assert.deepEqual(violations, []);
  });

  it("gives every case's router a consistent snapshot: every route config and cluster named exists, no orphan", async () => {
    const loaded = await codecs;
    const problems = goldenCases(testdata).flatMap((testCase) =>
      render(testCase, loaded).inconsistent.map((p) => `${testCase.name}: ${p}`),
    );
    assert.deepEqual(problems, []);
  });

  it("serves a router nothing of the sidecar's own: no inbound, passthrough or virtual listeners and clusters", async () => {
    const loaded = await codecs;
    for (const testCase of goldenCases(testdata)) {
      const { generated } = render(testCase, loaded);
      const names = [...generated.listeners, ...generated.clusters].map((r) => r.name);
      assert.deepEqual(
        names.filter((name) =>
          /^(inbound\||virtual|PassthroughCluster|InboundPassthroughCluster)/.test(name),
        ),
        [],
        testCase.name,
      );
    }
  });

  it("names every secret where it is served: credentials over ADS as kubernetes://, the workload's and files from the agent's sds-grpc", async () => {
    const loaded = await codecs;
    const wrong: string[] = [];
    let credentials = 0;
    for (const testCase of goldenCases(testdata)) {
      const { generated } = render(testCase, loaded);
      const dumped = [...generated.listeners, ...generated.clusters].map((r) =>
        dumpAny(r.resource, loaded, { emptyAnys: true }),
      );
      for (const secret of secretConfigs(dumped)) {
        const overAds = secret.sdsConfig?.ads !== undefined;
        const fromAgent =
          secret.sdsConfig?.apiConfigSource?.grpcServices?.[0]?.envoyGrpc?.clusterName === "sds-grpc";
        const name = secret.name ?? "";
        if (overAds && name.startsWith("kubernetes://")) credentials++;
        else if (!(fromAgent && /^(default|ROOTCA|file-cert:|file-root:)/.test(name)))
          wrong.push(`${testCase.name}: ${name} ${JSON.stringify(secret.sdsConfig)}`);
      }
    }
    assert.deepEqual(wrong, []);
    assert.ok(credentials >= 4, `only ${credentials} credential references`);
  });

  it("serves routers with their own generators, and sidecars as before", () => {
    for (const type of Object.values(TYPES)) {
      assert.ok(XDS_TYPES.generator("router", type), type);
      assert.notEqual(XDS_TYPES.generator("router", type), undefined);
    }
    assert.notEqual(
      XDS_TYPES.generator("router", TypeUrl.Listener),
      XDS_TYPES.generator("sidecar", TypeUrl.Listener),
    );
  });
});
