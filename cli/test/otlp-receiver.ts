// A loopback OTLP/HTTP trace receiver for tests: it accepts what the
// OpenTelemetry SDK's exporter POSTs to /v1/traces (protobuf by default,
// JSON when OTEL_EXPORTER_OTLP_PROTOCOL=http/json) and keeps the spans'
// names, ids and links. Other signals (/v1/metrics, /v1/logs) are accepted
// and dropped.
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

/** A received span, with the service.name of its resource. */
export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  links: Array<{ traceId: string; spanId: string }>;
}

export interface OtlpReceiver {
  /** The base URL for OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** The content types of the trace exports received. */
  readonly contentTypes: Set<string>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes = new Set<string>();
  const server = createServer(async (request, response) => {
    const body = await readBody(request);
    const type = request.headers["content-type"] ?? "";
    const json = type.startsWith("application/json");
    if (request.method === "POST" && request.url === "/v1/traces") {
      contentTypes.add(type);
      spans.push(...(json ? spansOfJson(JSON.parse(body.toString("utf8"))) : spansOfProtobuf(body)));
    }
    // An empty ExportTraceServiceResponse: no partial success.
    response.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" });
    response.end(json ? "{}" : "");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** OTLP/JSON: ids are hex strings (the OTLP spec's exception to proto3's JSON mapping). */
function spansOfJson(request: {
  resourceSpans?: Array<{
    resource?: { attributes?: Array<{ key: string; value: { stringValue?: string } }> };
    scopeSpans?: Array<{
      spans?: Array<{
        name: string;
        traceId: string;
        spanId: string;
        links?: Array<{ traceId: string; spanId: string }>;
      }>;
    }>;
  }>;
}): ReceivedSpan[] {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const service =
      resourceSpans.resource?.attributes?.find((attribute) => attribute.key === "service.name")?.value
        .stringValue ?? "";
    return (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans) =>
      (scopeSpans.spans ?? []).map((span) => ({
        service,
        name: span.name,
        traceId: span.traceId,
        spanId: span.spanId,
        links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
      })),
    );
  });
}

/**
 * OTLP/protobuf, read with the field numbers of opentelemetry-proto's
 * ExportTraceServiceRequest: resource_spans 1 { resource 1 { attributes 1 },
 * scope_spans 2 { spans 2 { trace_id 1, span_id 2, name 5, links 13 {
 * trace_id 1, span_id 2 } } } }; KeyValue { key 1, value 2 { string_value 1 } }.
 */
function spansOfProtobuf(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of fieldsOf(body, 1)) {
    let service = "";
    for (const resource of fieldsOf(resourceSpans, 1))
      for (const attribute of fieldsOf(resource, 1))
        if (text(fieldsOf(attribute, 1)[0]) === "service.name")
          service = text(fieldsOf(fieldsOf(attribute, 2)[0] ?? new Uint8Array(), 1)[0]);
    for (const scopeSpans of fieldsOf(resourceSpans, 2))
      for (const span of fieldsOf(scopeSpans, 2))
        spans.push({
          service,
          name: text(fieldsOf(span, 5)[0]),
          traceId: hex(fieldsOf(span, 1)[0]),
          spanId: hex(fieldsOf(span, 2)[0]),
          links: fieldsOf(span, 13).map((link) => ({
            traceId: hex(fieldsOf(link, 1)[0]),
            spanId: hex(fieldsOf(link, 2)[0]),
          })),
        });
  }
  return spans;
}

const text = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString("utf8");
const hex = (bytes: Uint8Array | undefined) => Buffer.from(bytes ?? []).toString("hex");

/** The length-delimited values of one field number in a message, skipping the other fields. */
function fieldsOf(message: Uint8Array, wanted: number): Uint8Array[] {
  const values: Uint8Array[] = [];
  let offset = 0;
  const varint = () => {
    let value = 0;
    let shift = 1;
    for (;;) {
      const byte = message[offset++]!;
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
      shift *= 128;
    }
  };
  while (offset < message.length) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    switch (tag & 7) {
      case 0:
        varint();
        break;
      case 1:
        offset += 8;
        break;
      case 5:
        offset += 4;
        break;
      case 2: {
        const length = varint();
        if (field === wanted) values.push(message.subarray(offset, offset + length));
        offset += length;
        break;
      }
      default:
        throw new Error(`unsupported wire type ${tag & 7} in an OTLP request`);
    }
  }
  return values;
}
