// The benchmark's floor: an ADS server that does no translation at all. It
// answers every listener and route request with pre-encoded resources and,
// on "change", fans one new pre-encoded route configuration out to every
// stream. What push adds on top of this is the cost of being a control plane.
//
// With `--replay` it is the sidecar-scale benchmark's floor instead
// (scale/replay-floor.ts): it serves bytes recorded from push.
import { Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import { packAny } from "@sextant/proto";
import {
  AggregatedDiscoveryServiceService,
  type DiscoveryRequest,
  type DiscoveryResponse,
  Listener,
  RouteConfiguration,
  TypeUrl,
} from "@sextant/proto/envoy";

const [listenerName = ""] = process.argv.slice(2);
if (listenerName === "--replay") await import("./scale/replay-floor.js");
else serveProxyless();

function serveProxyless() {
  const listener = packAny(TypeUrl.Listener, Listener, Listener.fromPartial({ name: listenerName }));
  const routes = (weight: number) =>
    packAny(
      TypeUrl.RouteConfiguration,
      RouteConfiguration,
      RouteConfiguration.fromPartial({
        name: listenerName,
        virtualHosts: [
          {
            name: listenerName,
            domains: [listenerName],
            routes: [
              {
                match: { prefix: "/" },
                route: {
                  weightedClusters: {
                    clusters: [
                      { name: "outbound|9080|v1|svc-0", weight },
                      { name: "outbound|9080|v2|svc-0", weight: 100 - weight },
                    ],
                  },
                },
              },
            ],
          },
        ],
      }),
    );
  let current = { version: "1", resource: routes(90) };
  const streams = new Set<ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>>();
  let nonce = 0;
  const send = (stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>, typeUrl: string) =>
    stream.write({
      versionInfo: typeUrl === TypeUrl.Listener ? "1" : current.version,
      resources: [typeUrl === TypeUrl.Listener ? listener : current.resource],
      canary: false,
      typeUrl,
      nonce: String(++nonce),
      controlPlane: undefined,
    });

  const server = new Server();
  server.addService(AggregatedDiscoveryServiceService, {
    streamAggregatedResources: (stream: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>) => {
      streams.add(stream);
      stream.on("data", (request: DiscoveryRequest) => {
        if (!request.responseNonce) send(stream, request.typeUrl); // a new subscription; ACKs get nothing
      });
      stream.on("close", () => streams.delete(stream));
      stream.on("error", () => streams.delete(stream));
    },
    deltaAggregatedResources: () => {},
  });
  server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, port) => {
    if (error) throw error;
    process.send?.({ type: "listening", port });
  });
  process.on("message", (message: { type: string }) => {
    if (message.type === "change") {
      current = { version: String(Number(current.version) + 1), resource: routes(50) };
      for (const stream of streams) send(stream, TypeUrl.RouteConfiguration);
    } else if (message.type === "exit") {
      server.forceShutdown();
      process.exit(0);
    }
  });
}
