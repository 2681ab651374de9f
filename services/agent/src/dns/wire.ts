// DNS messages on the wire, with dns-packet: a small codec (its one
// dependency is an IP address codec), used by multicast-dns and bonjour for
// years, typed by @types/dns-packet. It
// encodes and decodes messages and frames them for TCP; it does not compress
// names, so a reply here is a little larger than Istio's (miekg/dns) and is
// truncated a little sooner.
import * as packet from "dns-packet";

/** The smallest payload every DNS client accepts over UDP (RFC 1035). */
export const MIN_UDP_PAYLOAD = 512;
/** A TCP message carries a 16-bit length. */
export const MAX_TCP_MESSAGE = 65_535;

/** The fixed header every DNS message starts with. */
const HEADER_LENGTH = 12;
/** Header bits of the 16-bit flags word that are copied from a query to its reply. */
const OPCODE_MASK = 0x7800;

/** The transport a query came on. */
export type Transport = "udp" | "tcp";

/** The response codes the proxy sets itself. */
export type ResponseCode = "NOERROR" | "SERVFAIL";
const RCODES: Record<ResponseCode, number> = { NOERROR: 0, SERVFAIL: 2 };

/**
 * The reply to a query, as miekg/dns's SetReply makes it (which Istio uses):
 * same id, opcode and first question, RD and CD copied, QR set.
 */
export function replyTo(
  query: packet.Packet,
  rcode: ResponseCode,
  options: { authoritative?: boolean; answers?: packet.Answer[] } = {},
): packet.Packet {
  const queryFlags = query.flags ?? 0;
  const flags =
    (queryFlags & OPCODE_MASK) |
    (queryFlags & packet.RECURSION_DESIRED) |
    (queryFlags & packet.CHECKING_DISABLED) |
    (options.authoritative ? packet.AUTHORITATIVE_ANSWER : 0) |
    RCODES[rcode];
  return {
    id: query.id ?? 0,
    type: "response",
    flags,
    questions: query.questions?.slice(0, 1) ?? [],
    answers: options.answers ?? [],
    authorities: [],
    additionals: [],
  };
}

/**
 * The largest reply a client takes (Istio's rule): over TCP a full message,
 * over UDP the size its EDNS OPT record advertises, never under 512 bytes.
 */
export function replySizeLimit(query: packet.Packet, transport: Transport): number {
  if (transport === "tcp") return MAX_TCP_MESSAGE;
  const opt = query.additionals?.find((record) => record.type === "OPT") as packet.OptAnswer | undefined;
  return Math.max(opt?.udpPayloadSize ?? 0, MIN_UDP_PAYLOAD);
}

/**
 * The reply encoded within `limit` bytes. A reply that does not fit keeps
 * its question, as many answers as fit and its OPT record, drops the
 * authority and additional sections, and has TC set when an answer was left
 * out, so that the client asks again over TCP.
 */
export function encodeWithin(reply: packet.Packet, limit: number): Buffer {
  const whole = packet.encode(reply);
  if (whole.length <= limit) return whole;
  const opt = reply.additionals?.filter((record) => record.type === "OPT") ?? [];
  const kept: packet.Packet = { ...reply, answers: [], authorities: [], additionals: opt };
  let size = packet.encodingLength(kept);
  const answers = reply.answers ?? [];
  for (const answer of answers) {
    const length = packet.encodingLength({ answers: [answer] }) - HEADER_LENGTH;
    if (size + length > limit) break;
    kept.answers!.push(answer);
    size += length;
  }
  if (kept.answers!.length < answers.length) kept.flags = (reply.flags ?? 0) | packet.TRUNCATED_RESPONSE;
  return packet.encode(kept);
}

/** A query decoded, or undefined for bytes that are not one (they get no reply, like a dropped datagram). */
export function decodeQuery(bytes: Buffer): packet.Packet | undefined {
  try {
    const message = packet.decode(bytes);
    return message.type === "query" ? message : undefined;
  } catch {
    return undefined;
  }
}

export { packet };
