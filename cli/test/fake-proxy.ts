// A hand-rolled ADS client standing in for a proxyless gRPC proxy: it
// subscribes to one service's listener, route, cluster and endpoints and
// ACKs or NACKs each response as the test decides, so proxy-status has
// every state to show.
import { type ClientDuplexStream, credentials } from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  type DiscoveryRequest,
  type DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";

/** What the proxy answers a response with: ACK, a NACK's message, or nothing at all. */
export type Answer = "ack" | "silent" | { nack: string };

/** Decides the answer to each response. */
export type AnswerPolicy = (response: DiscoveryResponse) => Answer;

export class FakeProxy {
  readonly #client: AggregatedDiscoveryServiceClient;
  readonly #stream: ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>;
  readonly #acked = new Map<string, string>();
  readonly #names = new Map<string, string[]>();
  #first = true;
  policy: AnswerPolicy = () => "ack";

  /**
   * Connects as `<pod>.default` to push's plaintext xDS address and
   * subscribes to each type's names ([] is a wildcard); a gRPC proxy unless
   * `envoy` (then push serves it a sidecar's config).
   */
  constructor(
    address: string,
    readonly pod: string,
    subscriptions: Record<string, string[]>,
    readonly envoy = false,
  ) {
    this.#client = new AggregatedDiscoveryServiceClient(address, credentials.createInsecure());
    this.#stream = this.#client.streamAggregatedResources();
    this.#stream.on("data", (response: DiscoveryResponse) => this.answer(response));
    this.#stream.on("error", () => {});
    for (const [typeUrl, names] of Object.entries(subscriptions)) this.subscribe(typeUrl, names);
  }

  get id(): string {
    return `sidecar~10.0.0.1~${this.pod}.default~default.svc.cluster.local`;
  }

  private subscribe(typeUrl: string, names: string[]): void {
    this.#names.set(typeUrl, names);
    this.send({ typeUrl, resourceNames: names });
  }

  private answer(response: DiscoveryResponse): void {
    const answer = this.policy(response);
    if (answer === "silent") return;
    const request: Partial<DiscoveryRequest> = {
      typeUrl: response.typeUrl,
      resourceNames: this.#names.get(response.typeUrl) ?? [],
      responseNonce: response.nonce,
    };
    if (answer === "ack") {
      this.#acked.set(response.typeUrl, response.versionInfo);
      this.send({ ...request, versionInfo: response.versionInfo });
    } else {
      this.send({
        ...request,
        versionInfo: this.#acked.get(response.typeUrl) ?? "",
        errorDetail: { code: 3, message: answer.nack, details: [] },
      });
    }
  }

  private send(request: Partial<DiscoveryRequest>): void {
    this.#stream.write({
      versionInfo: "",
      node: this.#first
        ? Node.fromPartial({
            id: this.id,
            metadata: {
              ...(this.envoy ? {} : { GENERATOR: "grpc" }),
              NAMESPACE: "default",
              CLUSTER_ID: "Kubernetes",
              ISTIO_VERSION: "1.24.0",
            },
            userAgentName: "sextantctl-test",
          })
        : undefined,
      resourceNames: [],
      resourceLocators: [],
      typeUrl: "",
      responseNonce: "",
      errorDetail: undefined,
      ...request,
    });
    this.#first = false;
  }

  close(): void {
    this.#stream.cancel();
    this.#client.close();
  }
}

/** What a proxyless gRPC client asks for to call host:port: its listener, route, and clusters' endpoints. */
export function grpcSubscriptions(
  host: string,
  port: number,
  subsets: string[] = [],
): Record<string, string[]> {
  const clusters = ["", ...subsets].map((subset) => `outbound|${port}|${subset}|${host}`);
  return {
    [TypeUrl.Listener]: [`${host}:${port}`],
    [TypeUrl.RouteConfiguration]: [`${host}:${port}`],
    [TypeUrl.Cluster]: clusters,
    [TypeUrl.ClusterLoadAssignment]: clusters,
  };
}
