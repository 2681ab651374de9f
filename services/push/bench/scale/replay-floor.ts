// The sidecar-scale benchmark's floor: an ADS server (state of the world)
// that serves Envoy sidecars bytes recorded from push, with no translation.
// It answers CDS and LDS with every recorded resource, EDS and RDS with the
// recorded resources of the names asked for, and on "change" sends recorded
// resources to every stream of a namespace (or every stream) subscribed to
// that type. Its only work per response is framing pre-encoded resources,
// so its CPU and latency are what serving push's bytes costs in Node.
import { Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import { AggregatedDiscoveryServiceService, type DiscoveryRequest, TypeUrl } from "@sextant/proto/envoy";
import { encodeResponse, parseResponse } from "./wire.js";

export type ReplayFloorCommand =
  | { type: "load"; state: Record<string, string[]> }
  | { type: "change"; typeUrl: string; resources: string[]; namespace?: string }
  | { type: "exit" };

export type ReplayFloorEvent = { type: "listening"; port: number } | { type: "sent" };

type Stream = ServerDuplexStream<DiscoveryRequest, Buffer>;
interface StreamState {
  namespace: string;
  names: Map<string, string[]>;
}

/** Per type: resource name → encoded Any. */
const state = new Map<string, Map<string, Uint8Array>>();
const streams = new Map<Stream, StreamState>();
const WILDCARD = new Set<string>([TypeUrl.Cluster, TypeUrl.Listener]);
let version = 1;
let nonce = 0;

function decodeState(encoded: string[]): Map<string, Uint8Array> {
  const resources = new Map<string, Uint8Array>();
  for (const base64 of encoded) {
    const any = Buffer.from(base64, "base64");
    // The resource's name is read the same way the sidecars read it: wrap the Any in a response.
    const [resource] = parseResponse(encodeResponse("", "", "", [any])).resources;
    if (resource) resources.set(resource.name, any);
  }
  return resources;
}

function respond(stream: Stream, typeUrl: string, anys: Uint8Array[]) {
  stream.write(encodeResponse(String(version), typeUrl, String(++nonce), anys));
}

function current(typeUrl: string, names: readonly string[]): Uint8Array[] {
  const resources = state.get(typeUrl) ?? new Map<string, Uint8Array>();
  if (WILDCARD.has(typeUrl)) return [...resources.values()];
  return names.flatMap((name) => {
    const any = resources.get(name);
    return any ? [any] : [];
  });
}

const sameNames = (a: readonly string[] | undefined, b: readonly string[]) =>
  a !== undefined && a.length === b.length && a.every((name, i) => name === b[i]);

const service = {
  ...AggregatedDiscoveryServiceService,
  streamAggregatedResources: {
    ...AggregatedDiscoveryServiceService.streamAggregatedResources,
    responseSerialize: (buffer: Buffer) => buffer,
  },
};

const server = new Server({ "grpc.max_send_message_length": 256 * 1024 * 1024 });
server.addService(service, {
  streamAggregatedResources: (stream: Stream) => {
    const stream_: StreamState = { namespace: "", names: new Map() };
    streams.set(stream, stream_);
    stream.on("data", (request: DiscoveryRequest) => {
      if (request.node) {
        const metadata = (request.node.metadata ?? {}) as Record<string, unknown>;
        stream_.namespace = typeof metadata.NAMESPACE === "string" ? metadata.NAMESPACE : "";
      }
      const names = request.resourceNames;
      // An ACK of what it has is answered with nothing; a new subscription or new names with the resources.
      if (request.responseNonce && sameNames(stream_.names.get(request.typeUrl), names)) return;
      stream_.names.set(request.typeUrl, names);
      respond(stream, request.typeUrl, current(request.typeUrl, names));
    });
    stream.on("close", () => streams.delete(stream));
    stream.on("error", () => streams.delete(stream));
  },
  // State of the world only: the delta rows have no floor.
  deltaAggregatedResources: (stream: ServerDuplexStream<unknown, unknown>) => stream.end(),
});
server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, port) => {
  if (error) throw error;
  send({ type: "listening", port });
});

function send(event: ReplayFloorEvent) {
  process.send?.(event);
}

process.on("message", (command: ReplayFloorCommand) => {
  if (command.type === "load") {
    for (const [typeUrl, encoded] of Object.entries(command.state)) state.set(typeUrl, decodeState(encoded));
  } else if (command.type === "change") {
    version++;
    const changed = decodeState(command.resources);
    const resources = state.get(command.typeUrl) ?? new Map<string, Uint8Array>();
    for (const [name, any] of changed) resources.set(name, any);
    state.set(command.typeUrl, resources);
    const anys = [...changed.values()];
    for (const [stream, stream_] of streams) {
      if (command.namespace !== undefined && stream_.namespace !== command.namespace) continue;
      if (!stream_.names.has(command.typeUrl)) continue;
      respond(stream, command.typeUrl, anys);
    }
    send({ type: "sent" });
  } else if (command.type === "exit") {
    server.forceShutdown();
    process.exit(0);
  }
});
