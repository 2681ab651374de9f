// Light proxyless clients for the soak: one ADS stream each, with a gRPC
// proxyless node (GENERATOR grpc), asking for what a grpc-js-xds channel to
// xds:///<host>:80 asks for: the listener, its route configuration, the
// cluster and its endpoints, each response ACKed. They decode only what the
// soak checks (which endpoint and config change each one last saw), so 200
// of them fit in the harness's process beside the sampler; 200 grpc-js-xds
// channels would each run a resolver, load balancers and their own decode.
import { type ClientDuplexStream, credentials } from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  ClusterLoadAssignment,
  type DiscoveryRequest,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import {
  configChangeMarker,
  endpointChangeOf,
  SOAK_CLUSTER,
  SOAK_LISTENER,
  SOAK_NAMESPACE,
} from "./soak-mesh.js";

/** Streams per HTTP/2 connection: a real proxyless app has one; a few per channel keeps the harness light. */
const CLIENTS_PER_CHANNEL = 10;

const SUBSCRIPTIONS: [string, string][] = [
  [TypeUrl.Listener, SOAK_LISTENER],
  [TypeUrl.RouteConfiguration, SOAK_LISTENER],
  [TypeUrl.Cluster, SOAK_CLUSTER],
  [TypeUrl.ClusterLoadAssignment, SOAK_CLUSTER],
];
const CONFIG_MARKER = new RegExp(`${configChangeMarker(0).replace(/0$/, "")}(\\d+)`);

/** What one client last saw and ACKed. */
export interface SoakClientState {
  readonly nodeId: string;
  /** The endpoint change its last EDS response carried (-1: none yet). */
  endpointChange: number;
  /** The config change its last RDS response carried (-1: none yet). */
  configChange: number;
  /** Per type: the version it ACKed last. */
  readonly acked: Map<string, string>;
  /** Responses received, and NACKs sent (never, unless a response does not decode). */
  responses: number;
  nacks: number;
  /** The status its stream ended with, if it ended. */
  ended?: string;
}

export interface SoakClients {
  readonly states: SoakClientState[];
  close(): void;
}

/** Opens count clients, spread round-robin over the push replicas' addresses. */
export function startSoakClients(count: number, addresses: string[]): SoakClients {
  const channels: AggregatedDiscoveryServiceClient[] = [];
  const streams: ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>[] = [];
  const states: SoakClientState[] = [];
  for (let index = 0; index < count; index++) {
    const replica = index % addresses.length;
    const channelIndex =
      Math.floor(index / (addresses.length * CLIENTS_PER_CHANNEL)) * addresses.length + replica;
    channels[channelIndex] ??= new AggregatedDiscoveryServiceClient(
      addresses[replica] as string,
      credentials.createInsecure(),
    );
    const channel = channels[channelIndex];
    const nodeId = `sidecar~10.2.${index >> 8}.${index & 255}~soak-client-${index}.${SOAK_NAMESPACE}~${SOAK_NAMESPACE}.svc.cluster.local`;
    const state: SoakClientState = {
      nodeId,
      endpointChange: -1,
      configChange: -1,
      acked: new Map(),
      responses: 0,
      nacks: 0,
    };
    states.push(state);
    const stream = channel.streamAggregatedResources();
    streams.push(stream);
    const node = Node.fromPartial({
      id: nodeId,
      metadata: { GENERATOR: "grpc", NAMESPACE: SOAK_NAMESPACE, SERVICE_ACCOUNT: "soak-client" },
      userAgentName: "grpc-node-js",
    });
    const request = (typeUrl: string, name: string, response?: DiscoveryResponse, error?: string) =>
      stream.write({
        versionInfo: response && !error ? response.versionInfo : (state.acked.get(typeUrl) ?? ""),
        node: response ? undefined : node,
        resourceNames: [name],
        resourceLocators: [],
        typeUrl,
        responseNonce: response?.nonce ?? "",
        errorDetail: error ? { code: 3, message: error, details: [] } : undefined,
      });
    stream.on("data", (response: DiscoveryResponse) => {
      state.responses++;
      const name = SUBSCRIPTIONS.find(([typeUrl]) => typeUrl === response.typeUrl)?.[1];
      if (!name) return;
      try {
        observe(state, response);
      } catch (error) {
        state.nacks++;
        request(response.typeUrl, name, response, (error as Error).message);
        return;
      }
      state.acked.set(response.typeUrl, response.versionInfo);
      request(response.typeUrl, name, response);
    });
    stream.on("error", (error: Error) => {
      state.ended = error.message;
    });
    stream.on("end", () => {
      state.ended ??= "stream ended";
    });
    for (const [typeUrl, name] of SUBSCRIPTIONS) request(typeUrl, name);
  }
  return {
    states,
    close() {
      for (const stream of streams) stream.cancel();
      for (const channel of channels) channel.close();
    },
  };
}

/** Records which endpoint or config change a response carries. */
function observe(state: SoakClientState, response: DiscoveryResponse): void {
  if (response.typeUrl === TypeUrl.ClusterLoadAssignment) {
    for (const resource of response.resources) {
      const assignment = ClusterLoadAssignment.decode(resource.value);
      for (const group of assignment.endpoints)
        for (const lb of group.lbEndpoints) {
          const change = endpointChangeOf(lb.endpoint?.address?.socketAddress?.address ?? "");
          if (change !== undefined) state.endpointChange = change;
        }
    }
  } else if (response.typeUrl === TypeUrl.RouteConfiguration) {
    for (const resource of response.resources) {
      const match = CONFIG_MARKER.exec(Buffer.from(resource.value).toString("latin1"));
      if (match) state.configChange = Number(match[1]);
    }
  }
}
