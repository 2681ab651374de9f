import { randomUUID } from "node:crypto";
import { status as GrpcStatus, Metadata, type ServerDuplexStream } from "@grpc/grpc-js";
import type { IdentitySnapshot, IdentitySource } from "@sextant/identity";
import type { Logger } from "@sextant/observability";
import { packAny } from "@sextant/proto";
import {
  type DiscoveryRequest,
  DiscoveryResponse,
  Secret,
  type SecretDiscoveryServiceServer,
  TypeUrl,
} from "@sextant/proto/envoy";
import { secretFor, UnservableSecretError } from "./secrets.js";

/** Options of {@link SdsService}. */
export interface SdsServiceOptions {
  /** The workload's identity; read when the service starts. */
  identity: () => IdentitySource;
  logger: Logger;
}

/** Ends a server stream with a status; its message reaches the client as the status details. */
function endWithStatus(
  stream: ServerDuplexStream<unknown, unknown>,
  code: GrpcStatus,
  details: string,
): void {
  // grpc-js turns an "error" event on a server call into the call's status,
  // after any pending writes.
  stream.emit("error", { code, details, metadata: new Metadata() });
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const set = new Set(a);
  return b.every((name) => set.has(name));
}

/**
 * One StreamSecrets stream, state of the world: the names it asked for and
 * the nonce of the last response, to tell a new request from an ACK, a NACK
 * or a stale message.
 */
class SecretStream {
  names: string[] | undefined;
  lastNonce = "";
  node = "";

  constructor(readonly call: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>) {}
}

/**
 * The SDS server (envoy.service.secret.v3.SecretDiscoveryService) for the
 * local Envoy, as istio-agent serves it: `default` (the workload's certificate
 * and key) and `ROOTCA` (every root of the trust bundle), with a new version
 * pushed to every stream when the identity rotates or the bundle changes.
 * The key leaves the agent only over this local socket.
 */
export class SdsService {
  readonly #options: SdsServiceOptions;
  readonly #streams = new Set<SecretStream>();
  #snapshot: IdentitySnapshot | undefined;
  #version = 0;
  #unsubscribe: (() => void) | undefined;

  constructor(options: SdsServiceOptions) {
    this.#options = options;
  }

  /** Follows the identity: every change is a new version, pushed to every stream that asked for secrets. */
  start(): void {
    const identity = this.#options.identity();
    this.#unsubscribe = identity.onChange((snapshot) => this.#update(snapshot));
    this.#update(identity.current());
  }

  /** Stops following the identity and ends the streams (Envoy reconnects to the next agent). */
  close(): void {
    this.#unsubscribe?.();
    for (const stream of this.#streams) stream.call.end();
    this.#streams.clear();
  }

  /** The number of open StreamSecrets streams. */
  get streams(): number {
    return this.#streams.size;
  }

  /** The gRPC implementation of SecretDiscoveryService. */
  implementation(): SecretDiscoveryServiceServer {
    return {
      streamSecrets: (call) => this.#stream(call),
      fetchSecrets: (call, callback) => {
        try {
          callback(null, this.#response(call.request.resourceNames));
        } catch (error) {
          callback({ code: statusOf(error), details: (error as Error).message });
        }
      },
      deltaSecrets: (call) =>
        endWithStatus(
          call,
          GrpcStatus.UNIMPLEMENTED,
          "DeltaSecrets is not implemented: the Sextant agent serves SDS state of the world (StreamSecrets, FetchSecrets)",
        ),
    };
  }

  #update(snapshot: IdentitySnapshot): void {
    this.#snapshot = snapshot;
    this.#version += 1;
    for (const stream of this.#streams) {
      if (stream.names && stream.names.length > 0) this.#push(stream);
    }
  }

  #stream(call: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>): void {
    const stream = new SecretStream(call);
    this.#streams.add(stream);
    const forget = () => this.#streams.delete(stream);
    call.on("data", (request: DiscoveryRequest) => this.#onRequest(stream, request));
    call.on("end", () => {
      forget();
      call.end();
    });
    call.on("cancelled", forget);
    call.on("error", forget);
  }

  #onRequest(stream: SecretStream, request: DiscoveryRequest): void {
    const { logger } = this.#options;
    if (request.node?.id) stream.node = request.node.id;
    if (request.typeUrl && request.typeUrl !== TypeUrl.Secret) {
      this.#streams.delete(stream);
      endWithStatus(
        stream.call,
        GrpcStatus.INVALID_ARGUMENT,
        `SDS serves ${TypeUrl.Secret} only; the request asked for ${request.typeUrl}`,
      );
      return;
    }
    // A nonce that is not the last one sent answers an older response: the
    // client will answer the latest too, so this one says nothing new.
    if (request.responseNonce && request.responseNonce !== stream.lastNonce) {
      logger.debug({ node: stream.node, nonce: request.responseNonce }, "SDS: stale nonce ignored");
      return;
    }
    if (request.errorDetail) {
      // A NACK: Envoy keeps its previous secret. Resending the same content
      // would only be rejected again; the next rotation sends a new one.
      logger.warn(
        {
          node: stream.node,
          names: request.resourceNames,
          version: request.versionInfo,
          error: request.errorDetail.message,
        },
        "SDS: Envoy rejected the secrets",
      );
      stream.names = request.resourceNames;
      return;
    }
    const isAck =
      request.responseNonce !== "" && stream.names && sameNames(stream.names, request.resourceNames);
    stream.names = request.resourceNames;
    if (isAck) return;
    // Istio ignores a request that names nothing: there is nothing to send.
    if (request.resourceNames.length === 0) return;
    this.#push(stream);
  }

  #push(stream: SecretStream): void {
    let response: DiscoveryResponse;
    try {
      response = this.#response(stream.names ?? []);
    } catch (error) {
      this.#streams.delete(stream);
      endWithStatus(stream.call, statusOf(error), (error as Error).message);
      return;
    }
    stream.lastNonce = response.nonce;
    stream.call.write(response);
    this.#options.logger.debug(
      { node: stream.node, names: stream.names, version: response.versionInfo },
      "SDS: secrets sent",
    );
  }

  #response(names: readonly string[]): DiscoveryResponse {
    const snapshot = this.#snapshot;
    if (!snapshot) throw new Error("the workload has no certificate yet");
    return DiscoveryResponse.fromPartial({
      versionInfo: String(this.#version),
      typeUrl: TypeUrl.Secret,
      nonce: randomUUID(),
      resources: names.map((name) => packAny(TypeUrl.Secret, Secret, secretFor(name, snapshot))),
    });
  }
}

function statusOf(error: unknown): GrpcStatus {
  return error instanceof UnservableSecretError ? GrpcStatus.UNIMPLEMENTED : GrpcStatus.UNAVAILABLE;
}
