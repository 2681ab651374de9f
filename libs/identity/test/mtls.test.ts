import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type ChannelCredentials,
  credentials,
  makeGenericClientConstructor,
  Server,
  type ServerCredentials,
  type ServerUnaryCall,
  type ServiceError,
  type sendUnaryData,
} from "@grpc/grpc-js";
import {
  callerSpiffeId,
  formatSpiffeId,
  mtlsChannelCredentials,
  mtlsServerCredentials,
  type SpiffeId,
  type WorkloadIdentity,
} from "../src/index.js";
import { type CaFixture, startCa, workloadIdentity } from "./helpers.js";

const SERVER_TOKEN = "server-bootstrap-token-0123456789";
const CLIENT_TOKEN = "client-bootstrap-token-0123456789";
const SERVER = "spiffe://cluster.local/ns/local/sa/server";
const CLIENT = "spiffe://cluster.local/ns/local/sa/client";

/** A one-method service that answers with the caller's SPIFFE id, as the server's TLS verified it. */
const WhoAmIService = {
  whoAmI: {
    path: "/sextant.test.WhoAmI/WhoAmI",
    requestStream: false,
    responseStream: false,
    requestSerialize: (value: Buffer) => value,
    requestDeserialize: (bytes: Buffer) => bytes,
    responseSerialize: (value: Buffer) => value,
    responseDeserialize: (bytes: Buffer) => bytes,
  },
} as const;
const WhoAmIClient = makeGenericClientConstructor(WhoAmIService, "WhoAmI");

let fixture: CaFixture;
let serverIdentity: WorkloadIdentity;
let clientIdentity: WorkloadIdentity;
const servers: Server[] = [];

function identity(serviceAccount: string, token: string): WorkloadIdentity {
  return workloadIdentity(fixture, { serviceAccount, token: async () => token });
}

/** Serves WhoAmI on localhost with the given credentials; resolves with its address. */
async function serve(serverCredentials: ServerCredentials): Promise<string> {
  const server = new Server();
  servers.push(server);
  server.addService(WhoAmIService, {
    whoAmI: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      const caller = callerSpiffeId(call);
      callback(null, Buffer.from(caller ? formatSpiffeId(caller) : "anonymous"));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("localhost:0", serverCredentials, (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return `localhost:${port}`;
}

/** Calls WhoAmI; resolves with the answer or the gRPC error. */
function whoAmI(address: string, channelCredentials: ChannelCredentials): Promise<string | ServiceError> {
  const client = new WhoAmIClient(address, channelCredentials);
  return new Promise<string | ServiceError>((resolve) =>
    client.makeUnaryRequest(
      WhoAmIService.whoAmI.path,
      WhoAmIService.whoAmI.requestSerialize,
      WhoAmIService.whoAmI.responseDeserialize,
      Buffer.alloc(0),
      { deadline: Date.now() + 15_000 },
      (error, response) => resolve(error ?? response?.toString() ?? ""),
    ),
  ).finally(() => client.close());
}

before(async () => {
  fixture = await startCa({
    [SERVER_TOKEN]: { namespace: "local", serviceAccount: "server" },
    [CLIENT_TOKEN]: { namespace: "local", serviceAccount: "client" },
  });
  serverIdentity = identity("server", SERVER_TOKEN);
  clientIdentity = identity("client", CLIENT_TOKEN);
  await Promise.all([serverIdentity.start(), clientIdentity.start()]);
});

after(async () => {
  for (const server of servers) server.forceShutdown();
  await serverIdentity?.close();
  await clientIdentity?.close();
  await fixture?.dispose();
});

describe("mTLS credentials", () => {
  test("two workload identities call each other: each side sees the other's SPIFFE id", async () => {
    const address = await serve(mtlsServerCredentials(serverIdentity, { requireClientCertificate: true }));
    const seenServers: Array<SpiffeId | undefined> = [];
    const answer = await whoAmI(
      address,
      mtlsChannelCredentials(clientIdentity, (id) => {
        seenServers.push(id);
        return id && formatSpiffeId(id) === SERVER ? undefined : "not the server";
      }),
    );
    assert.equal(answer, CLIENT);
    assert.deepEqual(seenServers[0], {
      trustDomain: "cluster.local",
      namespace: "local",
      serviceAccount: "server",
    });
  });

  test("a client without a certificate is refused when client certificates are required", async () => {
    const address = await serve(mtlsServerCredentials(serverIdentity, { requireClientCertificate: true }));
    const roots = Buffer.from(clientIdentity.current().rootsPem.join(""));
    // It trusts the server (no host name check: the server's certificate names an identity, not a host).
    const anonymous = credentials.createSsl(roots, null, null, { checkServerIdentity: () => undefined });
    const result = await whoAmI(address, anonymous);
    assert.ok(typeof result !== "string", `expected a refusal, got ${result}`);
    assert.match(result.details, /certificate required/, "the server's TLS asked for a certificate");
    // The same server answers a client that presents its certificate.
    assert.equal(
      await whoAmI(
        address,
        mtlsChannelCredentials(clientIdentity, () => undefined),
      ),
      CLIENT,
    );
  });

  test("a client without a certificate gets through when client certificates are optional, as nobody", async () => {
    const address = await serve(mtlsServerCredentials(serverIdentity, { requireClientCertificate: false }));
    const roots = Buffer.from(clientIdentity.current().rootsPem.join(""));
    const anonymous = credentials.createSsl(roots, null, null, { checkServerIdentity: () => undefined });
    assert.equal(await whoAmI(address, anonymous), "anonymous");
  });

  test("acceptServer refusing the server's identity fails the call with its reason", async () => {
    const address = await serve(mtlsServerCredentials(serverIdentity, { requireClientCertificate: true }));
    const result = await whoAmI(
      address,
      mtlsChannelCredentials(
        clientIdentity,
        (id) => `expected spiffe://cluster.local/ns/local/sa/db, got ${id?.serviceAccount}`,
      ),
    );
    assert.ok(typeof result !== "string", `expected a refusal, got ${result}`);
    assert.match(result.details, /server identity spiffe:\/\/cluster.local\/ns\/local\/sa\/server refused/);
    assert.match(result.details, /expected spiffe:\/\/cluster.local\/ns\/local\/sa\/db, got server/);
  });
});
