import { createSocket } from "node:dgram";
import { isIPv6, connect as tcpConnect } from "node:net";
import type { Logger } from "@sextant/observability";
import type { Nameserver } from "./resolv-conf.js";
import { TcpFramer } from "./tcp-framing.js";
import type { Transport } from "./wire.js";

/** Istio's upstream client waits this long to connect, send and receive. */
export const UPSTREAM_TIMEOUT_MS = 5_000;

/** Options of {@link forwardQuery}. */
export interface ForwardOptions {
  /** The pod's resolv.conf nameservers, tried in order. */
  nameservers: readonly Nameserver[];
  timeoutMs?: number;
  /** All nameservers at once, the first reply wins (Istio's DNS_FORWARD_PARALLEL). */
  parallel?: boolean;
  logger: Logger;
}

/**
 * Sends a query, as received, to the nameservers over the transport the
 * client used (as Istio does): one after the other, or all at once with
 * `parallel`. Returns the first reply's bytes, unchanged: a truncated UDP
 * reply reaches the client with its TC bit, and the client's retry over TCP
 * is forwarded over TCP. Undefined when no nameserver answered (the caller
 * answers SERVFAIL).
 */
export async function forwardQuery(
  query: Buffer,
  transport: Transport,
  options: ForwardOptions,
): Promise<Buffer | undefined> {
  const ask = (server: Nameserver) => exchange(query, transport, server, options);
  if (options.parallel) return Promise.any(options.nameservers.map(ask)).catch(() => undefined);
  for (const server of options.nameservers) {
    try {
      return await ask(server);
    } catch {
      // Logged by exchange; the next nameserver is tried.
    }
  }
  return undefined;
}

/** One nameserver's reply to the query; rejects (after logging why) when there is none or it does not match. */
async function exchange(
  query: Buffer,
  transport: Transport,
  server: Nameserver,
  options: ForwardOptions,
): Promise<Buffer> {
  const timeoutMs = options.timeoutMs ?? UPSTREAM_TIMEOUT_MS;
  try {
    const reply =
      transport === "udp"
        ? await exchangeUdp(query, server, timeoutMs)
        : await exchangeTcp(query, server, timeoutMs);
    if (reply.length < 2 || reply.readUInt16BE(0) !== query.readUInt16BE(0))
      throw new Error("the reply does not match the query's id");
    return reply;
  } catch (error) {
    options.logger.info(
      { server: `${server.host}:${server.port}`, transport, err: (error as Error).message },
      "DNS proxy: upstream failure",
    );
    throw error;
  }
}

/** One query over a connected UDP socket: a refused port fails at once instead of timing out. */
function exchangeUdp(query: Buffer, server: Nameserver, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(isIPv6(server.host) ? "udp6" : "udp4");
    const timer = setTimeout(() => finish(new Error(`no reply within ${timeoutMs} ms`)), timeoutMs);
    const finish = (error: Error | undefined, reply?: Buffer) => {
      clearTimeout(timer);
      socket.close();
      if (error) reject(error);
      else resolve(reply!);
    };
    socket.on("error", (error) => finish(error));
    socket.on("message", (message) => finish(undefined, message));
    socket.connect(server.port, server.host, () => socket.send(query));
  });
}

/** One query over its own TCP connection, framed with its 16-bit length. */
function exchangeTcp(query: Buffer, server: Nameserver, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host: server.host, port: server.port });
    const framer = new TcpFramer();
    socket.setTimeout(timeoutMs, () => finish(new Error(`no reply within ${timeoutMs} ms`)));
    const finish = (error: Error | undefined, reply?: Buffer) => {
      socket.destroy();
      if (error) reject(error);
      else resolve(reply!);
    };
    socket.on("error", (error) => finish(error));
    socket.on("end", () => finish(new Error("the server closed the connection before replying")));
    socket.on("data", (chunk) => {
      const [reply] = framer.push(chunk);
      if (reply) finish(undefined, reply);
    });
    socket.on("connect", () => socket.write(TcpFramer.frame(query)));
  });
}
