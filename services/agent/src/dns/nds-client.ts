import { setTimeout as sleep } from "node:timers/promises";
import { type ChannelCredentials, type ClientDuplexStream, type StatusObject, status } from "@grpc/grpc-js";
import { Backoff, type BackoffPolicy } from "@sextant/kube/retry";
import type { Logger } from "@sextant/observability";
import { typeUrlOf, unpackAny } from "@sextant/proto";
import {
  AggregatedDiscoveryServiceClient,
  DiscoveryRequest,
  type DiscoveryResponse,
} from "@sextant/proto/envoy";
import type { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { NameTable } from "@sextant/proto/gen/istio/networking/nds/v1/nds";

/** The xDS type of Istio's DNS name table. */
export const NAME_TABLE_TYPE_URL = typeUrlOf("istio.networking.nds.v1.NameTable");

/** Reconnection delays: quick at first, then at most every 30 s, spread so that a fleet does not reconnect at once. */
const RECONNECT: BackoffPolicy = { initialMs: 500, maxMs: 30_000, jitter: "half" };

/** Keepalive pings find a push that vanished without closing the connection. */
const CHANNEL_OPTIONS = {
  "grpc.keepalive_time_ms": 30_000,
  "grpc.keepalive_timeout_ms": 10_000,
  // A mesh's name table can exceed grpc-js's default 4 MiB.
  "grpc.max_receive_message_length": -1,
};

/** Options of {@link NdsClient}. */
export interface NdsClientOptions {
  /** push's ADS address (XDS_ADDR). */
  address: string;
  /** The workload's mTLS credentials towards push (tests pass insecure ones). */
  credentials: () => ChannelCredentials;
  /** The node the stream announces; its metadata carries DNS_CAPTURE and DNS_AUTO_ALLOCATE. */
  node: Node;
  /** Called with every table push sends and the agent accepts. */
  onTable: (table: NameTable) => void;
  logger: Logger;
  reconnect?: BackoffPolicy;
}

/**
 * The agent's own ADS stream to push, subscribed to the NameTable only.
 * Each response is decoded and ACKed, or NACKed with the reason when it
 * cannot be; a stream that ends is opened again after a backoff, and the
 * last table stays in use meanwhile. (Istio's agent adds the NameTable to
 * Envoy's stream inside its xDS proxy; Sextant's xDS proxy relays bytes it
 * never decodes, so the agent asks on a stream of its own.)
 */
export class NdsClient {
  readonly #options: NdsClientOptions;
  readonly #lifetime = new AbortController();
  readonly #backoff: Backoff;
  #client: AggregatedDiscoveryServiceClient | undefined;
  #stream: ClientDuplexStream<DiscoveryRequest, DiscoveryResponse> | undefined;

  constructor(options: NdsClientOptions) {
    this.#options = options;
    this.#backoff = new Backoff(options.reconnect ?? RECONNECT);
  }

  /** Opens the stream; tables arrive through onTable. */
  start(): void {
    this.#connect();
  }

  close(): void {
    this.#lifetime.abort();
    this.#stream?.cancel();
    this.#client?.close();
  }

  #connect(): void {
    if (this.#lifetime.signal.aborted) return;
    const { logger, address } = this.#options;
    this.#client ??= new AggregatedDiscoveryServiceClient(
      address,
      this.#options.credentials(),
      CHANNEL_OPTIONS,
    );
    const stream = this.#client.streamAggregatedResources();
    this.#stream = stream;
    let acceptedVersion = "";
    stream.write(
      DiscoveryRequest.fromPartial({
        node: this.#options.node,
        typeUrl: NAME_TABLE_TYPE_URL,
        resourceNames: [],
      }),
    );
    stream.on("data", (response: DiscoveryResponse) => {
      if (response.typeUrl !== NAME_TABLE_TYPE_URL) return;
      this.#backoff.reset();
      let table: NameTable;
      try {
        table = mergeTables(response.resources.map((any) => unpackAny(any, NAME_TABLE_TYPE_URL, NameTable)));
      } catch (error) {
        const message = (error as Error).message;
        logger.warn({ version: response.versionInfo, err: message }, "DNS proxy: rejected a name table");
        stream.write(
          DiscoveryRequest.fromPartial({
            typeUrl: NAME_TABLE_TYPE_URL,
            versionInfo: acceptedVersion,
            responseNonce: response.nonce,
            errorDetail: { code: status.INVALID_ARGUMENT, message },
          }),
        );
        return;
      }
      acceptedVersion = response.versionInfo;
      this.#options.onTable(table);
      stream.write(
        DiscoveryRequest.fromPartial({
          typeUrl: NAME_TABLE_TYPE_URL,
          versionInfo: response.versionInfo,
          responseNonce: response.nonce,
        }),
      );
      logger.debug(
        { version: response.versionInfo, hosts: Object.keys(table.table).length },
        "DNS proxy: name table",
      );
    });
    // Every end of the call is reported once by "status"; without an "error" listener a failed call would throw.
    stream.on("error", () => {});
    stream.on("status", (end: StatusObject) => {
      if (this.#lifetime.signal.aborted) return;
      const delayMs = this.#backoff.next();
      logger.warn(
        { address, code: status[end.code], details: end.details, retryInMs: Math.round(delayMs) },
        "DNS proxy: the name table stream ended; reconnecting",
      );
      sleep(delayMs, undefined, { signal: this.#lifetime.signal, ref: false }).then(
        () => this.#connect(),
        () => {},
      );
    });
  }
}

/** One table of several resources (push sends one; a later name wins, as a map merge). */
function mergeTables(tables: NameTable[]): NameTable {
  if (tables.length === 1) return tables[0]!;
  return NameTable.fromPartial({ table: Object.assign({}, ...tables.map((table) => table.table)) });
}
