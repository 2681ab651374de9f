import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import {
  type ChannelCredentials,
  type ClientDuplexStream,
  credentials,
  Metadata,
  type ServerCredentials,
  type ServerDuplexStream,
  type ServiceError,
  type StatusObject,
  status,
} from "@grpc/grpc-js";
import { mtlsChannelCredentials, mtlsServerCredentials } from "@sextant/identity";
import {
  AggregatedDiscoveryServiceClient,
  AggregatedDiscoveryServiceService,
  DeltaDiscoveryRequest,
  DeltaDiscoveryResponse,
  DiscoveryRequest,
  DiscoveryResponse,
  TypeUrl,
} from "@sextant/proto/envoy";
import { eventually, freePort, type GrpcServerFixture, startGrpcServer } from "@sextant/testing";
import { acceptXdsServer } from "../src/xds-proxy/server-identity.js";
import { type XdsProxyRunner, xdsProxyRunner } from "../src/xds-proxy/xds-proxy-runner.js";
import { makeRoot } from "./helpers/certs.js";
import { FakeIdentity } from "./helpers/fake-identity.js";
import { testLogger } from "./helpers/logger.js";

const NODE = { id: "sidecar~10.0.0.1~web-1.default~default.svc.cluster.local" };

/** What the fake push does with each stream it accepts; tests replace it. */
type UpstreamHandler = (call: ServerDuplexStream<Buffer, unknown>) => void;

/**
 * A plain grpc-js ADS server standing in for push. Requests are kept as the
 * raw bytes that arrived, to compare them with what the client sent.
 */
async function startUpstream(
  handler: () => UpstreamHandler,
  serverCredentials?: ServerCredentials,
): Promise<GrpcServerFixture> {
  const raw = (bytes: Buffer) => bytes;
  const sotw = AggregatedDiscoveryServiceService.streamAggregatedResources;
  const delta = AggregatedDiscoveryServiceService.deltaAggregatedResources;
  return startGrpcServer(
    [
      {
        definition: {
          streamAggregatedResources: { ...sotw, requestDeserialize: raw },
          deltaAggregatedResources: { ...delta, requestDeserialize: raw },
        },
        implementation: {
          streamAggregatedResources: (call: ServerDuplexStream<Buffer, unknown>) => handler()(call),
          deltaAggregatedResources: (call: ServerDuplexStream<Buffer, unknown>) => handler()(call),
        },
      },
    ],
    serverCredentials,
  );
}

/** A client stream with what it received and how it ended. */
function watch<Req, Res>(call: ClientDuplexStream<Req, Res>) {
  const received: Res[] = [];
  const result: { status?: StatusObject; error?: ServiceError } = {};
  call.on("data", (message: Res) => received.push(message));
  call.on("error", (error: ServiceError) => {
    result.error = error;
  });
  call.on("status", (s: StatusObject) => {
    result.status = s;
  });
  return { call, received, result };
}

const request = (names: string[]) =>
  DiscoveryRequest.fromPartial({ node: NODE, typeUrl: TypeUrl.Cluster, resourceNames: names });

describe("xDS proxy", () => {
  let upstream: GrpcServerFixture;
  let handler: UpstreamHandler;
  let runner: XdsProxyRunner;
  let socketPath: string;
  let client: AggregatedDiscoveryServiceClient;

  before(async () => {
    upstream = await startUpstream(() => handler);
    socketPath = join(mkdtempSync(join(tmpdir(), "sextant-agent-xds-")), "proxy", "XDS");
    runner = xdsProxyRunner({
      socketPath,
      tcpPort: await freePort(),
      upstreamAddress: upstream.address,
      credentials: () => credentials.createInsecure(),
      logger: testLogger,
    });
    await runner.start();
    client = new AggregatedDiscoveryServiceClient(`unix://${socketPath}`, credentials.createInsecure());
  });

  after(async () => {
    client.close();
    await runner.close();
    await upstream.close();
  });

  beforeEach(() => {
    handler = () => {};
  });

  test("a request reaches push byte for byte, and push's response comes back", async () => {
    const arrived: Buffer[] = [];
    const response = DiscoveryResponse.fromPartial({
      versionInfo: "v1",
      typeUrl: TypeUrl.Cluster,
      nonce: "n1",
      resources: [{ typeUrl: TypeUrl.Cluster, value: Buffer.from([1, 2, 3]) }],
    });
    handler = (call) =>
      call.on("data", (bytes: Buffer) => {
        arrived.push(bytes);
        call.write(response);
      });
    const sent = request(["outbound|9080||reviews.default.svc.cluster.local"]);
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(sent);
    await eventually(() => stream.received.length === 1, { message: "no response through the proxy" });
    assert.deepEqual(arrived[0], Buffer.from(DiscoveryRequest.encode(sent).finish()));
    assert.deepEqual(stream.received[0], response);
    stream.call.cancel();
  });

  test("push's error status reaches the client with its code and message", async () => {
    handler = (call) =>
      call.on("data", () =>
        call.emit("error", {
          code: status.PERMISSION_DENIED,
          details: "authorization failed: the certificate's identity is in namespace other",
          metadata: new Metadata(),
        }),
      );
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(request([]));
    const error = await eventually(() => stream.result.error, { message: "the client saw no error" });
    assert.equal(error.code, status.PERMISSION_DENIED);
    assert.equal(error.details, "authorization failed: the certificate's identity is in namespace other");
  });

  test("responses sent before push's status all arrive before it", async () => {
    handler = (call) =>
      call.on("data", () => {
        for (let i = 0; i < 50; i++) call.write(DiscoveryResponse.fromPartial({ nonce: `n${i}` }));
        call.emit("error", { code: status.RESOURCE_EXHAUSTED, details: "enough", metadata: new Metadata() });
      });
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(request([]));
    const error = await eventually(() => stream.result.error, { message: "the client saw no error" });
    assert.equal(error.code, status.RESOURCE_EXHAUSTED);
    assert.deepEqual(
      stream.received.map((r) => r.nonce),
      Array.from({ length: 50 }, (_, i) => `n${i}`),
    );
  });

  test("after RESOURCE_EXHAUSTED (push at PUSH_MAX_STREAMS) the next stream goes over a new connection", async () => {
    const peers: string[] = [];
    handler = (call) => {
      peers.push(call.getPeer());
      call.on("data", () =>
        peers.length === 1
          ? call.emit("error", { code: status.RESOURCE_EXHAUSTED, details: "full", metadata: new Metadata() })
          : call.write(DiscoveryResponse.fromPartial({ nonce: "served" })),
      );
    };
    const refused = watch(client.streamAggregatedResources());
    refused.call.write(request([]));
    const error = await eventually(() => refused.result.error, { message: "the client saw no error" });
    assert.equal(error.code, status.RESOURCE_EXHAUSTED);
    const retry = watch(client.streamAggregatedResources());
    retry.call.write(request([]));
    await eventually(() => retry.received.length === 1, { message: "the retry was not served" });
    assert.equal(peers.length, 2);
    assert.notEqual(peers[1], peers[0], "the retry came over the same connection");
    retry.call.cancel();
  });

  test("the client's cancellation cancels the stream to push", async () => {
    let upstreamCancelled = false;
    let opened = false;
    handler = (call) => {
      opened = true;
      call.on("cancelled", () => {
        upstreamCancelled = true;
      });
    };
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(request([]));
    await eventually(() => opened, { message: "the stream did not reach push" });
    stream.call.cancel();
    await eventually(() => upstreamCancelled, { message: "push's stream was not cancelled" });
    await eventually(() => runner.proxy.streams === 0, { message: "the proxy still relays the stream" });
  });

  test("the client's half-close reaches push, and push's OK ends the client's stream", async () => {
    handler = (call) => {
      call.resume(); // "end" comes only once the requests are read
      call.on("end", () => call.end());
    };
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(request([]));
    stream.call.end();
    const ended = await eventually(() => stream.result.status, {
      message: "the client's stream did not end",
    });
    assert.equal(ended.code, status.OK);
  });

  test("delta streams are relayed too", async () => {
    handler = (call) =>
      call.on("data", (bytes: Buffer) => {
        const delta = DeltaDiscoveryRequest.decode(bytes);
        call.write(DeltaDiscoveryResponse.fromPartial({ typeUrl: delta.typeUrl, nonce: "d1" }));
      });
    const stream = watch(client.deltaAggregatedResources());
    stream.call.write(DeltaDiscoveryRequest.fromPartial({ node: NODE, typeUrl: TypeUrl.Listener }));
    await eventually(() => stream.received.length === 1, { message: "no delta response" });
    assert.equal(stream.received[0]?.typeUrl, TypeUrl.Listener);
    stream.call.cancel();
  });

  test("proxyless apps reach it on 127.0.0.1:XDS_PROXY_PORT", async () => {
    handler = (call) => call.on("data", () => call.write(DiscoveryResponse.fromPartial({ nonce: "tcp" })));
    const tcpClient = new AggregatedDiscoveryServiceClient(
      `127.0.0.1:${runner.tcpPort}`,
      credentials.createInsecure(),
    );
    const stream = watch(tcpClient.streamAggregatedResources());
    stream.call.write(request([]));
    await eventually(() => stream.received.length === 1, { message: "no response over TCP" });
    stream.call.cancel();
    tcpClient.close();
  });
});

describe("xDS proxy towards an unreachable push", () => {
  test("the client gets UNAVAILABLE, naming why", async () => {
    const socketPath = join(mkdtempSync(join(tmpdir(), "sextant-agent-xds-")), "XDS");
    const runner = xdsProxyRunner({
      socketPath,
      tcpPort: 0,
      upstreamAddress: `127.0.0.1:${await freePort()}`,
      credentials: () => credentials.createInsecure(),
      logger: testLogger,
    });
    await runner.start();
    const client = new AggregatedDiscoveryServiceClient(`unix://${socketPath}`, credentials.createInsecure());
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(request([]));
    const error = await eventually(() => stream.result.error, { message: "the client saw no error" });
    assert.equal(error.code, status.UNAVAILABLE);
    client.close();
    await runner.close();
  });
});

describe("xDS proxy over mTLS with the workload identity", () => {
  const root = makeRoot("cluster.local");
  const workload = new FakeIdentity("spiffe://cluster.local/ns/default/sa/web", root);
  const expected = {
    trustDomain: "cluster.local",
    namespace: "istio-system",
    serviceAccount: "sextant-push",
  };

  async function throughProxy(pushIdentity: FakeIdentity, upstreamCredentials: () => ChannelCredentials) {
    let peer: string | undefined;
    const upstream = await startUpstream(
      () => (call) => {
        peer = call.getAuthContext()?.sslPeerCertificate?.subjectaltname;
        call.on("data", () => call.write(DiscoveryResponse.fromPartial({ nonce: "mtls" })));
      },
      mtlsServerCredentials(pushIdentity, { requireClientCertificate: true }),
    );
    const socketPath = join(mkdtempSync(join(tmpdir(), "sextant-agent-xds-")), "XDS");
    const runner = xdsProxyRunner({
      socketPath,
      tcpPort: 0,
      // The certificate names no host: the SPIFFE check replaces the host name check.
      upstreamAddress: `localhost:${upstream.port}`,
      credentials: upstreamCredentials,
      logger: testLogger,
    });
    await runner.start();
    const client = new AggregatedDiscoveryServiceClient(`unix://${socketPath}`, credentials.createInsecure());
    const stream = watch(client.streamAggregatedResources());
    stream.call.write(request([]));
    await eventually(() => stream.received.length > 0 || stream.result.error, { message: "no answer" });
    stream.call.cancel();
    client.close();
    await runner.close();
    await upstream.close();
    return { stream, peer };
  }

  test("push with XDS_SERVER_SPIFFE_ID is accepted and sees the workload's certificate", async () => {
    const push = new FakeIdentity("spiffe://cluster.local/ns/istio-system/sa/sextant-push", root);
    const { stream, peer } = await throughProxy(push, () =>
      mtlsChannelCredentials(workload, acceptXdsServer(expected)),
    );
    assert.equal(stream.result.error, undefined);
    assert.equal(stream.received[0]?.nonce, "mtls");
    assert.match(peer ?? "", /spiffe:\/\/cluster\.local\/ns\/default\/sa\/web/);
  });

  test("a server with another mesh identity is refused", async () => {
    const impostor = new FakeIdentity("spiffe://cluster.local/ns/default/sa/impostor", root);
    const { stream } = await throughProxy(impostor, () =>
      mtlsChannelCredentials(workload, acceptXdsServer(expected)),
    );
    assert.equal(stream.received.length, 0);
    assert.equal(stream.result.error?.code, status.UNAVAILABLE);
    assert.match(
      stream.result.error?.details ?? "",
      /push presented spiffe:\/\/cluster\.local\/ns\/default\/sa\/impostor, but the agent accepts only/,
    );
  });
});

describe("acceptXdsServer", () => {
  const accept = acceptXdsServer({
    trustDomain: "cluster.local",
    namespace: "istio-system",
    serviceAccount: "sextant-push",
  });

  test("accepts exactly the configured identity", () => {
    assert.equal(
      accept({ trustDomain: "cluster.local", namespace: "istio-system", serviceAccount: "sextant-push" }),
      undefined,
    );
  });

  test("names what it got and what it expected", () => {
    assert.equal(
      accept({ trustDomain: "cluster.local", namespace: "istio-system", serviceAccount: "other" }),
      "push presented spiffe://cluster.local/ns/istio-system/sa/other, but the agent accepts only spiffe://cluster.local/ns/istio-system/sa/sextant-push (XDS_SERVER_SPIFFE_ID)",
    );
    assert.match(accept(undefined) ?? "", /no SPIFFE identity/);
  });
});
