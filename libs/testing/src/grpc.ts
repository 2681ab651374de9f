import {
  type ChannelCredentials,
  credentials,
  Server,
  ServerCredentials,
  type ServiceDefinition,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { onCleanup } from "./cleanup.js";

/** A gRPC server bound to 127.0.0.1 on a port the OS chose. */
export interface GrpcServerFixture {
  readonly server: Server;
  readonly port: number;
  /** host:port, for a client's address. */
  readonly address: string;
  close(): Promise<void>;
}

/** Starts a gRPC server on 127.0.0.1:0 with the given services (plaintext unless credentials are given). */
export async function startGrpcServer(
  services: Array<{ definition: ServiceDefinition; implementation: UntypedServiceImplementation }>,
  serverCredentials: ServerCredentials = ServerCredentials.createInsecure(),
): Promise<GrpcServerFixture> {
  const server = new Server();
  for (const { definition, implementation } of services) server.addService(definition, implementation);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", serverCredentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  // Streams may be long-lived (xDS); do not wait for them to end.
  const unregister = onCleanup(`gRPC server on port ${port}`, () => server.forceShutdown());
  return {
    server,
    port,
    address: `127.0.0.1:${port}`,
    close: async () => {
      unregister();
      server.forceShutdown();
    },
  };
}

/** Plaintext client credentials, for tests against startGrpcServer. */
export const insecureClientCredentials = (): ChannelCredentials => credentials.createInsecure();
