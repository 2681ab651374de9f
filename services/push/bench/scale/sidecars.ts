// Simulated Envoy sidecars for the scale benchmark, run as worker processes
// of it (several, so the load generator spreads over the cores and does not
// share an event loop with what it measures). Each sidecar opens one ADS
// stream with Istio's sidecar node metadata and behaves as Envoy does on
// start: wildcard CDS, then EDS for the EDS clusters it got, wildcard LDS,
// then RDS for the route names its listeners fetch; every response is ACKed
// and the EDS/RDS subscriptions follow CDS/LDS. State of the world by
// default, incremental (delta) xDS with `delta: true`.
//
// The parent drives it with messages (see ScaleWorkerCommand) and gets times
// (Date.now(), one clock for every process on the machine) back.
import { Client, type ClientDuplexStream, credentials } from "@grpc/grpc-js";
import { DeltaDiscoveryRequest, DiscoveryRequest, TypeUrl } from "@sextant/proto/envoy";
import {
  edsServiceName,
  parseDeltaResponse,
  parseResponse,
  type RawResponse,
  rdsRouteNames,
} from "./wire.js";

/** One simulated sidecar: a pod of app in namespace. */
export interface SidecarSpec {
  readonly index: number;
  readonly namespace: string;
  readonly app: string;
  readonly podName: string;
  readonly ip: string;
  /** host:port of the ADS server it connects to. */
  readonly address: string;
}

export type ScaleWorkerCommand =
  | { type: "connect"; sidecars: SidecarSpec[]; delta: boolean; recorder?: number }
  | { type: "arm"; typeUrl: string; marker: string; expected: number[] }
  | { type: "stats" }
  | { type: "record" }
  | { type: "close" };

export type ScaleWorkerEvent =
  | { type: "converged"; times: { index: number; connectAt: number; convergedAt: number }[] }
  | { type: "armed" }
  | { type: "observed"; times: number[] }
  | { type: "stats"; bytes: number; responses: number; lastResponseAt: number; converged: number }
  | { type: "recorded"; state: Record<string, string[]>; change: string[] }
  | { type: "closed" };

const SOTW_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
/** Sidecars per HTTP/2 connection: real Envoys have one each; a few per channel keeps the generator light. */
const SIDECARS_PER_CHANNEL = 10;
const FOUR_TYPES = [
  TypeUrl.Cluster,
  TypeUrl.ClusterLoadAssignment,
  TypeUrl.Listener,
  TypeUrl.RouteConfiguration,
];

const rawBuffer = (buffer: Buffer) => buffer;

let bytes = 0;
let responses = 0;
let lastResponseAt = 0;
let convergedCount = 0;
let armed: { typeUrl: string; marker: Buffer; pending: Set<number>; times: number[] } | undefined;
const recording = { state: new Map<string, Map<string, Uint8Array>>(), change: [] as Uint8Array[] };
const channels: Client[] = [];
const streams: ClientDuplexStream<unknown, Buffer>[] = [];

function node(spec: SidecarSpec) {
  return {
    id: `sidecar~${spec.ip}~${spec.podName}.${spec.namespace}~${spec.namespace}.svc.cluster.local`,
    cluster: `${spec.app}.${spec.namespace}`,
    metadata: {
      NAMESPACE: spec.namespace,
      LABELS: { app: spec.app, version: "v1", "security.istio.io/tlsMode": "istio" },
      ISTIO_VERSION: "1.30.3",
      CLUSTER_ID: "Kubernetes",
      MESH_ID: "cluster.local",
      SERVICE_ACCOUNT: `sa-${spec.app}`,
      INSTANCE_IPS: spec.ip,
      INTERCEPTION_MODE: "REDIRECT",
      WORKLOAD_NAME: spec.app,
      NAME: spec.podName,
      POD_PORTS: '[{"name":"http","containerPort":8080,"protocol":"TCP"}]',
      APP_CONTAINERS: "app",
    },
    dynamicParameters: {},
    locality: undefined,
    userAgentName: "envoy",
    userAgentVersion: undefined,
    userAgentBuildVersion: undefined,
    extensions: [],
    clientFeatures: ["envoy.lb.does_not_support_overprovisioning"],
    listeningAddresses: [],
  };
}

/** One sidecar's subscriptions: the names it asks for, per type, and what it has ACKed. */
class Sidecar {
  private readonly names = new Map<string, string[]>();
  private readonly acked = new Set<string>();
  private readonly deltaNames = new Map<string, Set<string>>();
  private readonly connectAt = Date.now();
  convergedAt = 0;
  private stream!: ClientDuplexStream<unknown, Buffer>;

  constructor(
    readonly spec: SidecarSpec,
    private readonly delta: boolean,
    private readonly recorder: boolean,
    private readonly onConverged: (sidecar: Sidecar, connectAt: number) => void,
  ) {}

  start(channel: Client) {
    const serialize = (request: unknown) =>
      Buffer.from(
        this.delta
          ? DeltaDiscoveryRequest.encode(request as DeltaDiscoveryRequest).finish()
          : DiscoveryRequest.encode(request as DiscoveryRequest).finish(),
      );
    this.stream = channel.makeBidiStreamRequest(this.delta ? DELTA_PATH : SOTW_PATH, serialize, rawBuffer);
    streams.push(this.stream);
    this.stream.on("data", (buffer: Buffer) => this.receive(buffer));
    this.stream.on("error", () => {});
    this.request(TypeUrl.Cluster, [], undefined, true);
  }

  private request(typeUrl: string, names: string[], response: RawResponse | undefined, first = false) {
    if (this.delta) {
      const known = this.deltaNames.get(typeUrl) ?? new Set<string>();
      const subscribe = names.filter((name) => !known.has(name));
      const unsubscribe = [...known].filter((name) => !names.includes(name));
      this.deltaNames.set(typeUrl, new Set(names));
      this.stream.write(
        DeltaDiscoveryRequest.fromPartial({
          node: first ? node(this.spec) : undefined,
          typeUrl,
          resourceNamesSubscribe: subscribe,
          resourceNamesUnsubscribe: unsubscribe,
          responseNonce: response?.nonce ?? "",
        }),
      );
      return;
    }
    this.names.set(typeUrl, names);
    this.stream.write(
      DiscoveryRequest.fromPartial({
        versionInfo: response?.versionInfo ?? "",
        node: first ? node(this.spec) : undefined,
        resourceNames: names,
        typeUrl,
        responseNonce: response?.nonce ?? "",
      }),
    );
  }

  /** Delta: the current set of resources of a type, after this response. */
  private readonly deltaState = new Map<string, Map<string, RawResponse["resources"][number]>>();

  private receive(buffer: Buffer) {
    bytes += buffer.length;
    responses++;
    lastResponseAt = Date.now();
    const response = this.delta ? parseDeltaResponse(buffer) : parseResponse(buffer);
    const { typeUrl } = response;
    let resources = response.resources;
    if (this.delta) {
      const state = this.deltaState.get(typeUrl) ?? new Map();
      this.deltaState.set(typeUrl, state);
      for (const name of response.removed) state.delete(name);
      for (const resource of response.resources) state.set(resource.name, resource);
      resources = [...state.values()];
    }
    if (this.recorder) {
      // A SotW EDS response that is not the whole set (push's endpoint pushes,
      // as Istio's) updates what the proxy holds; any other replaces it.
      const partial = !this.delta && typeUrl === TypeUrl.ClusterLoadAssignment;
      const state = new Map<string, Uint8Array>(partial ? recording.state.get(typeUrl) : undefined);
      for (const resource of resources) state.set(resource.name, Uint8Array.from(resource.any));
      recording.state.set(typeUrl, state);
    }
    // ACK with the names this response makes current (an Envoy ACKs and resubscribes in one request).
    const keep = this.delta ? [...(this.deltaNames.get(typeUrl) ?? [])] : (this.names.get(typeUrl) ?? []);
    this.request(typeUrl, keep, response);
    const firstOfType = !this.acked.has(typeUrl);
    this.acked.add(typeUrl);
    if (typeUrl === TypeUrl.Cluster) {
      const eds = resources.map(edsServiceName).filter((name): name is string => name !== undefined);
      this.follow(TypeUrl.ClusterLoadAssignment, eds.sort());
      if (firstOfType) this.request(TypeUrl.Listener, [], undefined);
    } else if (typeUrl === TypeUrl.Listener) {
      this.follow(TypeUrl.RouteConfiguration, [...new Set(resources.flatMap(rdsRouteNames))].sort());
    }
    if (
      armed?.typeUrl === typeUrl &&
      armed.pending.has(this.spec.index) &&
      buffer.indexOf(armed.marker) >= 0
    ) {
      armed.pending.delete(this.spec.index);
      armed.times.push(Date.now());
      if (this.recorder)
        recording.change = response.resources.map((resource) => Uint8Array.from(resource.any));
      if (armed.pending.size === 0) send({ type: "observed", times: armed.times });
    }
    if (!this.convergedAt && FOUR_TYPES.every((type) => this.acked.has(type))) {
      this.convergedAt = Date.now();
      this.onConverged(this, this.connectAt);
    }
  }

  /** Subscribes to exactly these names of a type, when they differ from what it asked for. */
  private follow(typeUrl: string, names: string[]) {
    const current = this.delta ? [...(this.deltaNames.get(typeUrl) ?? [])].sort() : this.names.get(typeUrl);
    if (current && current.length === names.length && current.every((name, i) => name === names[i])) return;
    this.request(typeUrl, names, undefined);
  }
}

function send(event: ScaleWorkerEvent) {
  process.send?.(event);
}

function connect(command: Extract<ScaleWorkerCommand, { type: "connect" }>) {
  convergedCount = 0;
  const times: { index: number; connectAt: number; convergedAt: number }[] = [];
  const byAddress = new Map<string, { channel: Client; count: number }>();
  for (const spec of command.sidecars) {
    let entry = byAddress.get(spec.address);
    if (!entry || entry.count === SIDECARS_PER_CHANNEL) {
      // A channel of its own per batch: separate HTTP/2 connections, as separate proxies would use.
      entry = {
        channel: new Client(spec.address, credentials.createInsecure(), {
          "grpc.use_local_subchannel_pool": 1,
          "grpc.max_receive_message_length": 256 * 1024 * 1024,
        }),
        count: 0,
      };
      channels.push(entry.channel);
      byAddress.set(spec.address, entry);
    }
    entry.count++;
    const sidecar = new Sidecar(spec, command.delta, spec.index === command.recorder, (done, connectAt) => {
      times.push({ index: done.spec.index, connectAt, convergedAt: done.convergedAt });
      convergedCount = times.length;
      if (times.length === command.sidecars.length) send({ type: "converged", times });
    });
    sidecar.start(entry.channel);
  }
  // Progress for a run that takes long: how many converged so far, on stderr.
  const progress = setInterval(() => {
    if (times.length === command.sidecars.length) clearInterval(progress);
    else
      console.error(
        `sidecar worker ${process.pid}: ${times.length}/${command.sidecars.length} converged, ${(bytes / 2 ** 20).toFixed(0)} MB received`,
      );
  }, 15_000);
}

process.on("message", (command: ScaleWorkerCommand) => {
  switch (command.type) {
    case "connect":
      connect(command);
      break;
    case "arm":
      armed = {
        typeUrl: command.typeUrl,
        marker: Buffer.from(command.marker),
        pending: new Set(command.expected),
        times: [],
      };
      bytes = 0;
      responses = 0;
      send({ type: "armed" });
      if (command.expected.length === 0) send({ type: "observed", times: [] });
      break;
    case "stats":
      send({ type: "stats", bytes, responses, lastResponseAt, converged: convergedCount });
      break;
    case "record":
      send({
        type: "recorded",
        state: Object.fromEntries(
          [...recording.state].map(([typeUrl, state]) => [
            typeUrl,
            [...state.values()].map((any) => Buffer.from(any).toString("base64")),
          ]),
        ),
        change: recording.change.map((any) => Buffer.from(any).toString("base64")),
      });
      break;
    case "close":
      for (const stream of streams) stream.cancel();
      for (const channel of channels) channel.close();
      streams.length = 0;
      channels.length = 0;
      armed = undefined;
      send({ type: "closed" });
      break;
  }
});
