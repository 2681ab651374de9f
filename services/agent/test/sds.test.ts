import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { type ClientDuplexStream, credentials, type ServiceError, status } from "@grpc/grpc-js";
import { unpackAny } from "@sextant/proto";
import {
  DiscoveryRequest,
  type DiscoveryResponse,
  Secret,
  SecretDiscoveryServiceClient,
  TypeUrl,
} from "@sextant/proto/envoy";
import { eventually } from "@sextant/testing";
import { type SdsServerRunner, sdsServerRunner } from "../src/sds/sds-runner.js";
import { FakeIdentity } from "./helpers/fake-identity.js";
import { testLogger } from "./helpers/logger.js";

/** What a test fills in of a request; the rest takes proto defaults. */
type RequestFields = Parameters<typeof DiscoveryRequest.fromPartial>[0];

const NODE = { id: "sidecar~10.0.0.1~web-1.default~default.svc.cluster.local" };

/** A StreamSecrets stream with its responses queued in order, read one at a time. */
class SdsStream {
  readonly responses: DiscoveryResponse[] = [];
  #read = 0;
  error: ServiceError | undefined;

  constructor(readonly call: ClientDuplexStream<DiscoveryRequest, DiscoveryResponse>) {
    call.on("data", (response: DiscoveryResponse) => this.responses.push(response));
    call.on("error", (error: ServiceError) => {
      this.error = error;
    });
  }

  send(request: RequestFields): void {
    this.call.write(DiscoveryRequest.fromPartial({ typeUrl: TypeUrl.Secret, ...request }));
  }

  /** The next response not read yet. */
  next(): Promise<DiscoveryResponse> {
    return eventually(() => this.responses[this.#read], { message: "no SDS response" }).then((response) => {
      this.#read++;
      return response;
    });
  }

  /** How many responses have arrived that were not read. */
  get unread(): number {
    return this.responses.length - this.#read;
  }

  /** ACKs a response. */
  ack(response: DiscoveryResponse, names: string[]): void {
    this.send({ versionInfo: response.versionInfo, responseNonce: response.nonce, resourceNames: names });
  }
}

function secrets(response: DiscoveryResponse): Map<string, Secret> {
  return new Map(
    response.resources.map((any) => {
      const secret = unpackAny(any, TypeUrl.Secret, Secret);
      return [secret.name, secret];
    }),
  );
}

const text = (bytes: Buffer | undefined) => bytes?.toString("utf8") ?? "";

describe("SDS server", () => {
  let identity: FakeIdentity;
  let runner: SdsServerRunner;
  let client: SecretDiscoveryServiceClient;
  let socketPath: string;

  before(async () => {
    identity = new FakeIdentity();
    socketPath = join(mkdtempSync(join(tmpdir(), "sextant-agent-sds-")), "workload-spiffe-uds", "socket");
    runner = sdsServerRunner({ socketPath, identity: () => identity, logger: testLogger });
    await runner.start();
    client = new SecretDiscoveryServiceClient(`unix://${socketPath}`, credentials.createInsecure());
  });

  after(async () => {
    client.close();
    await runner.close();
  });

  const open = () => new SdsStream(client.streamSecrets());

  test("answers a subscription with the workload certificate (default) and every root (ROOTCA)", async () => {
    const extraRoot = identity.root.certPem;
    const stream = open();
    stream.send({ node: NODE, resourceNames: ["default", "ROOTCA"] });
    const response = await stream.next();
    assert.equal(response.typeUrl, TypeUrl.Secret);
    assert.ok(response.versionInfo, "a version");
    assert.ok(response.nonce, "a nonce");
    const byName = secrets(response);
    const snapshot = identity.current();
    const workload = byName.get("default");
    assert.equal(
      text(workload?.tlsCertificate?.certificateChain?.inlineBytes),
      snapshot.certificate.certChainPem,
    );
    assert.equal(text(workload?.tlsCertificate?.privateKey?.inlineBytes), snapshot.certificate.privateKeyPem);
    assert.equal(text(byName.get("ROOTCA")?.validationContext?.trustedCa?.inlineBytes), extraRoot);
    stream.call.end();
  });

  test("an ACK gets no answer; a rotation pushes a new version with the new certificate", async () => {
    const stream = open();
    stream.send({ node: NODE, resourceNames: ["default"] });
    const first = await stream.next();
    stream.ack(first, ["default"]);
    const rotated = identity.rotate();
    // Had the ACK been answered, that answer (the old certificate) would come first.
    const pushed = await stream.next();
    assert.notEqual(pushed.versionInfo, first.versionInfo);
    assert.notEqual(pushed.nonce, first.nonce);
    assert.equal(
      text(secrets(pushed).get("default")?.tlsCertificate?.certificateChain?.inlineBytes),
      rotated.certificate.certChainPem,
    );
    stream.call.end();
  });

  test("a trust bundle change pushes ROOTCA with every root", async () => {
    const stream = open();
    stream.send({ node: NODE, resourceNames: ["ROOTCA"] });
    await stream.next();
    const otherRoot = new FakeIdentity("spiffe://cluster.local/ns/default/sa/other").root.certPem;
    identity.changeRoots([identity.root.certPem, otherRoot]);
    const pushed = await stream.next();
    assert.equal(
      text(secrets(pushed).get("ROOTCA")?.validationContext?.trustedCa?.inlineBytes),
      identity.root.certPem + otherRoot,
    );
    identity.changeRoots([identity.root.certPem]);
    stream.call.end();
  });

  test("a NACK is not answered with the same secrets, and a stale nonce is ignored", async () => {
    const stream = open();
    stream.send({ node: NODE, resourceNames: ["default"] });
    const first = await stream.next();
    stream.send({
      versionInfo: "",
      responseNonce: first.nonce,
      resourceNames: ["default"],
      errorDetail: { code: 3, message: "bad certificate", details: [] },
    });
    stream.send({ responseNonce: "not-the-latest", resourceNames: ["default", "ROOTCA"] });
    // Names changed with the current nonce: answered, and it is the next message.
    stream.send({
      versionInfo: first.versionInfo,
      responseNonce: first.nonce,
      resourceNames: ["default", "ROOTCA"],
    });
    const answer = await stream.next();
    assert.deepEqual([...secrets(answer).keys()].sort(), ["ROOTCA", "default"]);
    assert.equal(stream.unread, 0);
    stream.call.end();
  });

  test("any other name is the workload certificate under that name, as istio-agent serves it", async () => {
    const stream = open();
    stream.send({ node: NODE, resourceNames: ["spiffe://cluster.local/ns/default/sa/web"] });
    const secret = secrets(await stream.next()).get("spiffe://cluster.local/ns/default/sa/web");
    assert.equal(
      text(secret?.tlsCertificate?.certificateChain?.inlineBytes),
      identity.current().certificate.certChainPem,
    );
    stream.call.end();
  });

  test("a file-mounted name ends the stream with UNIMPLEMENTED and says why", async () => {
    const stream = open();
    stream.send({ node: NODE, resourceNames: ["file-cert:/etc/certs/cert.pem~/etc/certs/key.pem"] });
    const error = await eventually(() => stream.error, { message: "the stream did not fail" });
    assert.equal(error.code, status.UNIMPLEMENTED);
    assert.match(error.details, /file-mounted certificates/);
  });

  test("another type URL ends the stream with INVALID_ARGUMENT", async () => {
    const stream = open();
    stream.send({ node: NODE, typeUrl: TypeUrl.Cluster, resourceNames: ["default"] });
    const error = await eventually(() => stream.error, { message: "the stream did not fail" });
    assert.equal(error.code, status.INVALID_ARGUMENT);
    assert.match(error.details, /Cluster/);
  });

  test("FetchSecrets answers once", async () => {
    const response = await new Promise<DiscoveryResponse>((resolve, reject) =>
      client.fetchSecrets(
        DiscoveryRequest.fromPartial({ node: NODE, resourceNames: ["ROOTCA"], typeUrl: TypeUrl.Secret }),
        (error, answer) => (error ? reject(error) : resolve(answer)),
      ),
    );
    assert.deepEqual([...secrets(response).keys()], ["ROOTCA"]);
  });

  test("DeltaSecrets answers UNIMPLEMENTED with a clear message", async () => {
    const call = client.deltaSecrets();
    const error = await new Promise<ServiceError>((resolve) => call.on("error", resolve));
    assert.equal(error.code, status.UNIMPLEMENTED);
    assert.match(error.details, /state of the world/);
  });

  test("closed streams are forgotten", async () => {
    await eventually(() => runner.service.streams === 0, { message: "streams were not forgotten" });
  });
});
