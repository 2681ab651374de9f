// The agent's xDS proxy, which relays Envoy's ADS stream to push without
// parsing it: the input is the raw body of one gRPC request (length-prefixed
// messages) sent over HTTP/2 to the proxy's Unix socket, as Envoy sends it.
// The property: the proxy's process survives; the stream ends; if it ends
// with grpc-status 0 push received exactly the input's messages, in order
// (the proxy never alters, drops or invents a message). A non-zero status (a
// compressed frame without an encoding, which grpc-js refuses) is a defined refusal.

import { mkdtempSync } from "node:fs";
import { type ClientHttp2Session, constants, connect as http2Connect } from "node:http2";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentials, Server, ServerCredentials, type ServerDuplexStream } from "@grpc/grpc-js";
import { PASSTHROUGH_ADS_SERVICE, xdsProxyRunner } from "@sextant/agent/fuzzing";
import { createLogger } from "@sextant/observability";
import { DiscoveryRequest, TypeUrl } from "@sextant/proto/envoy";
import { Node } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { FuzzTarget } from "../target.js";

const ADS_PATH = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/** The stream ended with a gRPC status other than OK: grpc-js refused the framing. */
class RefusedStream extends Error {}

/**
 * The complete messages of a gRPC request body (flag byte, 4-byte big-endian
 * length, payload), in order; bytes after the last complete one are ignored.
 */
export function grpcFrames(body: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  while (at + 5 <= body.length) {
    const length = new DataView(body.buffer, body.byteOffset + at + 1, 4).getUint32(0);
    if (at + 5 + length > body.length) break;
    out.push(body.subarray(at + 5, at + 5 + length));
    at += 5 + length;
  }
  return out;
}

export function grpcBody(messages: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(messages.reduce((sum, m) => sum + 5 + m.length, 0));
  let at = 0;
  for (const message of messages) {
    new DataView(out.buffer, at + 1, 4).setUint32(0, message.length);
    out.set(message, at + 5);
    at += 5 + message.length;
  }
  return out;
}

/** What push (the upstream) received on each stream, in order. */
let received: Buffer[][] = [];
let session: ClientHttp2Session;
let socketPath: string;

async function setup(): Promise<void> {
  const upstream = new Server();
  upstream.addService(PASSTHROUGH_ADS_SERVICE, {
    streamAggregatedResources: (call: ServerDuplexStream<Buffer, Buffer>) => {
      const messages: Buffer[] = [];
      received.push(messages);
      call.on("data", (message: Buffer) => messages.push(message));
      call.on("end", () => call.end());
      call.on("error", () => {});
    },
    deltaAggregatedResources: (call: ServerDuplexStream<Buffer, Buffer>) => call.end(),
  });
  const port = await new Promise<number>((resolve, reject) =>
    upstream.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  socketPath = join(mkdtempSync(join(tmpdir(), "fuzz-xds-proxy-")), "xds.sock");
  const runner = xdsProxyRunner({
    socketPath,
    tcpPort: 0,
    upstreamAddress: `127.0.0.1:${port}`,
    credentials: () => credentials.createInsecure(),
    logger: createLogger({ service: "fuzz", level: "silent" }),
  });
  await runner.start();
}

function openSession(): ClientHttp2Session {
  if (!session || session.closed || session.destroyed) {
    session = http2Connect("http://localhost", { createConnection: () => netConnect(socketPath) });
    session.on("error", () => {});
  }
  return session;
}

/** Sends one request body; resolves with the stream's grpc-status. */
function send(body: Uint8Array): Promise<number> {
  return new Promise((resolve, reject) => {
    const stream = openSession().request({
      [constants.HTTP2_HEADER_METHOD]: "POST",
      [constants.HTTP2_HEADER_PATH]: ADS_PATH,
      [constants.HTTP2_HEADER_CONTENT_TYPE]: "application/grpc",
      te: "trailers",
    });
    let status: number | undefined;
    stream.on("response", (headers) => {
      if (headers["grpc-status"] !== undefined) status = Number(headers["grpc-status"]);
    });
    stream.on("trailers", (trailers) => {
      status = Number(trailers["grpc-status"]);
    });
    stream.on("data", () => {});
    stream.on("error", reject);
    stream.on("close", () =>
      status === undefined
        ? reject(new Error(`the stream closed without a grpc-status (code ${stream.rstCode})`))
        : resolve(status),
    );
    stream.end(body);
  });
}

export const target: FuzzTarget = {
  tokens: [
    "\x00\x00\x00\x00\x00",
    "\x01\x00\x00\x00\x01",
    "\x00\xff\xff\xff\xff",
    "\x00\x00\x00\x00\x10",
    TypeUrl.Cluster,
  ],
  setup,
  async run(input) {
    received = [];
    const status = await send(input);
    if (status !== 0) throw new RefusedStream(`grpc-status ${status}`);
    // grpc-js drops an incomplete last frame at the end of the stream (with
    // status OK); gRPC-Go would answer INTERNAL. Either way nothing of it may reach push.
    const expected = grpcFrames(input);
    const got = received[0] ?? [];
    if (got.length !== expected.length || got.some((message, i) => !message.equals(expected[i]!)))
      throw new Error(`push received ${got.length} messages (or other bytes) for ${expected.length} sent`);
  },
  refusal: (error) => error instanceof RefusedStream,
};

/** Envoy's first requests and an ACK, framed as gRPC sends them; an empty body; an empty message. */
export function proxySeeds(): Record<string, Uint8Array> {
  const node = Node.fromPartial({
    id: "sidecar~10.0.0.10~productpage-v1-1.default~default.svc.cluster.local",
    metadata: { NAMESPACE: "default", LABELS: { app: "productpage" } },
  });
  const request = (r: Partial<DiscoveryRequest>) =>
    DiscoveryRequest.encode(DiscoveryRequest.fromPartial(r)).finish();
  return {
    "envoy-cds-lds.bin": grpcBody([
      request({ node, typeUrl: TypeUrl.Cluster }),
      request({ typeUrl: TypeUrl.Listener }),
      request({ typeUrl: TypeUrl.Cluster, responseNonce: "1", versionInfo: "v1" }),
    ]),
    "empty-message.bin": grpcBody([new Uint8Array()]),
    "no-messages.bin": new Uint8Array(),
  };
}
