// The mesh the scale benchmark runs against: a real nats-server, the fake
// kube-apiserver (in this process) holding S Kubernetes Services with three
// ready pods each behind one EndpointSlice, discovery reading it, and ingest
// holding a VirtualService and a DestinationRule for every tenth service (and,
// when scoped, a Sidecar per namespace importing only the namespace itself).
// Push replicas are started separately, against the same NATS.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import {
  eventually,
  type FakeKubeApiServer,
  freePort,
  type KubeObject,
  type NatsServerFixture,
  type ServiceProcess,
  startFakeKubeApiServer,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { stringify } from "yaml";
import type { SidecarSpec } from "./sidecars.js";

export const PODS_PER_SERVICE = 3;
const MAX_NAMESPACES = 10;
/** The service whose VirtualService and endpoints the benchmark changes. */
const CHANGED_SERVICE = 0;

export interface MeshOptions {
  services: number;
  /** A Sidecar in every namespace with egress hosts ["./*", "istio-system/*"]. */
  scoped: boolean;
}

const namespaceCount = (services: number) => Math.min(MAX_NAMESPACES, services);
const namespaceOf = (service: number, services: number) => `ns-${service % namespaceCount(services)}`;
const podIp = (service: number, pod: number) => `10.${10 + (service >> 8)}.${service & 255}.${pod + 1}`;

function kubeService(s: number, services: number): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: `svc-${s}`, namespace: namespaceOf(s, services), labels: { app: `svc-${s}` } },
    spec: {
      clusterIP: `10.96.${s >> 8}.${s & 255}`,
      selector: { app: `svc-${s}` },
      ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
    },
  } as KubeObject;
}

function pod(s: number, p: number, services: number, ip = podIp(s, p)): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `svc-${s}-${p}`,
      namespace: namespaceOf(s, services),
      labels: { app: `svc-${s}`, version: `v${p + 1}` },
    },
    spec: { serviceAccountName: `sa-svc-${s}`, nodeName: "node-0", containers: [{ name: "app" }] },
    status: { phase: "Running", podIP: ip, conditions: [{ type: "Ready", status: "True" }] },
  } as KubeObject;
}

function endpointSlice(s: number, services: number, ips: string[]): KubeObject {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `svc-${s}-abc`,
      namespace: namespaceOf(s, services),
      labels: { "kubernetes.io/service-name": `svc-${s}` },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: ips.map((ip, p) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: "node-0",
      targetRef: { kind: "Pod", name: `svc-${s}-${p}`, namespace: namespaceOf(s, services) },
    })),
  } as KubeObject;
}

/** The marker a VirtualService change carries (a request header value), unique per change. */
export const virtualServiceMarker = (change: number) => `scale-change-${String(change).padStart(5, "0")};`;
/** The marker an endpoint change carries: the new address of the changed service's third pod. */
export const endpointMarker = (change: number) => `10.250.${change % 250}.254`;

function virtualService(s: number, services: number, change: number) {
  return {
    apiVersion: "networking.istio.io/v1",
    kind: "VirtualService",
    metadata: { name: `svc-${s}`, namespace: namespaceOf(s, services) },
    spec: {
      hosts: [`svc-${s}`],
      http: [
        {
          match: [{ headers: { "x-canary": { exact: "true" } } }],
          route: [{ destination: { host: `svc-${s}`, subset: "v3" } }],
        },
        {
          headers: { request: { set: { "x-scale-change": virtualServiceMarker(change) } } },
          route: [
            { destination: { host: `svc-${s}`, subset: "v1" }, weight: change % 2 === 0 ? 90 : 50 },
            { destination: { host: `svc-${s}`, subset: "v2" }, weight: change % 2 === 0 ? 10 : 50 },
          ],
          timeout: "5s",
          retries: { attempts: 2, perTryTimeout: "2s" },
        },
      ],
    },
  };
}

function destinationRule(s: number, services: number) {
  return {
    apiVersion: "networking.istio.io/v1",
    kind: "DestinationRule",
    metadata: { name: `svc-${s}`, namespace: namespaceOf(s, services) },
    spec: {
      host: `svc-${s}`,
      trafficPolicy: { connectionPool: { http: { http1MaxPendingRequests: 100 } } },
      subsets: [1, 2, 3].map((v) => ({ name: `v${v}`, labels: { version: `v${v}` } })),
    },
  };
}

const sidecarResource = (namespace: string) => ({
  apiVersion: "networking.istio.io/v1",
  kind: "Sidecar",
  metadata: { name: "default", namespace },
  spec: { egress: [{ hosts: ["./*", "istio-system/*"] }] },
});

export interface Mesh {
  readonly options: MeshOptions;
  readonly nats: NatsServerFixture;
  /** The namespace of the changed service: with scoping only its sidecars are affected by a change. */
  readonly changedNamespace: string;
  /** Sidecar specs 0..count-1 (without an address): pods of the services, spread over the namespaces. */
  sidecars(count: number): Omit<SidecarSpec, "address">[];
  /** Whether a change of the changed service reaches this sidecar. */
  affected(spec: Pick<SidecarSpec, "namespace">): boolean;
  /** Rewrites the changed service's VirtualService through ingest, carrying virtualServiceMarker(change). */
  changeVirtualService(change: number): Promise<void>;
  /** Moves the changed service's third pod to endpointMarker(change), in the fake kube-apiserver. */
  changeEndpoints(change: number): void;
  /** Starts one push replica; its xDS address and process. */
  startPush(): Promise<{ address: string; process: ServiceProcess }>;
  close(): Promise<void>;
}

export async function startMesh(options: MeshOptions): Promise<Mesh> {
  const { services, scoped } = options;
  const nats = await startNatsServer();
  const kube: FakeKubeApiServer = await startFakeKubeApiServer({ bookmarkIntervalMs: 60_000 });
  const processes: ServiceProcess[] = [];
  let bus: Bus | undefined;
  const close = async () => {
    for (const process of processes.reverse()) await process.stop();
    await bus?.close();
    await kube.close();
    await nats.dispose();
  };
  try {
    for (let n = 0; n < namespaceCount(services); n++)
      kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: `ns-${n}` } } as KubeObject);
    kube.apply({ apiVersion: "v1", kind: "Node", metadata: { name: "node-0" } } as KubeObject);
    for (let s = 0; s < services; s++) {
      kube.apply(kubeService(s, services));
      for (let p = 0; p < PODS_PER_SERVICE; p++) kube.apply(pod(s, p, services));
      kube.apply(
        endpointSlice(
          s,
          services,
          Array.from({ length: PODS_PER_SERVICE }, (_, p) => podIp(s, p)),
        ),
      );
    }
    const kubeconfig = join(mkdtempSync(join(tmpdir(), "sextant-scale-")), "kubeconfig");
    writeFileSync(kubeconfig, kube.kubeconfigYaml());
    const quiet = { LOG_LEVEL: "warn" };
    const ingest = await startServiceProcess("ingest", { ...quiet, NATS_URL: nats.url, API_AUTH: "none" });
    processes.push(ingest);
    processes.push(
      await startServiceProcess("discovery", {
        ...quiet,
        NATS_URL: nats.url,
        KUBERNETES: "on",
        KUBECONFIG: kubeconfig,
      }),
    );
    const apply = async (documents: object[]) => {
      const response = await fetch(`http://127.0.0.1:${ingest.httpPort}/v1/apply`, {
        method: "POST",
        body: documents.map((document) => stringify(document)).join("---\n"),
      });
      if (!response.ok) throw new Error(`ingest apply: ${response.status} ${await response.text()}`);
    };
    const config: object[] = [];
    for (let s = 0; s < services; s += 10)
      config.push(virtualService(s, services, 0), destinationRule(s, services));
    if (scoped) for (let n = 0; n < namespaceCount(services); n++) config.push(sidecarResource(`ns-${n}`));
    for (let i = 0; i < config.length; i += 100) await apply(config.slice(i, i + 100));

    bus = await connectBus({
      url: nats.url,
      name: "scale-bench",
      logger: createLogger({ service: "scale-bench", level: "silent" }),
    });
    const servicesBucket = await bus.bucket(Buckets.services);
    const endpointsBucket = await bus.bucket(Buckets.endpoints);
    await eventually(
      async () =>
        (await servicesBucket.list()).length >= services && (await endpointsBucket.list()).length >= services,
      { timeoutMs: 300_000, intervalMs: 200, message: "discovery did not publish every service" },
    );

    const changedNamespace = namespaceOf(CHANGED_SERVICE, services);
    return {
      options,
      nats,
      changedNamespace,
      sidecars: (count) =>
        Array.from({ length: count }, (_, index) => {
          const s = index % services;
          const p = Math.floor(index / services) % PODS_PER_SERVICE;
          const round = Math.floor(index / (services * PODS_PER_SERVICE));
          return {
            index,
            namespace: namespaceOf(s, services),
            app: `svc-${s}`,
            // Beyond three sidecars per service the pods repeat; the round keeps node ids unique.
            podName: round === 0 ? `svc-${s}-${p}` : `svc-${s}-${p}-${round}`,
            ip: podIp(s, p),
          };
        }),
      affected: (spec) => !scoped || spec.namespace === changedNamespace,
      changeVirtualService: (change) => apply([virtualService(CHANGED_SERVICE, services, change)]),
      changeEndpoints: (change) => {
        const ips = Array.from({ length: PODS_PER_SERVICE }, (_, p) => podIp(CHANGED_SERVICE, p));
        ips[PODS_PER_SERVICE - 1] = endpointMarker(change);
        kube.apply(pod(CHANGED_SERVICE, PODS_PER_SERVICE - 1, services, ips[PODS_PER_SERVICE - 1]));
        kube.apply(endpointSlice(CHANGED_SERVICE, services, ips));
      },
      startPush: async () => {
        const xdsPort = await freePort();
        const push = await startServiceProcess("push", {
          ...quiet,
          NATS_URL: nats.url,
          XDS_PLAINTEXT_ENABLED: "true",
          XDS_PORT: String(xdsPort),
          // Plaintext sidecars only: the mTLS port would need a ca for push's certificate.
          XDS_TLS_ENABLED: "false",
        });
        processes.push(push);
        return { address: `127.0.0.1:${xdsPort}`, process: push };
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start at state (field 3).
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticksPerSecond = 100; // USER_HZ on Linux
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond;
}

/** Resident set size of a process in bytes, from /proc/<pid>/statm. */
export function rssBytes(pid: number): number {
  const pages = Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]);
  return pages * 4096;
}
