import { type ClientDuplexStream, credentials } from "@grpc/grpc-js";
import {
  AggregatedDiscoveryServiceClient,
  type DeltaDiscoveryRequest,
  type DeltaDiscoveryResponse,
} from "@sextant/proto/envoy";

/**
 * A hand-rolled incremental (delta) ADS client, in the manner of
 * AdsTestClient: it sends exactly the requests a test writes and queues every
 * response, so tests can check the protocol step by step.
 */
export class DeltaTestClient {
  readonly #client: AggregatedDiscoveryServiceClient;
  readonly #stream: ClientDuplexStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;
  readonly #responses: DeltaDiscoveryResponse[] = [];
  readonly #waiters: Array<(response: DeltaDiscoveryResponse) => void> = [];
  error: (Error & { code?: number }) | undefined;
  ended = false;

  constructor(address: string) {
    this.#client = new AggregatedDiscoveryServiceClient(address, credentials.createInsecure());
    this.#stream = this.#client.deltaAggregatedResources();
    this.#stream.on("data", (response: DeltaDiscoveryResponse) => {
      const waiter = this.#waiters.shift();
      if (waiter) waiter(response);
      else this.#responses.push(response);
    });
    this.#stream.on("error", (error) => {
      this.error = error;
    });
    this.#stream.on("end", () => {
      this.ended = true;
    });
  }

  send(request: Partial<DeltaDiscoveryRequest>): void {
    this.#stream.write({
      node: undefined,
      typeUrl: "",
      resourceNamesSubscribe: [],
      resourceNamesUnsubscribe: [],
      resourceLocatorsSubscribe: [],
      resourceLocatorsUnsubscribe: [],
      initialResourceVersions: {},
      responseNonce: "",
      errorDetail: undefined,
      ...request,
    });
  }

  /** ACKs a response, as Envoy does once it has applied it. */
  ack(response: DeltaDiscoveryResponse): void {
    this.send({ typeUrl: response.typeUrl, responseNonce: response.nonce });
  }

  /** The next response, failing after timeoutMs (a generous bound, not a measurement). */
  next(timeoutMs = 10_000): Promise<DeltaDiscoveryResponse> {
    const queued = this.#responses.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no response within ${timeoutMs} ms`)), timeoutMs);
      this.#waiters.push((response) => {
        clearTimeout(timer);
        resolve(response);
      });
    });
  }

  /** How many responses arrived that no one has read. */
  get unread(): number {
    return this.#responses.length;
  }

  close(): void {
    this.#stream.end();
    this.#client.close();
  }
}

/** A response's resources as name → version. */
export function versionsOf(response: DeltaDiscoveryResponse): Record<string, string> {
  return Object.fromEntries(response.resources.map((r) => [r.name, r.version]));
}

/** The names of a response's resources, sorted. */
export function namesOf(response: DeltaDiscoveryResponse): string[] {
  return response.resources.map((r) => r.name).sort();
}
