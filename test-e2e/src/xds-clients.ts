// Hand-rolled xDS clients for the security tests: they send exactly what a
// proxy would, and report what came back, so a test can check a refusal's
// status or a secret's content.
import { credentials, status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { unpackAny } from "@sextant/proto";
import {
  AggregatedDiscoveryServiceClient,
  type DiscoveryResponse,
  Secret,
  SecretDiscoveryServiceClient,
  TypeUrl,
} from "@sextant/proto/envoy";
import type { Agent } from "./secure-mesh.js";

/** An xDS node with the given id and metadata, every other field empty. */
function proxyNode(id: string, metadata: Record<string, unknown>) {
  return {
    id,
    cluster: "",
    metadata,
    dynamicParameters: {},
    locality: undefined,
    userAgentName: "e2e",
    userAgentVersion: undefined,
    userAgentBuildVersion: undefined,
    extensions: [],
    clientFeatures: [],
    listeningAddresses: [],
  };
}

/** How an ADS stream through an agent ended: OK once a response arrived, or the error status. */
export interface AdsOutcome {
  code: GrpcStatus;
  details: string;
}

/**
 * Opens an ADS stream through an agent's xDS proxy (plaintext, as a
 * proxyless app does) with the given node, asks for listeners, and reports
 * the first response (OK) or the status the stream ended with.
 */
export function adsThroughAgent(
  agent: Agent,
  node: { id: string; namespace: string; serviceAccount: string },
  timeoutMs = 20_000,
): Promise<AdsOutcome> {
  const client = new AggregatedDiscoveryServiceClient(agent.xdsProxyAddress, credentials.createInsecure());
  const stream = client.streamAggregatedResources();
  return new Promise<AdsOutcome>((resolve) => {
    const finish = (outcome: AdsOutcome) => {
      clearTimeout(timer);
      stream.cancel();
      client.close();
      resolve(outcome);
    };
    const timer = setTimeout(
      () => finish({ code: GrpcStatus.DEADLINE_EXCEEDED, details: `nothing within ${timeoutMs} ms` }),
      timeoutMs,
    );
    stream.on("data", () => finish({ code: GrpcStatus.OK, details: "a response arrived" }));
    stream.on("error", (error: ServiceError) => finish({ code: error.code, details: error.details }));
    stream.write({
      versionInfo: "",
      node: proxyNode(node.id, {
        GENERATOR: "grpc",
        NAMESPACE: node.namespace,
        SERVICE_ACCOUNT: node.serviceAccount,
      }),
      resourceNames: ["reviews.default.svc.cluster.local:9080"],
      resourceLocators: [],
      typeUrl: TypeUrl.Listener,
      responseNonce: "",
      errorDetail: undefined,
    });
  });
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
