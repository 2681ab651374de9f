import { Client, credentials, Metadata } from "@grpc/grpc-js";

/** grpc.health.v1.Health/Check, the method Kubernetes' gRPC probe calls. */
const CHECK_METHOD = "/grpc.health.v1.Health/Check";
/** HealthCheckResponse.ServingStatus SERVING. */
const SERVING = 1;

/** HealthCheckRequest { string service = 1; } in protobuf wire form. */
function encodeRequest(service: string): Buffer {
  const name = Buffer.from(service, "utf8");
  return name.length === 0
    ? Buffer.alloc(0)
    : Buffer.concat([Buffer.from([0x0a]), varint(name.length), name]);
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest & 0x7f) | 0x80);
    rest >>>= 7;
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

/** HealthCheckResponse { ServingStatus status = 1; }: the status, 0 (UNKNOWN) when absent. */
function decodeStatus(bytes: Buffer): number {
  let offset = 0;
  let status = 0;
  const readVarint = (): number => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = bytes[offset++];
      if (byte === undefined) throw new Error("truncated HealthCheckResponse");
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (offset < bytes.length) {
    const tag = readVarint();
    const wireType = tag & 7;
    if (tag >>> 3 === 1 && wireType === 0) status = readVarint();
    else if (wireType === 0) readVarint();
    else if (wireType === 2) offset += readVarint();
    else if (wireType === 1) offset += 8;
    else if (wireType === 5) offset += 4;
    else throw new Error(`unexpected wire type ${wireType} in HealthCheckResponse`);
  }
  return status;
}

/**
 * Kubernetes' gRPC probe: Health/Check for `service` on address, in
 * plaintext (as kubelet), within the timeout. Resolves whether the answer
 * is SERVING; a failed call rejects with its reason.
 */
export async function grpcHealthServing(
  address: string,
  service: string,
  timeoutMs: number,
  userAgent: string | undefined,
): Promise<boolean> {
  const client = new Client(address, credentials.createInsecure(), {
    ...(userAgent ? { "grpc.primary_user_agent": userAgent } : {}),
  });
  try {
    const answer = await new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(
        CHECK_METHOD,
        (request: Buffer) => request,
        (response: Buffer) => response,
        encodeRequest(service),
        new Metadata(),
        { deadline: Date.now() + timeoutMs },
        (error, response) =>
          error || !response ? reject(error ?? new Error("no answer")) : resolve(response),
      ),
    );
    return decodeStatus(answer) === SERVING;
  } finally {
    client.close();
  }
}
