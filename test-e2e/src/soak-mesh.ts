// The soak's control plane: a real nats-server, the fake kube-apiserver (in
// this process) holding one Kubernetes Service with three ready pods behind
// an EndpointSlice, discovery reading it, ingest holding the service's
// VirtualService, and push replicas, all as processes. Endpoint changes go in
// through discovery's input (the third pod moves to a new address, as a
// rescheduled pod would), config changes through ingest's HTTP API; each
// change carries its number, so a client can tell which change it last saw.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import {
  debugTokenEnv,
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

export const SOAK_NAMESPACE = "soak";
const SERVICE = "echo";
export const SOAK_HOST = `${SERVICE}.${SOAK_NAMESPACE}.svc.cluster.local`;
/** The listener (and route configuration) a proxyless client asks for: host:port, as gRPC's xds: target names it. */
export const SOAK_LISTENER = `${SOAK_HOST}:80`;
export const SOAK_CLUSTER = `outbound|80||${SOAK_HOST}`;
const PODS = 3;
const podIp = (pod: number) => `10.1.0.${pod + 1}`;

/**
 * The address endpoint change n moves the third pod to: 10.(100+hi).mid.lo, so
 * the change's number can be read back from an EDS response (up to ~1.6 M changes).
 */
export const endpointChangeAddress = (n: number) => `10.${100 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
/** The change number an address of endpointChangeAddress carries, or undefined for any other address. */
export function endpointChangeOf(address: string): number | undefined {
  const match = /^10\.(1\d\d)\.(\d+)\.(\d+)$/.exec(address);
  if (!match) return undefined;
  return ((Number(match[1]) - 100) << 16) + (Number(match[2]) << 8) + Number(match[3]);
}
/** The header value config change n matches on: it appears in the route configuration push sends. */
export const configChangeMarker = (n: number) => `soak-change-${n}`;

function pod(index: number, ip: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `${SERVICE}-${index}`, namespace: SOAK_NAMESPACE, labels: { app: SERVICE } },
    spec: { serviceAccountName: SERVICE, nodeName: "node-0", containers: [{ name: "app" }] },
    status: { phase: "Running", podIP: ip, conditions: [{ type: "Ready", status: "True" }] },
  } as KubeObject;
}

function endpointSlice(ips: string[]): KubeObject {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${SERVICE}-abc`,
      namespace: SOAK_NAMESPACE,
      labels: { "kubernetes.io/service-name": SERVICE },
    },
    addressType: "IPv4",
    ports: [{ name: "grpc", port: 8080, protocol: "TCP" }],
    endpoints: ips.map((ip, index) => ({
      addresses: [ip],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: "node-0",
      targetRef: { kind: "Pod", name: `${SERVICE}-${index}`, namespace: SOAK_NAMESPACE },
    })),
  } as KubeObject;
}

/** Config change n: a header-matched route carrying the change's marker, then the default route. */
const virtualService = (n: number) =>
  stringify({
    apiVersion: "networking.istio.io/v1",
    kind: "VirtualService",
    metadata: { name: SERVICE, namespace: SOAK_NAMESPACE },
    spec: {
      hosts: [SOAK_HOST],
      http: [
        {
          match: [{ headers: { "x-soak": { exact: configChangeMarker(n) } } }],
          route: [{ destination: { host: SOAK_HOST } }],
        },
        { route: [{ destination: { host: SOAK_HOST } }] },
      ],
    },
  });

/** A soaked service: its process and the port of its memory probe (soak-probe.mjs). */
export interface SoakedService {
  readonly name: string;
  readonly process: ServiceProcess;
  readonly probePort: number;
}

export interface SoakMesh {
  readonly nats: NatsServerFixture;
  /** ingest, discovery, push-0, push-1, …: every process whose memory the soak records. */
  readonly services: SoakedService[];
  /** host:port of each push replica's plaintext ADS server. */
  readonly xdsAddresses: string[];
  /** Moves the third pod to endpointChangeAddress(n), in the fake kube-apiserver. */
  changeEndpoints(n: number): void;
  /** Applies config change n through ingest's /v1/apply. */
  changeConfig(n: number): Promise<void>;
  /** Stops everything; once (later calls wait for the first). */
  close(): Promise<void>;
}

export interface SoakMeshOptions {
  pushReplicas: number;
  /** The push replica (by index) given the test's leak injection (soak-leak.mjs), if any. */
  leakyPush?: number;
}

const preload = (file: string) => `--import=${pathToFileURL(join(import.meta.dirname, file)).href}`;

/** Starts a service with the memory probe (and the leak, if asked for) preloaded. */
async function startSoaked(
  service: string,
  name: string,
  env: Record<string, string>,
  leak = false,
): Promise<SoakedService> {
  const probePort = await freePort();
  const process = await startServiceProcess(service, {
    ...env,
    NODE_OPTIONS: [
      globalThis.process.env.NODE_OPTIONS,
      preload("soak-probe.mjs"),
      leak && preload("soak-leak.mjs"),
    ]
      .filter(Boolean)
      .join(" "),
    SOAK_PROBE_PORT: String(probePort),
  });
  return { name, process, probePort };
}

export async function startSoakMesh(options: SoakMeshOptions): Promise<SoakMesh> {
  const nats = await startNatsServer();
  // Bookmarks as rarely as the real server's: they are not what is soaked.
  const kube: FakeKubeApiServer = await startFakeKubeApiServer({ bookmarkIntervalMs: 60_000 });
  const services: SoakedService[] = [];
  let bus: Bus | undefined;
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      for (const service of [...services].reverse()) await service.process.stop();
      await bus?.close();
      await kube.close();
      await nats.dispose();
    })();
    return closing;
  };
  try {
    kube.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: SOAK_NAMESPACE } } as KubeObject);
    kube.apply({ apiVersion: "v1", kind: "Node", metadata: { name: "node-0" } } as KubeObject);
    kube.apply({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: SERVICE, namespace: SOAK_NAMESPACE, labels: { app: SERVICE } },
      spec: {
        clusterIP: "10.96.0.10",
        selector: { app: SERVICE },
        ports: [{ name: "grpc", port: 80, targetPort: 8080, protocol: "TCP" }],
      },
    } as KubeObject);
    const ips = Array.from({ length: PODS }, (_, index) => podIp(index));
    for (const [index, ip] of ips.entries()) kube.apply(pod(index, ip));
    kube.apply(endpointSlice(ips));
    const kubeconfig = join(mkdtempSync(join(tmpdir(), "sextant-soak-")), "kubeconfig");
    writeFileSync(kubeconfig, kube.kubeconfigYaml());
    // Info logs at ten changes a second would only measure the pipe to this process.
    const quiet = { LOG_LEVEL: "warn" };
    const ingest = await startSoaked("ingest", "ingest", { ...quiet, NATS_URL: nats.url, API_AUTH: "none" });
    services.push(ingest);
    services.push(
      await startSoaked("discovery", "discovery", {
        ...quiet,
        NATS_URL: nats.url,
        KUBERNETES: "on",
        KUBECONFIG: kubeconfig,
      }),
    );
    const changeConfig = async (n: number) => {
      const response = await fetch(`http://127.0.0.1:${ingest.process.httpPort}/v1/apply`, {
        method: "POST",
        body: virtualService(n),
      });
      if (!response.ok) throw new Error(`ingest apply: ${response.status} ${await response.text()}`);
    };
    await changeConfig(0);
    bus = await connectBus({
      url: nats.url,
      name: "soak",
      logger: createLogger({ service: "soak", level: "silent" }),
    });
    const endpointsBucket = await bus.bucket(Buckets.endpoints);
    await eventually(
      async () =>
        (await endpointsBucket.list()).some(
          (entry) => entry.value.hostname === SOAK_HOST && entry.value.endpoints.length === PODS,
        ),
      {
        timeoutMs: 60_000,
        intervalMs: 200,
        message: "discovery never published the soak service's endpoints",
      },
    );
    const xdsAddresses: string[] = [];
    for (let replica = 0; replica < options.pushReplicas; replica++) {
      const xdsPort = await freePort();
      const push = await startSoaked(
        "push",
        `push-${replica}`,
        {
          ...quiet,
          NATS_URL: nats.url,
          ...debugTokenEnv(),
          XDS_PLAINTEXT_ENABLED: "true",
          XDS_PORT: String(xdsPort),
          // Plaintext proxyless clients only: the mTLS port would need a ca for push's certificate.
          XDS_TLS_ENABLED: "false",
          REPLICA_ID: `push-${replica}`,
        },
        replica === options.leakyPush,
      );
      services.push(push);
      xdsAddresses.push(`127.0.0.1:${xdsPort}`);
    }
    return {
      nats,
      services,
      xdsAddresses,
      changeEndpoints(n) {
        const moved = [...ips];
        moved[PODS - 1] = endpointChangeAddress(n);
        kube.apply(pod(PODS - 1, endpointChangeAddress(n)));
        kube.apply(endpointSlice(moved));
      },
      changeConfig,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
