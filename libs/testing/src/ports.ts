import { createServer } from "node:net";

/**
 * A TCP port on 127.0.0.1 that was free a moment ago (the OS picked it), for
 * processes that must be told their port up front. Another process could
 * take it before it is used; tests that can bind port 0 themselves should.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}
