// DNS test tools built on dns-packet, independent of the proxy's own server
// code: a tiny authoritative resolver on loopback (the pod's "upstream"), and
// one-shot UDP and TCP queries that return the decoded reply and its size.
import { createSocket } from "node:dgram";
import { once } from "node:events";
import { connect, createServer } from "node:net";
import * as packet from "dns-packet";

/** A record the test resolver answers with. */
export type TestRecord = { type: "A" | "AAAA"; data: string };

/** The test resolver: its port, the queries it received, and how to stop it. */
export interface TestResolver {
  port: number;
  /** Question names in the order they arrived, with their transport. */
  readonly queries: Array<{ name: string; type: string; transport: "udp" | "tcp" }>;
  close(): Promise<void>;
}

/**
 * An authoritative resolver on 127.0.0.1 over UDP and TCP, on one free
 * port: names in `zone` get their records (NOERROR, TTL 300), other names
 * NXDOMAIN.
 */
export async function startTestResolver(zone: Record<string, TestRecord[]>): Promise<TestResolver> {
  const queries: TestResolver["queries"] = [];
  const answer = (bytes: Buffer, transport: "udp" | "tcp"): Buffer => {
    const query = packet.decode(bytes);
    const question = query.questions![0]!;
    queries.push({ name: question.name, type: question.type, transport });
    const records = zone[question.name.toLowerCase()];
    return packet.encode({
      id: query.id,
      type: "response",
      // RD copied, RA set, NXDOMAIN (3) for a name outside the zone.
      flags: (query.flags! & packet.RECURSION_DESIRED) | packet.RECURSION_AVAILABLE | (records ? 0 : 3),
      questions: [question],
      answers: (records ?? [])
        .filter((record) => record.type === question.type)
        .map((record) => ({ ...record, name: question.name, ttl: 300, class: "IN" as const })),
    });
  };
  for (let attempt = 1; ; attempt++) {
    const udp = createSocket("udp4");
    udp.on("message", (message, peer) => udp.send(answer(message, "udp"), peer.port, peer.address));
    udp.bind(0, "127.0.0.1");
    await once(udp, "listening");
    const port = udp.address().port;
    const tcp = createServer((socket) => {
      let pending = Buffer.alloc(0);
      socket.on("error", () => {});
      socket.on("data", (chunk) => {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
          const message = pending.subarray(2, 2 + pending.readUInt16BE(0));
          pending = pending.subarray(2 + message.length);
          const reply = answer(message, "tcp");
          const prefix = Buffer.alloc(2);
          prefix.writeUInt16BE(reply.length);
          socket.write(Buffer.concat([prefix, reply]));
        }
      });
    });
    tcp.listen(port, "127.0.0.1");
    try {
      await once(tcp, "listening");
    } catch (error) {
      // The UDP port the OS picked can be another socket's TCP port: pick again.
      udp.close();
      if ((error as NodeJS.ErrnoException).code === "EADDRINUSE" && attempt < 5) continue;
      throw error;
    }
    return {
      port,
      queries,
      close: async () => {
        await Promise.all([
          new Promise<void>((resolve) => udp.close(() => resolve())),
          new Promise<void>((resolve) => tcp.close(() => resolve())),
        ]);
      },
    };
  }
}

/** A record of a reply, with its data as text (A, AAAA and CNAME are all the proxy answers with). */
export interface ReplyRecord {
  type: string;
  name: string;
  data: string;
  ttl: number | undefined;
}

/** A decoded reply and its size on the wire. */
export interface RawReply {
  size: number;
  question: string;
  rcode: string;
  truncated: boolean;
  authoritative: boolean;
  recursionDesired: boolean;
  answers: ReplyRecord[];
}

const RCODE_NAMES = ["NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"];

let nextId = 1;

/** A query as a stub resolver sends it: RD set, one question, and an EDNS OPT record when `ednsSize` is given. */
function encodeQuery(name: string, type: packet.RecordType, ednsSize?: number): Buffer {
  nextId = (nextId % 65_535) + 1;
  return packet.encode({
    id: nextId,
    type: "query",
    flags: packet.RECURSION_DESIRED,
    questions: [{ name, type, class: "IN" }],
    additionals: ednsSize
      ? [
          {
            type: "OPT",
            name: ".",
            udpPayloadSize: ednsSize,
            extendedRcode: 0,
            ednsVersion: 0,
            flags: 0,
            flag_do: false,
            options: [],
          },
        ]
      : [],
  });
}

function decoded(bytes: Buffer): RawReply {
  const message = packet.decode(bytes);
  const flags = message.flags ?? 0;
  return {
    size: bytes.length,
    question: message.questions?.[0]?.name ?? "",
    rcode: RCODE_NAMES[flags & 0xf] ?? String(flags & 0xf),
    truncated: message.flag_tc,
    authoritative: message.flag_aa,
    recursionDesired: message.flag_rd,
    answers: (message.answers ?? []).map((record) => ({
      type: record.type,
      name: record.name,
      data: "data" in record ? String(record.data) : "",
      ttl: "ttl" in record ? record.ttl : undefined,
    })),
  };
}

/** One query over UDP to 127.0.0.1:port; rejects after timeoutMs without a reply. */
export function queryUdp(
  port: number,
  name: string,
  type: packet.RecordType,
  options: { ednsSize?: number; timeoutMs?: number } = {},
): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = createSocket("udp4");
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error(`no UDP reply for ${name} ${type}`));
    }, options.timeoutMs ?? 5_000);
    socket.on("error", (error) => {
      clearTimeout(timer);
      socket.close();
      reject(error);
    });
    socket.on("message", (message) => {
      clearTimeout(timer);
      socket.close();
      resolve(decoded(message));
    });
    socket.send(encodeQuery(name, type, options.ednsSize), port, "127.0.0.1");
  });
}

/** Queries over one TCP connection to 127.0.0.1:port, sent together; the replies in arrival order. */
export function queryTcp(
  port: number,
  questions: Array<{ name: string; type: packet.RecordType }>,
): Promise<RawReply[]> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    const replies: RawReply[] = [];
    let pending = Buffer.alloc(0);
    socket.on("error", reject);
    socket.on("data", (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const length = pending.readUInt16BE(0);
        replies.push(decoded(pending.subarray(2, 2 + length)));
        pending = pending.subarray(2 + length);
      }
      if (replies.length === questions.length) {
        socket.end();
        resolve(replies);
      }
    });
    socket.on("connect", () => {
      // All queries in one write, each framed: the server must split them.
      socket.write(
        Buffer.concat(
          questions.map(({ name, type }) => {
            const query = encodeQuery(name, type);
            const prefix = Buffer.alloc(2);
            prefix.writeUInt16BE(query.length);
            return Buffer.concat([prefix, query]);
          }),
        ),
      );
    });
  });
}
