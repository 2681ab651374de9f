import type { ClientDuplexStream } from "@grpc/grpc-js";
import { credentials } from "@grpc/grpc-js";
import { AggregatedDiscoveryServiceClient } from "@sextant/proto/envoy";

/**
 * The part every hand-rolled xDS test client shares: one ADS stream whose
 * responses are queued for `next()`, with the stream's error and end kept,
 * so a test sends exactly what it writes and checks the protocol step by step.
 */
export class RecordingStream<Request, Response> {
  readonly #client: AggregatedDiscoveryServiceClient;
  protected readonly stream: ClientDuplexStream<Request, Response>;
  readonly #responses: Response[] = [];
  readonly #waiters: Array<(response: Response) => void> = [];
  error: (Error & { code?: number }) | undefined;
  ended = false;

  constructor(
    address: string,
    open: (client: AggregatedDiscoveryServiceClient) => ClientDuplexStream<Request, Response>,
  ) {
    this.#client = new AggregatedDiscoveryServiceClient(address, credentials.createInsecure());
    this.stream = open(this.#client);
    this.stream.on("data", (response: Response) => {
      const waiter = this.#waiters.shift();
      if (waiter) waiter(response);
      else this.#responses.push(response);
    });
    this.stream.on("error", (error) => {
      this.error = error;
    });
    this.stream.on("end", () => {
      this.ended = true;
    });
  }

  /** The next response, failing after timeoutMs (a generous bound, not a measurement). */
  next(timeoutMs = 10_000): Promise<Response> {
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
    this.stream.end();
    this.#client.close();
  }
}
