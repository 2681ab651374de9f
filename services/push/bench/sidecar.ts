// Sidecar generation benchmark: the Envoy sidecar generators called directly
// (no network, no NATS) over a synthetic registry, as the golden harness
// calls them.
//
//   1. Per-proxy generation time of LDS, RDS, CDS and EDS with 1,000
//      services (3 endpoints each, v1/v2/v3; every tenth service with a
//      90/10 VirtualService and a DestinationRule with subsets), one proxy,
//      a fresh XdsCache per run: the cost of a proxy no other shares with.
//   2. One full push to 2,000 sidecars spread over 100 deployments (20 pods
//      per deployment, same labels and service account, so XdsCache can
//      share their resources): total time, per-proxy mean and the cache's
//      hit ratio.
//   3. A VirtualService change (svc-0's weights) after that push: a new
//      snapshot, the cache brought up to date as the server does (dropping
//      what the change reaches), then every sidecar's four types again.
//
// Subscriptions are Envoy's: listeners and clusters by wildcard, then the
// route configs the listeners name and the EDS clusters the clusters name.
// It prints a table; nothing is asserted. Run from services/push:
//
//   node --conditions=@sextant/source --import tsx bench/sidecar.ts
//   BENCH_SERVICES=200 BENCH_PROXIES=400 BENCH_DEPLOYMENTS=20 node --conditions=@sextant/source --import tsx bench/sidecar.ts
import { performance } from "node:perf_hooks";
import { configKey } from "@sextant/model";
import {
  type ConfigResource,
  EndpointShard,
  HealthStatus,
  Protocol,
  Resolution,
  Service,
} from "@sextant/proto";
import { Cluster, HttpConnectionManager, Listener, TypeUrl } from "@sextant/proto/envoy";
import { configChanges } from "../src/cache/dependencies.js";
import { XdsCache } from "../src/cache/xds-cache.js";
import { type MeshProxy, parseProxy } from "../src/model/proxy.js";
import { PushContext } from "../src/model/push-context.js";
import type { GeneratedResource, WatchedNames } from "../src/model/types.js";
import type { GenerationContext } from "../src/translate/generator.js";

const SERVICES = Number(process.env.BENCH_SERVICES ?? 1000);
const PROXIES = Number(process.env.BENCH_PROXIES ?? 2000);
const DEPLOYMENTS = Number(process.env.BENCH_DEPLOYMENTS ?? 100);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const NAMESPACES = 10;

type Generate = (context: GenerationContext, watched: WatchedNames) => GeneratedResource[];
type Type = "lds" | "rds" | "cds" | "eds";

/** The four sidecar generators; a missing one stops the run with its name. */
async function loadGenerators(): Promise<Record<Type, Generate>> {
  const wanted: Record<Type, [string, string]> = {
    lds: ["listeners", "generateSidecarListeners"],
    rds: ["routes", "generateSidecarRoutes"],
    cds: ["clusters", "generateSidecarClusters"],
    eds: ["endpoints", "generateSidecarEndpoints"],
  };
  const out: Partial<Record<Type, Generate>> = {};
  for (const [type, [file, name]] of Object.entries(wanted) as Array<[Type, [string, string]]>) {
    const module = (await import(`../src/translate/sidecar/${file}.js`).catch(() => ({}))) as Record<
      string,
      unknown
    >;
    if (typeof module[name] !== "function")
      throw new Error(`src/translate/sidecar/${file}.ts does not export ${name}`);
    out[type] = module[name] as Generate;
  }
  return out as Record<Type, Generate>;
}

const namespaceOf = (i: number) => `ns-${i % NAMESPACES}`;
const hostOf = (i: number) => `svc-${i}.${namespaceOf(i)}.svc.cluster.local`;
const podIp = (i: number, n: number) => `10.${128 + Math.floor(i / 250)}.${i % 250}.${n + 1}`;

function resource(
  kind: string,
  namespace: string,
  name: string,
  spec: Record<string, unknown>,
): ConfigResource {
  const apiVersion = kind === "PeerAuthentication" ? "security.istio.io/v1" : "networking.istio.io/v1";
  return { kind, apiVersion, namespace, name, labels: {}, annotations: {}, generation: 1, revision: 0, spec };
}

/** The synthetic registry and config; svc-0's VirtualService sends v2 `changedWeight` percent. */
function buildContext(changedWeight = 10): PushContext {
  const services = new Map<string, Service>();
  const shards = new Map<string, { hostname: string; endpoints: EndpointShard["endpoints"] }>();
  const config = new Map<string, ConfigResource>();
  for (let i = 0; i < SERVICES; i++) {
    const host = hostOf(i);
    const namespace = namespaceOf(i);
    services.set(
      host,
      Service.fromPartial({
        hostname: host,
        namespace,
        name: `svc-${i}`,
        addresses: [`10.96.${Math.floor(i / 250)}.${(i % 250) + 1}`],
        ports: [{ name: "http", number: 9080, targetPort: 9080, protocol: Protocol.PROTOCOL_HTTP }],
        selector: { app: `svc-${i}` },
        resolution: Resolution.RESOLUTION_STATIC,
        registry: "kubernetes",
      }),
    );
    shards.set(host, {
      hostname: host,
      endpoints: EndpointShard.fromPartial({
        endpoints: ["v1", "v2", "v3"].map((version, n) => ({
          address: podIp(i, n),
          ports: { http: 9080 },
          labels: { app: `svc-${i}`, version, "security.istio.io/tlsMode": "istio" },
          serviceAccount: `svc-${i}`,
          namespace,
          locality: { region: "us-east1", zone: n === 2 ? "us-east1-c" : "us-east1-b", subzone: "" },
          health: HealthStatus.HEALTH_STATUS_HEALTHY,
        })),
      }).endpoints,
    });
    if (i % 10 === 0) {
      const name = `svc-${i}`;
      const vs = resource("VirtualService", namespace, name, {
        hosts: [name],
        http: [
          {
            route: [
              { destination: { host: name, subset: "v1" }, weight: 100 - (i === 0 ? changedWeight : 10) },
              { destination: { host: name, subset: "v2" }, weight: i === 0 ? changedWeight : 10 },
            ],
            timeout: "5s",
            retries: { attempts: 3, perTryTimeout: "2s" },
          },
        ],
      });
      const dr = resource("DestinationRule", namespace, name, {
        host: name,
        trafficPolicy: {
          connectionPool: { http: { http1MaxPendingRequests: 100 } },
          outlierDetection: { consecutive5xxErrors: 5, interval: "10s", baseEjectionTime: "30s" },
        },
        subsets: ["v1", "v2", "v3"].map((version) => ({ name: version, labels: { version } })),
      });
      config.set(configKey(vs), vs);
      config.set(configKey(dr), dr);
    }
  }
  return PushContext.build({ config, services, endpointShards: shards, domainSuffix: "cluster.local" });
}

/** The sidecar of pod `pod` of deployment `deployment` (the deployment runs svc-<deployment>'s v1). */
function sidecar(deployment: number, pod: number): MeshProxy {
  const namespace = namespaceOf(deployment);
  const ip = `10.200.${deployment % 250}.${pod + 1}`;
  const name = `svc-${deployment}-v1-${pod}`;
  return parseProxy({
    id: `sidecar~${ip}~${name}.${namespace}~${namespace}.svc.cluster.local`,
    cluster: `svc-${deployment}.${namespace}`,
    metadata: {
      NAMESPACE: namespace,
      NAME: name,
      INSTANCE_IPS: ip,
      SERVICE_ACCOUNT: `svc-${deployment}`,
      LABELS: { app: `svc-${deployment}`, version: "v1", "security.istio.io/tlsMode": "istio" },
      CLUSTER_ID: "Kubernetes",
    },
  } as never);
}

const decode = {
  routeNames(resources: GeneratedResource[]): Set<string> {
    const names = new Set<string>();
    for (const r of resources) {
      const listener = Listener.decode(r.resource.value);
      for (const chain of [
        ...listener.filterChains,
        ...(listener.defaultFilterChain ? [listener.defaultFilterChain] : []),
      ]) {
        for (const filter of chain.filters) {
          if (filter.typedConfig?.typeUrl !== TypeUrl.HttpConnectionManager) continue;
          const name = HttpConnectionManager.decode(filter.typedConfig.value).rds?.routeConfigName;
          if (name) names.add(name);
        }
      }
    }
    return names;
  },
  edsNames(resources: GeneratedResource[]): Set<string> {
    const names = new Set<string>();
    for (const r of resources) {
      const cluster = Cluster.decode(r.resource.value);
      // ClusterDiscoveryType EDS = 3.
      if (cluster.type === 3) names.add(cluster.edsClusterConfig?.serviceName || cluster.name);
    }
    return names;
  },
};

/** One proxy's four types, timed, Envoy's subscription order. */
function generateAll(generators: Record<Type, Generate>, context: GenerationContext) {
  const times = {} as Record<Type, number>;
  const counts = {} as Record<Type, number>;
  const bytes = {} as Record<Type, number>;
  const timed = (type: Type, run: () => GeneratedResource[]) => {
    const start = performance.now();
    const resources = run();
    times[type] = performance.now() - start;
    counts[type] = resources.length;
    bytes[type] = resources.reduce((sum, r) => sum + r.resource.value.length, 0);
    return resources;
  };
  const listeners = timed("lds", () => generators.lds(context, "*"));
  const routeNames = decode.routeNames(listeners);
  timed("rds", () => generators.rds(context, routeNames));
  const clusters = timed("cds", () => generators.cds(context, "*"));
  const edsNames = decode.edsNames(clusters);
  timed("eds", () => generators.eds(context, edsNames));
  return { times, counts, bytes };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
const ms = (value: number) => value.toFixed(1);

const generators = await loadGenerators();
let start = performance.now();
const push = buildContext();
const buildMs = performance.now() - start;
console.log(
  `registry: ${SERVICES} services in ${NAMESPACES} namespaces, ${SERVICES * 3} endpoints, ${Math.ceil(SERVICES / 10)} VirtualServices + DestinationRules; PushContext built in ${ms(buildMs)} ms\n`,
);

// 1. Per-proxy generation, cold cache and snapshot (first run warms the JIT and is dropped).
const runs: Array<ReturnType<typeof generateAll>> = [];
for (let run = 0; run <= RUNS; run++) {
  // A fresh snapshot too: generators memoize per PushContext (CDS by scope), which a new push never shares.
  const result = generateAll(generators, {
    push: buildContext(),
    proxy: sidecar(0, 0),
    cache: new XdsCache(),
  });
  if (run > 0) runs.push(result);
}
console.log(`per-proxy generation, one sidecar, fresh cache and snapshot (median of ${RUNS} runs)\n`);
console.log("| type | ms | resources | bytes |");
console.log("|---|---:|---:|---:|");
for (const type of ["lds", "rds", "cds", "eds"] as const) {
  const last = runs.at(-1)!;
  console.log(
    `| ${type.toUpperCase()} | ${ms(median(runs.map((r) => r.times[type])))} | ${last.counts[type]} | ${last.bytes[type]} |`,
  );
}
const totals = runs.map((r) => r.times.lds + r.times.rds + r.times.cds + r.times.eds);
console.log(`| all four | ${ms(median(totals))} | | |\n`);

// 2. A full push to every sidecar with one shared cache.
const proxies: MeshProxy[] = [];
for (let i = 0; i < PROXIES; i++) proxies.push(sidecar(i % DEPLOYMENTS, Math.floor(i / DEPLOYMENTS)));
const cache = new XdsCache();
const perType = { lds: 0, rds: 0, cds: 0, eds: 0 } as Record<Type, number>;
let sent = 0;
start = performance.now();
for (const proxy of proxies) {
  const result = generateAll(generators, { push, proxy, cache });
  for (const type of ["lds", "rds", "cds", "eds"] as const) {
    perType[type] += result.times[type];
    sent += result.bytes[type];
  }
}
const pushMs = performance.now() - start;
const { hits, misses, size } = cache.stats;
console.log(`full push: ${PROXIES} sidecars over ${DEPLOYMENTS} deployments, one shared XdsCache\n`);
console.log("| measure | value |");
console.log("|---|---:|");
const generatorMs = perType.lds + perType.rds + perType.cds + perType.eds;
console.log(`| total push time (generators) | ${ms(generatorMs)} ms |`);
console.log(`| per proxy (mean) | ${ms(generatorMs / PROXIES)} ms |`);
for (const type of ["lds", "rds", "cds", "eds"] as const) {
  console.log(`| ${type.toUpperCase()} share | ${ms(perType[type])} ms |`);
}
console.log(`| cache hits / misses | ${hits} / ${misses} |`);
console.log(`| cache hit ratio | ${((100 * hits) / Math.max(1, hits + misses)).toFixed(1)} % |`);
console.log(`| cache entries | ${size} |`);
console.log(`| bytes generated (all proxies) | ${(sent / 1e6).toFixed(1)} MB |`);
// The bench decodes LDS and CDS to find the RDS and EDS names, as Envoy would; not push's cost.
console.log(`| wall time incl. the bench's decoding of names | ${ms(pushMs)} ms |`);
console.log(`| heap used after | ${(process.memoryUsage().heapUsed / 1e6).toFixed(0)} MB |`);

// 3. A VirtualService change, then every sidecar again through the same cache.
const changed = buildContext(20);
const before = cache.stats;
start = performance.now();
const dropped = cache.invalidate(configChanges(push, changed));
const invalidateMs = performance.now() - start;
const afterChange = { lds: 0, rds: 0, cds: 0, eds: 0 } as Record<Type, number>;
for (const proxy of proxies) {
  const result = generateAll(generators, { push: changed, proxy, cache });
  for (const type of ["lds", "rds", "cds", "eds"] as const) afterChange[type] += result.times[type];
}
const changeMs = afterChange.lds + afterChange.rds + afterChange.cds + afterChange.eds;
console.log(`\nVirtualService change (svc-0), then all ${PROXIES} sidecars again through the same cache\n`);
console.log("| measure | value |");
console.log("|---|---:|");
console.log(`| entries dropped / kept | ${dropped} / ${before.size - dropped} (in ${ms(invalidateMs)} ms) |`);
console.log(`| total push time (generators) | ${ms(changeMs)} ms |`);
for (const type of ["lds", "rds", "cds", "eds"] as const) {
  console.log(`| ${type.toUpperCase()} share | ${ms(afterChange[type])} ms |`);
}
console.log(`| cache misses (rebuilt) | ${cache.stats.misses - before.misses} |`);
