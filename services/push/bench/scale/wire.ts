// Just enough of the protobuf wire format for the simulated sidecars to read
// push's responses without decoding them: at 2,000 sidecars × 1,000 services
// the load generator receives gigabytes, and a full decode of every cluster
// would make it, not push, the bottleneck. Only the fields an Envoy acts on
// are read (resource names, a cluster's EDS service name, a listener's RDS
// route names); everything else is skipped by length.

/** A field's value: its bytes [start, end) for length-delimited fields, or the varint. */
interface Field {
  number: number;
  start: number;
  end: number;
  varint: number;
}

/** Calls visit for each top-level field of buf[start, end). */
function forEachField(buf: Uint8Array, start: number, end: number, visit: (field: Field) => void): void {
  let pos = start;
  const varint = () => {
    let result = 0;
    let shift = 0;
    for (;;) {
      const byte = buf[pos++] as number;
      result += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return result;
      shift += 7;
    }
  };
  while (pos < end) {
    const tag = varint();
    const number = Math.floor(tag / 8);
    switch (tag & 7) {
      case 0:
        visit({ number, start: pos, end: pos, varint: varint() });
        break;
      case 1:
        pos += 8;
        break;
      case 2: {
        const length = varint();
        visit({ number, start: pos, end: pos + length, varint: 0 });
        pos += length;
        break;
      }
      case 5:
        pos += 4;
        break;
      default:
        throw new Error(`unsupported wire type ${tag & 7}`);
    }
  }
}

const decoder = new TextDecoder();
const text = (buf: Uint8Array, field: Field) => decoder.decode(buf.subarray(field.start, field.end));

/** The fields of one submessage, by number (the last occurrence wins, as in protobuf). */
function fieldsOf(buf: Uint8Array, start: number, end: number): Map<number, Field> {
  const fields = new Map<number, Field>();
  forEachField(buf, start, end, (field) => fields.set(field.number, field));
  return fields;
}

/** An xDS resource as an encoded google.protobuf.Any, with the name read from it. */
export interface RawResource {
  readonly name: string;
  /** The encoded Any (type_url and value), as it appears in the response. */
  readonly any: Uint8Array;
  /** The encoded resource (the Any's value). */
  readonly value: Uint8Array;
}

function rawResource(buf: Uint8Array, start: number, end: number): RawResource {
  const any = buf.subarray(start, end);
  const value = fieldsOf(any, 0, any.length).get(2);
  const body = value ? any.subarray(value.start, value.end) : new Uint8Array();
  // Cluster, Listener and RouteConfiguration name themselves in field 1, and so does
  // ClusterLoadAssignment (cluster_name).
  const name = fieldsOf(body, 0, body.length).get(1);
  return { name: name ? text(body, name) : "", any, value: body };
}

/** A SotW DiscoveryResponse: version_info 1, resources 2, type_url 4, nonce 5. */
export interface RawResponse {
  versionInfo: string;
  typeUrl: string;
  nonce: string;
  resources: RawResource[];
  /** Delta only: removed_resources. */
  removed: string[];
}

export function parseResponse(buf: Uint8Array): RawResponse {
  const response: RawResponse = { versionInfo: "", typeUrl: "", nonce: "", resources: [], removed: [] };
  forEachField(buf, 0, buf.length, (field) => {
    if (field.number === 1) response.versionInfo = text(buf, field);
    else if (field.number === 2) response.resources.push(rawResource(buf, field.start, field.end));
    else if (field.number === 4) response.typeUrl = text(buf, field);
    else if (field.number === 5) response.nonce = text(buf, field);
  });
  return response;
}

/**
 * A DeltaDiscoveryResponse: system_version_info 1, resources 2 (Resource:
 * version 1, resource 2, name 3), type_url 4, nonce 5, removed_resources 6.
 */
export function parseDeltaResponse(buf: Uint8Array): RawResponse {
  const response: RawResponse = { versionInfo: "", typeUrl: "", nonce: "", resources: [], removed: [] };
  forEachField(buf, 0, buf.length, (field) => {
    if (field.number === 1) response.versionInfo = text(buf, field);
    else if (field.number === 2) {
      const resource = fieldsOf(buf, field.start, field.end);
      const any = resource.get(2);
      const name = resource.get(3);
      const raw = any ? rawResource(buf, any.start, any.end) : undefined;
      response.resources.push({
        name: name ? text(buf, name) : (raw?.name ?? ""),
        any: raw?.any ?? new Uint8Array(),
        value: raw?.value ?? new Uint8Array(),
      });
    } else if (field.number === 4) response.typeUrl = text(buf, field);
    else if (field.number === 5) response.nonce = text(buf, field);
    else if (field.number === 6) response.removed.push(text(buf, field));
  });
  return response;
}

const EDS_DISCOVERY_TYPE = 3; // envoy.config.cluster.v3.Cluster.DiscoveryType.EDS

/**
 * The name an Envoy subscribes to over EDS for this cluster, or undefined when
 * the cluster is not of type EDS. Cluster: type 2, eds_cluster_config 3
 * (service_name 2); the cluster's own name when service_name is empty.
 */
export function edsServiceName(cluster: RawResource): string | undefined {
  const fields = fieldsOf(cluster.value, 0, cluster.value.length);
  if (fields.get(2)?.varint !== EDS_DISCOVERY_TYPE) return undefined;
  const eds = fields.get(3);
  if (!eds) return cluster.name;
  const serviceName = fieldsOf(cluster.value, eds.start, eds.end).get(2);
  return serviceName && serviceName.end > serviceName.start ? text(cluster.value, serviceName) : cluster.name;
}

const HCM_TYPE_URL =
  "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

/**
 * The route configurations a listener's HTTP connection managers fetch over
 * RDS. Listener: filter_chains 3, default_filter_chain 25; FilterChain:
 * filters 3; Filter: typed_config 4 (Any: type_url 1, value 2);
 * HttpConnectionManager: rds 3 (Rds: route_config_name 2).
 */
export function rdsRouteNames(listener: RawResource): string[] {
  const names: string[] = [];
  const buf = listener.value;
  const chain = (field: Field) =>
    forEachField(buf, field.start, field.end, (filter) => {
      if (filter.number !== 3) return;
      const typedConfig = fieldsOf(buf, filter.start, filter.end).get(4);
      if (!typedConfig) return;
      const any = fieldsOf(buf, typedConfig.start, typedConfig.end);
      const typeUrl = any.get(1);
      const value = any.get(2);
      if (!typeUrl || !value || text(buf, typeUrl) !== HCM_TYPE_URL) return;
      const rds = fieldsOf(buf, value.start, value.end).get(3);
      const name = rds ? fieldsOf(buf, rds.start, rds.end).get(2) : undefined;
      if (name) names.push(text(buf, name));
    });
  forEachField(buf, 0, buf.length, (field) => {
    if (field.number === 3 || field.number === 25) chain(field);
  });
  return names;
}

/** Encodes a SotW DiscoveryResponse from already-encoded Any resources (the floor's only work). */
export function encodeResponse(
  versionInfo: string,
  typeUrl: string,
  nonce: string,
  anys: readonly Uint8Array[],
) {
  const parts: Uint8Array[] = [];
  const varint = (value: number) => {
    const bytes: number[] = [];
    while (value >= 0x80) {
      bytes.push((value % 0x80) | 0x80);
      value = Math.floor(value / 0x80);
    }
    bytes.push(value);
    parts.push(Uint8Array.from(bytes));
  };
  const bytesField = (number: number, bytes: Uint8Array) => {
    varint(number * 8 + 2);
    varint(bytes.length);
    parts.push(bytes);
  };
  const encoder = new TextEncoder();
  bytesField(1, encoder.encode(versionInfo));
  for (const any of anys) bytesField(2, any);
  bytesField(4, encoder.encode(typeUrl));
  bytesField(5, encoder.encode(nonce));
  return Buffer.concat(parts);
}
