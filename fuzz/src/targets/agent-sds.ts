// The agent's SDS server (StreamSecrets), as Envoy talks to it over the
// local socket: a sequence of length-delimited DiscoveryRequests on one
// stream, handled by SdsService with a workload identity. grpc-js fails the
// call at a message that does not decode, after those before it; a request the agent refuses ends the
// stream with a gRPC status (an "error" event on the call). An exception out
// of the request handler would be uncaught in the agent: a failure.
import { EventEmitter } from "node:events";
import { SdsService } from "@sextant/agent/fuzzing";
import type { IdentitySnapshot } from "@sextant/identity";
import { createLogger } from "@sextant/observability";
import { DiscoveryRequest, TypeUrl } from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { decodeStream, encodeFrames, frames, LAST_NONCE } from "../framing.js";
import type { FuzzTarget } from "../target.js";

/** A StreamSecrets call as grpc-js hands it over, recording what the agent sends. */
class FakeCall extends EventEmitter {
  readonly sent: Array<{ nonce: string }> = [];
  ended = false;
  constructor() {
    super();
    // grpc-js turns an "error" event into the call's status.
    this.on("error", () => {
      this.ended = true;
    });
  }
  write(message: { nonce: string }): boolean {
    this.sent.push(message);
    return true;
  }
  end(): void {
    this.ended = true;
  }
}

// SDS passes the PEM text through without parsing it.
const SNAPSHOT: IdentitySnapshot = {
  certificate: {
    certChainPem: "-----BEGIN CERTIFICATE-----\nd29ya2xvYWQ=\n-----END CERTIFICATE-----\n",
    privateKeyPem: "-----BEGIN PRIVATE KEY-----\na2V5\n-----END PRIVATE KEY-----\n",
    spiffeId: "spiffe://cluster.local/ns/default/sa/bookinfo-productpage",
    notBefore: new Date(0),
    notAfter: new Date(2 ** 42),
  },
  rootsPem: ["-----BEGIN CERTIFICATE-----\ncm9vdA==\n-----END CERTIFICATE-----\n"],
};

const sds = new SdsService({
  identity: () => ({ current: () => SNAPSHOT, onChange: () => () => {} }),
  logger: createLogger({ service: "fuzz", level: "silent" }),
});
sds.start();

export const target: FuzzTarget = {
  tokens: ["default", "ROOTCA", "file-cert:", "file-root:", "~", TypeUrl.Secret, TypeUrl.Cluster, LAST_NONCE],
  run(input) {
    const { decoded: requests, broken } = decodeStream(frames(input, 0), (bytes) =>
      DiscoveryRequest.decode(bytes),
    );
    const call = new FakeCall();
    sds.implementation().streamSecrets(call as never);
    for (const request of requests) {
      if (call.ended) break;
      if (request.responseNonce === LAST_NONCE) request.responseNonce = call.sent.at(-1)?.nonce ?? "";
      call.emit("data", request);
    }
    // A message that does not decode fails the call in grpc-js.
    call.emit(broken ? "error" : "end");
  },
  refusal: () => false,
};

/** Envoy's SDS stream: the workload certificate and the roots, ACKs, a NACK, a file-mounted name. */
export function sdsSeeds(): Record<string, Uint8Array> {
  const node = Node.fromPartial({
    id: "sidecar~10.0.0.10~productpage-v1-1.default~default.svc.cluster.local",
  });
  const stream = (...requests: Partial<DiscoveryRequest>[]) =>
    encodeFrames(
      [],
      requests.map((r) =>
        DiscoveryRequest.encode(DiscoveryRequest.fromPartial({ typeUrl: TypeUrl.Secret, ...r })).finish(),
      ),
    );
  return {
    "envoy-default-rootca.bin": stream(
      { node, resourceNames: ["default"] },
      { resourceNames: ["default"], responseNonce: LAST_NONCE, versionInfo: "1" },
      { resourceNames: ["ROOTCA"] },
      { resourceNames: ["ROOTCA"], responseNonce: LAST_NONCE, versionInfo: "1" },
    ),
    "envoy-nack.bin": stream(
      { node, resourceNames: ["default", "ROOTCA"] },
      {
        resourceNames: ["default", "ROOTCA"],
        responseNonce: LAST_NONCE,
        errorDetail: { code: 3, message: "rejected", details: [] },
      },
    ),
    "file-mounted.bin": stream({ node, resourceNames: ["file-cert:/etc/certs/cert.pem~/etc/certs/key.pem"] }),
    "wrong-type.bin": stream({ node, typeUrl: TypeUrl.Cluster }),
  };
}
