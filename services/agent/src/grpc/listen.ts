import { lstatSync, mkdirSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { dirname, resolve } from "node:path";
import { type Server, ServerCredentials } from "@grpc/grpc-js";

/**
 * Resolves whether something accepts connections on the Unix socket at path.
 * A socket file left by an agent that crashed refuses them.
 */
function socketInUse(path: string): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect(path);
    socket.once("connect", () => {
      socket.destroy();
      done(true);
    });
    socket.once("error", () => done(false));
  });
}

/**
 * Binds server to a Unix socket (plaintext: access is the socket file's
 * permissions, as in Istio). Creates the directory; removes a stale socket
 * left by a previous run, but refuses to take over one that another process
 * still serves, and anything that is not a socket.
 */
export async function listenOnUnixSocket(server: Server, path: string, what: string): Promise<void> {
  const absolute = resolve(path);
  mkdirSync(dirname(absolute), { recursive: true });
  const existing = lstatOrUndefined(absolute);
  if (existing) {
    if (!existing.isSocket())
      throw new Error(`${what} ${absolute}: a file that is not a socket is in the way`);
    if (await socketInUse(absolute))
      throw new Error(`${what} ${absolute}: another process is serving on this socket`);
    rmSync(absolute, { force: true });
  }
  await new Promise<void>((done, fail) =>
    server.bindAsync(`unix://${absolute}`, ServerCredentials.createInsecure(), (error) =>
      error ? fail(new Error(`${what} ${absolute}: cannot listen: ${error.message}`)) : done(),
    ),
  );
}

/** Binds server to host:port in plaintext; resolves with the bound port. */
export function listenOnTcp(server: Server, host: string, port: number, what: string): Promise<number> {
  return new Promise((done, fail) =>
    server.bindAsync(`${host}:${port}`, ServerCredentials.createInsecure(), (error, bound) =>
      error ? fail(new Error(`${what} on ${host}:${port}: cannot listen: ${error.message}`)) : done(bound),
    ),
  );
}

/** Removes a socket file the agent created, at shutdown. */
export function removeSocket(path: string): void {
  rmSync(resolve(path), { force: true });
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
}
