import { connect, createServer, type Server, type Socket } from "node:net";

/** A TCP balancer in front of push replicas, as a Kubernetes Service would be. */
export interface TcpBalancer {
  readonly port: number;
  /** Drops every open connection (both sides see it closed); new ones go to targets() as ever. */
  disconnect(): void;
  close(): Promise<void>;
}

/**
 * Forwards each new connection to the first target that accepts it, so that
 * when a replica dies its clients' reconnects land on the next one. Bytes
 * pass through untouched (HTTP/2, gRPC): the balancer knows nothing of xDS.
 */
export async function startTcpBalancer(targets: () => number[]): Promise<TcpBalancer> {
  const sockets = new Set<Socket>();
  const server: Server = createServer(async (client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.pause();
    for (const port of targets()) {
      const upstream = await new Promise<Socket | undefined>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        socket.once("connect", () => resolve(socket));
        socket.once("error", () => resolve(undefined));
      });
      if (!upstream) continue;
      sockets.add(upstream);
      upstream.on("close", () => {
        sockets.delete(upstream);
        client.destroy();
      });
      client.on("close", () => upstream.destroy());
      upstream.on("error", () => client.destroy());
      client.on("error", () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
      return;
    }
    client.destroy();
  });
  const port = await new Promise<number>((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : 0);
    }),
  );
  return {
    port,
    disconnect() {
      for (const socket of sockets) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
