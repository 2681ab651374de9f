import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadAllYaml } from "@kubernetes/client-node";
import { Buckets, type Bus, connectBus } from "@sextant/bus";
import { createLogger } from "@sextant/observability";
import type { EndpointShard, Service } from "@sextant/proto";
import { type StartedService, startService } from "@sextant/runtime";
import {
  bookinfoPlatformFile,
  debugTokenEnv,
  type FakeKubeApiServer,
  type NatsServerFixture,
  startFakeKubeApiServer,
  startNatsServer,
} from "@sextant/testing";
// Ingest's service, run in-process from its source beside discovery's.
import { ingestService } from "../../ingest/src/main.js";
import { discoveryService } from "../src/main.js";
import type { DiscoverySettings } from "../src/settings.js";

/** A Kubernetes object as the tests build it. */
// biome-ignore lint/suspicious/noExplicitAny: test objects are plain JSON read back freely.
export type Obj = Record<string, any>;

/** A discovery replica started in-process. */
export interface DiscoveryFixture {
  readonly url: string;
  readonly service: StartedService<DiscoverySettings>;
  stop(): Promise<void>;
}

/** Writes a kubeconfig for the fake API server and returns its path. */
export function writeKubeconfig(server: FakeKubeApiServer): string {
  const path = join(mkdtempSync(join(tmpdir(), "discovery-kube-")), "kubeconfig");
  writeFileSync(path, server.kubeconfigYaml());
  return path;
}

/** Starts discovery in-process on a random HTTP port. */
export async function startDiscovery(
  natsUrl: string,
  env: Record<string, string> = {},
): Promise<DiscoveryFixture> {
  const service = await startService(discoveryService, {
    NATS_URL: natsUrl,
    HTTP_PORT: "0",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    KUBERNETES: "off",
    // /debug/registryz accepts DEBUG_HEADERS' token.
    ...debugTokenEnv(),
    ...env,
  });
  return { url: `http://127.0.0.1:${service.httpPort}`, service, stop: () => service.stop() };
}

/** Ingest started in-process on a random HTTP port: discovery creates WorkloadEntries through its real HTTP API. */
export async function startIngest(
  natsUrl: string,
  env: Record<string, string>,
): Promise<{ url: string; stop(): Promise<void> }> {
  const service = await startService(ingestService, {
    NATS_URL: natsUrl,
    HTTP_PORT: "0",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    OTEL_SDK_DISABLED: "true",
    ...env,
  });
  return { url: `http://127.0.0.1:${service.httpPort}`, stop: () => service.stop() };
}

/** A nats-server and a bus client of the test's own, to read what discovery wrote. */
export async function startNatsWithClient(): Promise<{
  nats: NatsServerFixture;
  bus: Bus;
  services(): Promise<Map<string, Service>>;
  endpoints(): Promise<Map<string, EndpointShard>>;
  close(): Promise<void>;
}> {
  const nats = await startNatsServer();
  const bus = await connectBus({
    url: nats.url,
    name: "discovery-test",
    logger: createLogger({ service: "test", level: "silent" }),
  });
  const toMap = <T>(entries: Array<{ key: string; value: T }>) =>
    new Map(entries.map((entry) => [entry.key, entry.value]));
  return {
    nats,
    bus,
    services: async () =>
      toMap((await (await bus.bucket(Buckets.services)).list()) as Array<{ key: string; value: Service }>),
    endpoints: async () =>
      toMap(
        (await (await bus.bucket(Buckets.endpoints)).list()) as Array<{ key: string; value: EndpointShard }>,
      ),
    close: async () => {
      await bus.close();
      await nats.dispose();
    },
  };
}

/** The Bookinfo platform objects (Services, ServiceAccounts, Deployments) from samples/. */
export function bookinfoObjects(): Obj[] {
  const text = readFileSync(bookinfoPlatformFile(), "utf8");
  // loadAllYaml fails on a document of comments only (the file's licence header).
  const documents = text.split(/^---\s*$/m).filter((doc) => /^[a-zA-Z]/m.test(doc));
  return (loadAllYaml(documents.join("\n---\n")) as Obj[]).map((object) => ({
    ...object,
    metadata: { namespace: "default", ...object.metadata },
  }));
}

/** Two nodes in one region, in two zones. */
export const NODES: Obj[] = [
  {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: "node-a",
      labels: { "topology.kubernetes.io/region": "eu-west", "topology.kubernetes.io/zone": "eu-west-1a" },
    },
  },
  {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: "node-b",
      labels: {
        "topology.kubernetes.io/region": "eu-west",
        "topology.kubernetes.io/zone": "eu-west-1b",
        "topology.istio.io/subzone": "rack-7",
      },
    },
  },
];

/**
 * A pod of a Deployment, as the ReplicaSet controller would create it:
 * the template's labels plus pod-template-hash, owned by the ReplicaSet,
 * scheduled on a node, Running and Ready.
 */
export function podOf(deployment: Obj, index: number, ip: string, node: string): Obj {
  const name = deployment.metadata.name as string;
  const hash = `${name.length}c9f${index % 10}d`.slice(0, 10);
  const template = deployment.spec.template;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `${name}-${hash}-${String.fromCharCode(97 + (index % 26))}x${index}`,
      namespace: deployment.metadata.namespace ?? "default",
      labels: { ...template.metadata.labels, "pod-template-hash": hash },
      ownerReferences: [
        {
          apiVersion: "apps/v1",
          kind: "ReplicaSet",
          name: `${name}-${hash}`,
          uid: `rs-${name}`,
          controller: true,
        },
      ],
    },
    spec: { ...template.spec, nodeName: node },
    status: {
      phase: "Running",
      podIP: ip,
      podIPs: [{ ip }],
      conditions: [{ type: "Ready", status: "True" }],
    },
  };
}

/** True if every selector label is on the pod. */
export function selectsPod(selector: Record<string, string> | undefined, pod: Obj): boolean {
  return Object.entries(selector ?? {}).every(([key, value]) => pod.metadata.labels?.[key] === value);
}

/**
 * The EndpointSlice the EndpointSlice controller would write for a Service
 * and its pods: IPv4, the service's ports by name with the target port,
 * readiness from the pod's Ready condition (serving too, terminating never).
 */
export function sliceOf(service: Obj, pods: Obj[], suffix = "abcde"): Obj {
  const ports = (service.spec.ports ?? []).map((port: Obj) => ({
    name: port.name ?? "",
    port: typeof port.targetPort === "number" ? port.targetPort : port.port,
    protocol: port.protocol ?? "TCP",
  }));
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `${service.metadata.name}-${suffix}`,
      namespace: service.metadata.namespace ?? "default",
      labels: {
        "kubernetes.io/service-name": service.metadata.name,
        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
      },
    },
    addressType: "IPv4",
    ports,
    endpoints: pods.map((pod) => {
      const ready = pod.status.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";
      return {
        addresses: [pod.status.podIP],
        conditions: { ready, serving: ready, terminating: false },
        nodeName: pod.spec.nodeName,
        targetRef: { kind: "Pod", name: pod.metadata.name, namespace: pod.metadata.namespace },
      };
    }),
  };
}

/** Bookinfo on a cluster: what Kubernetes would hold once the YAML is applied and the pods run. */
export interface Platform {
  readonly services: Obj[];
  readonly pods: Obj[];
  readonly slices: Obj[];
  readonly others: Obj[];
}

/** Derives the cluster state from the Bookinfo YAML: ClusterIPs, one pod per replica, one slice per Service. */
export function derivePlatform(objects: Obj[]): Platform {
  const services = objects
    .filter((o) => o.kind === "Service")
    .map((service, i) => ({
      ...service,
      spec: {
        ...service.spec,
        type: "ClusterIP",
        clusterIP: `10.96.0.${10 + i}`,
        clusterIPs: [`10.96.0.${10 + i}`],
      },
    }));
  const pods: Obj[] = [];
  for (const deployment of objects.filter((o) => o.kind === "Deployment")) {
    for (let r = 0; r < (deployment.spec.replicas ?? 1); r++) {
      const n = pods.length;
      pods.push(podOf(deployment, n, `10.244.${n % 2}.${10 + n}`, n % 2 === 0 ? "node-a" : "node-b"));
    }
  }
  const slices = services.map((service) =>
    sliceOf(
      service,
      pods.filter((pod) => selectsPod(service.spec.selector, pod)),
    ),
  );
  const others = objects.filter((o) => o.kind === "ServiceAccount");
  return { services, pods, slices, others };
}

/** Starts a fake kube-apiserver holding Bookinfo's derived state and two nodes. */
export async function startBookinfoCluster(): Promise<{ server: FakeKubeApiServer; platform: Platform }> {
  const server = await startFakeKubeApiServer({ bookmarkIntervalMs: 500 });
  const platform = derivePlatform(bookinfoObjects());
  for (const object of [
    ...NODES,
    ...platform.others,
    ...platform.pods,
    ...platform.services,
    ...platform.slices,
  ])
    server.apply(object);
  return { server, platform };
}

/** Sets a pod's readiness, and its slice's conditions as the EndpointSlice controller would. */
export function setPodReady(server: FakeKubeApiServer, pod: Obj, ready: boolean): void {
  const current = server.get({
    apiVersion: "v1",
    kind: "Pod",
    name: pod.metadata.name,
    namespace: "default",
  }) as Obj;
  server.apply({
    ...current,
    apiVersion: "v1",
    kind: "Pod",
    status: { ...current.status, conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
  });
  for (const slice of server.objects(
    { group: "discovery.k8s.io", resource: "endpointslices" },
    "default",
  ) as Obj[]) {
    if (!slice.endpoints?.some((e: Obj) => e.targetRef?.name === pod.metadata.name)) continue;
    server.apply({
      ...slice,
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      endpoints: slice.endpoints.map((e: Obj) =>
        e.targetRef?.name === pod.metadata.name
          ? { ...e, conditions: { ready, serving: ready, terminating: false } }
          : e,
      ),
    });
  }
}
