import type { DeltaDiscoveryRequest, DeltaDiscoveryResponse } from "@sextant/proto/envoy";
import { RecordingStream } from "./recording-stream.js";

/**
 * A hand-rolled incremental (delta) ADS client, in the manner of
 * AdsTestClient: it sends exactly the requests a test writes and queues every
 * response, so tests can check the protocol step by step.
 */
export class DeltaTestClient extends RecordingStream<DeltaDiscoveryRequest, DeltaDiscoveryResponse> {
  constructor(address: string) {
    super(address, (client) => client.deltaAggregatedResources());
  }

  send(request: Partial<DeltaDiscoveryRequest>): void {
    this.stream.write({
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
}

/** A response's resources as name → version. */
export function versionsOf(response: DeltaDiscoveryResponse): Record<string, string> {
  return Object.fromEntries(response.resources.map((r) => [r.name, r.version]));
}

/** The names of a response's resources, sorted. */
export function namesOf(response: DeltaDiscoveryResponse): string[] {
  return response.resources.map((r) => r.name).sort();
}
