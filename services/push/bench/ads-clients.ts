// Simulated proxyless gRPC clients for the push benchmark, run as a child
// process (so they do not share an event loop with what they measure). Each
// client opens an ADS stream, subscribes to one listener and its route
// configuration, and ACKs every response, as grpc-js-xds does. On "arm" the
// process records when each client receives a route configuration with a
// new version, and reports the times to its parent.
import { credentials } from "@grpc/grpc-js";
import { AggregatedDiscoveryServiceClient, type DiscoveryResponse, TypeUrl } from "@sextant/proto/envoy";

const [address = "", countText = "0", listener = ""] = process.argv.slice(2);
const count = Number(countText);
const STREAMS_PER_CHANNEL = 50;

interface SimClient {
  routeVersion: string;
  subscribedToRoutes: boolean;
  changedAt?: number;
}

const clients: SimClient[] = [];
let armed = false;
let ready = 0;
const channels: AggregatedDiscoveryServiceClient[] = [];

for (let i = 0; i < count; i++) {
  if (i % STREAMS_PER_CHANNEL === 0) {
    // A channel of its own per batch: separate HTTP/2 connections, as separate proxies would use.
    channels.push(
      new AggregatedDiscoveryServiceClient(address, credentials.createInsecure(), {
        "grpc.use_local_subchannel_pool": 1,
        "grpc.max_receive_message_length": 64 * 1024 * 1024,
      }),
    );
  }
  const client: SimClient = { routeVersion: "", subscribedToRoutes: false };
  clients.push(client);
  const stream = channels.at(-1)!.streamAggregatedResources();
  const request = (typeUrl: string, names: string[], response?: DiscoveryResponse) =>
    stream.write({
      versionInfo: response?.versionInfo ?? "",
      node:
        response === undefined && typeUrl === TypeUrl.Listener
          ? {
              id: `sidecar~10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}~bench-${i}.default~default.svc.cluster.local`,
              cluster: "",
              metadata: { GENERATOR: "grpc", NAMESPACE: "default" },
              dynamicParameters: {},
              locality: undefined,
              userAgentName: "sextant-bench",
              userAgentVersion: undefined,
              userAgentBuildVersion: undefined,
              extensions: [],
              clientFeatures: [],
              listeningAddresses: [],
            }
          : undefined,
      resourceNames: names,
      resourceLocators: [],
      typeUrl,
      responseNonce: response?.nonce ?? "",
      errorDetail: undefined,
    });
  stream.on("data", (response: DiscoveryResponse) => {
    request(response.typeUrl, [listener], response); // ACK
    if (response.typeUrl === TypeUrl.Listener && !client.subscribedToRoutes) {
      client.subscribedToRoutes = true;
      request(TypeUrl.RouteConfiguration, [listener]);
    } else if (response.typeUrl === TypeUrl.RouteConfiguration) {
      const first = client.routeVersion === "";
      if (armed && !first && response.versionInfo !== client.routeVersion && client.changedAt === undefined) {
        client.changedAt = Date.now();
        if (clients.every((c) => c.changedAt !== undefined))
          process.send?.({ type: "changed", times: clients.map((c) => c.changedAt) });
      }
      client.routeVersion = response.versionInfo;
      if (first && ++ready === count) process.send?.({ type: "ready" });
    }
  });
  stream.on("error", () => {});
  request(TypeUrl.Listener, [listener]);
}

process.on("message", (message: { type: string }) => {
  if (message.type === "arm") {
    armed = true;
    process.send?.({ type: "armed" });
  } else if (message.type === "exit") {
    for (const channel of channels) channel.close();
    process.exit(0);
  }
});
