import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { once } from "node:events";
import { createServer as createTcpServer, isIPv6, type Server, type Socket } from "node:net";
import type { Logger } from "@sextant/observability";
import { TcpFramer } from "./tcp-framing.js";
import type { Transport } from "./wire.js";

/** Answers one query's bytes; undefined sends nothing back. */
export type QueryHandler = (query: Buffer, transport: Transport) => Promise<Buffer | undefined>;

/** A client connection idle this long is closed (miekg/dns's default, which Istio's server uses). */
const TCP_IDLE_TIMEOUT_MS = 8_000;

/** Options of {@link DnsServer}. */
export interface DnsServerOptions {
  host: string;
  /** 0 picks a free port, the same for UDP and TCP. */
  port: number;
  handler: QueryHandler;
  logger: Logger;
}

/**
 * A DNS server on one address and port, over UDP and TCP (a client retries
 * a truncated UDP reply over TCP, on the same port). Each query is answered
 * on its own: a slow upstream does not hold the others back, and a TCP
 * client may send several queries on one connection without waiting.
 */
export class DnsServer {
  readonly #options: DnsServerOptions;
  #udp: UdpSocket | undefined;
  #tcp: Server | undefined;
  readonly #connections = new Set<Socket>();
  #port = 0;

  constructor(options: DnsServerOptions) {
    this.#options = options;
  }

  /** The address it listens on. */
  get host(): string {
    return this.#options.host;
  }

  /** The bound port (UDP and TCP), once listening. */
  get port(): number {
    return this.#port;
  }

  /**
   * Binds UDP, then TCP on the same port. With port 0 the OS picks the UDP
   * port, and that number may be taken for TCP (another socket's ephemeral
   * port): then it tries again with a new pick, a few times.
   */
  async listen(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#listenOnce();
      } catch (error) {
        const taken = (error as NodeJS.ErrnoException).code === "EADDRINUSE";
        if (!taken || this.#options.port !== 0 || attempt >= 5) throw error;
      }
    }
  }

  async #listenOnce(): Promise<void> {
    const { host, port } = this.#options;
    const udp = createSocket({ type: isIPv6(host) ? "udp6" : "udp4" });
    udp.on("message", (message, peer) => this.#onDatagram(udp, message, peer.address, peer.port));
    udp.bind(port, host);
    await Promise.race([once(udp, "listening"), once(udp, "error").then(([error]) => Promise.reject(error))]);
    this.#udp = udp;
    this.#port = udp.address().port;
    const tcp = createTcpServer((socket) => this.#onConnection(socket));
    tcp.listen(this.#port, host);
    try {
      await Promise.race([
        once(tcp, "listening"),
        once(tcp, "error").then(([error]) => Promise.reject(error)),
      ]);
    } catch (error) {
      udp.close();
      this.#udp = undefined;
      throw error;
    }
    // After start-up an error is logged, not thrown: one bad datagram must not stop the proxy.
    udp.on("error", (error) => this.#options.logger.warn({ err: error }, "DNS proxy: UDP socket error"));
    tcp.on("error", (error) => this.#options.logger.warn({ err: error }, "DNS proxy: TCP server error"));
    this.#tcp = tcp;
  }

  async close(): Promise<void> {
    for (const socket of this.#connections) socket.destroy();
    this.#connections.clear();
    const udp = this.#udp;
    const tcp = this.#tcp;
    this.#udp = undefined;
    this.#tcp = undefined;
    await Promise.all([
      udp ? new Promise<void>((resolve) => udp.close(() => resolve())) : undefined,
      tcp ? new Promise<void>((resolve) => tcp.close(() => resolve())) : undefined,
    ]);
  }

  #onDatagram(udp: UdpSocket, message: Buffer, address: string, port: number): void {
    this.#answer(message, "udp", (reply) => {
      if (this.#udp === udp) udp.send(reply, port, address);
    });
  }

  #onConnection(socket: Socket): void {
    this.#connections.add(socket);
    const framer = new TcpFramer();
    socket.setTimeout(TCP_IDLE_TIMEOUT_MS, () => socket.destroy());
    socket.on("close", () => this.#connections.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.on("data", (chunk) => {
      for (const query of framer.push(chunk))
        this.#answer(query, "tcp", (reply) => {
          if (!socket.destroyed) socket.write(TcpFramer.frame(reply));
        });
    });
  }

  #answer(query: Buffer, transport: Transport, send: (reply: Buffer) => void): void {
    this.#options.handler(query, transport).then(
      (reply) => {
        if (reply) send(reply);
      },
      (error: unknown) => this.#options.logger.warn({ err: error, transport }, "DNS proxy: query failed"),
    );
  }
}
