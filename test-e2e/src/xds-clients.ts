// Hand-rolled xDS clients for the security tests: they send exactly what a
// proxy would, and report what came back, so a test can check a refusal's
// status or a secret's content.
import { type ChannelCredentials, credentials, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { unpackAny } from "@sextant/proto";
import {
  AggregatedDiscoveryServiceClient,
  type DiscoveryResponse,
  Secret,
  SecretDiscoveryServiceClient,
  TypeUrl,
} from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { Agent } from "./secure-mesh.js";

/** An xDS node with the given id and metadata, every other field empty. */
function proxyNode(id: string, metadata: Record<string, unknown>) {
  return Node.fromPartial({ id, metadata, userAgentName: "e2e" });
}

/** How an ADS stream through an agent ended: OK once a response arrived, or the error status. */
export interface AdsOutcome {
  code: GrpcStatus;
  details: string;
}

/** An open ADS stream: how its first answer went, and the way to close it. */
export interface AdsStream {
  /** OK once a response arrived, or the status the stream ended with (DEADLINE_EXCEEDED if neither in time). */
  readonly first: Promise<AdsOutcome>;
  close(): void;
}

/** A proxyless node: its id, namespace and service account, and any other metadata (AUTO_REGISTER_GROUP, INSTANCE_IPS). */
export interface ProxylessNode {
  id: string;
  namespace: string;
  serviceAccount: string;
  metadata?: Record<string, unknown>;
}

/**
 * Opens an ADS stream to address with the given credentials and node and
 * asks for listeners; the stream stays open (a connected proxy) until
 * closed.
 */
export function openAds(
  address: string,
  channelCredentials: ChannelCredentials,
  node: ProxylessNode,
  timeoutMs = 20_000,
): AdsStream {
  const client = new AggregatedDiscoveryServiceClient(address, channelCredentials);
  const stream = client.streamAggregatedResources();
  let timer: NodeJS.Timeout | undefined;
  const close = () => {
    clearTimeout(timer);
    stream.cancel();
    client.close();
  };
  const first = new Promise<AdsOutcome>((resolve) => {
    timer = setTimeout(
      () => resolve({ code: GrpcStatus.DEADLINE_EXCEEDED, details: `nothing within ${timeoutMs} ms` }),
      timeoutMs,
    );
    stream.on("data", () => resolve({ code: GrpcStatus.OK, details: "a response arrived" }));
    stream.on("error", (error: ServiceError) => resolve({ code: error.code, details: error.details }));
  }).finally(() => clearTimeout(timer));
  stream.write({
    versionInfo: "",
    node: proxyNode(node.id, {
      GENERATOR: "grpc",
      NAMESPACE: node.namespace,
      SERVICE_ACCOUNT: node.serviceAccount,
      ...node.metadata,
    }),
    resourceNames: ["reviews.default.svc.cluster.local:9080"],
    resourceLocators: [],
    typeUrl: TypeUrl.Listener,
    responseNonce: "",
    errorDetail: undefined,
  });
  return { first, close };
}

/**
 * Opens an ADS stream through an agent's xDS proxy (plaintext, as a
 * proxyless app does; the agent speaks mTLS to push with its own
 * certificate) with the given node, and reports the first response (OK) or
 * the status the stream ended with; the stream is then closed.
 */
export async function adsThroughAgent(
  agent: Agent,
  node: ProxylessNode,
  timeoutMs = 20_000,
): Promise<AdsOutcome> {
  const stream = openAds(agent.xdsProxyAddress, credentials.createInsecure(), node, timeoutMs);
  try {
    return await stream.first;
  } finally {
    stream.close();
  }
}

/** One secret as SDS sent it: its name and its certificate (chain or trusted CA) as text. */
export interface SdsSecret {
  name: string;
  certificate: string;
}

/**
 * Subscribes to names over an agent's SDS socket, as Envoy does
 * (StreamSecrets, each response ACKed), and resolves with the first `count`
 * responses.
 */
export function sdsUpdates(
  socket: string,
  names: string[],
  count: number,
  timeoutMs: number,
): Promise<SdsSecret[][]> {
  const client = new SecretDiscoveryServiceClient(`unix://${socket}`, credentials.createInsecure());
  const stream = client.streamSecrets();
  const responses: SdsSecret[][] = [];
  const request = (response?: DiscoveryResponse) =>
    stream.write({
      versionInfo: response?.versionInfo ?? "",
      node: proxyNode("sidecar~127.0.0.1~sds-test.default~default.svc.cluster.local", {}),
      resourceNames: names,
      resourceLocators: [],
      typeUrl: TypeUrl.Secret,
      responseNonce: response?.nonce ?? "",
      errorDetail: undefined,
    });
  return new Promise((resolve, reject) => {
    const finish = (error?: Error) => {
      clearTimeout(timer);
      stream.cancel();
      client.close();
      if (error) reject(error);
      else resolve(responses);
    };
    const timer = setTimeout(
      () => finish(new Error(`${responses.length} of ${count} SDS responses within ${timeoutMs} ms`)),
      timeoutMs,
    );
    stream.on("data", (response: DiscoveryResponse) => {
      responses.push(
        response.resources.map((any) => {
          const secret = unpackAny(any, TypeUrl.Secret, Secret);
          const bytes =
            secret.tlsCertificate?.certificateChain?.inlineBytes ??
            secret.validationContext?.trustedCa?.inlineBytes ??
            new Uint8Array();
          return { name: secret.name, certificate: Buffer.from(bytes).toString("utf8") };
        }),
      );
      request(response);
      if (responses.length >= count) finish();
    });
    stream.on("error", (error: ServiceError) => {
      if (error.code !== GrpcStatus.CANCELLED) finish(error);
    });
    request();
  });
}
