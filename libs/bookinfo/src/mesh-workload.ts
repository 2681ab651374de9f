// A Bookinfo-style workload that joins the mesh through its agent, as a
// proxyless gRPC app does under Istio: @grpc/grpc-js-xds reads the bootstrap
// the agent wrote (GRPC_XDS_BOOTSTRAP), talks xDS to the agent, and takes its
// certificates from the files the agent keeps fresh. Run one process per
// workload (grpc-js-xds reads its bootstrap once per process):
//
//   WORKLOAD_ROLE=server WORKLOAD_NAME=reviews-v1 WORKLOAD_ADDRESS=127.0.0.21:9080 node mesh-workload.js
//   WORKLOAD_ROLE=client CONTROL_PORT=18080 node mesh-workload.js
//
// Optional upstream calls, as Bookinfo's services make them:
// - UPSTREAM_TARGET on a server (reviews v2 and v3: xds:///ratings.default.svc.cluster.local:9080):
//   each Whoami first calls Whoami there through its own xDS channel, and fails
//   with UNAVAILABLE when that call fails; the answer stays the server's name.
// - DETAILS_TARGET on a client (productpage: xds:///details.default.svc.cluster.local:9080):
//   each /tally call first calls Whoami there; a failure counts as "error:<code>".
//
// A server is an XdsServer: it serves only once push sent its inbound
// listener, with the TLS and authorization policy that listener carries. A
// client is driven over HTTP on 127.0.0.1:CONTROL_PORT:
//   GET /tally?target=xds:///host:port&calls=N[&header=name:value]  → {"counts": {answer: n}, "errors": [..]}
//   GET /caller?target=xds:///host:port                             → {"answer": "..."}
import { createServer } from "node:http";
import * as grpc from "@grpc/grpc-js";
import * as xds from "@grpc/grpc-js-xds";
import { formatSpiffeId, spiffeIdOfPeer } from "@sextant/identity";
import { ReviewsClient, ReviewsService } from "./grpc-app.js";

const text = (value: string) => Buffer.from(value, "utf8");

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    console.error(`mesh-workload: ${name} is required`);
    process.exit(2);
  }
  return value;
}

/** Serves Whoami (its name) and Caller (the peer's SPIFFE id) through XdsServer. */
function runServer(): void {
  const name = required("WORKLOAD_NAME");
  const address = required("WORKLOAD_ADDRESS");
  const upstreamTarget = process.env.UPSTREAM_TARGET;
  const upstream = upstreamTarget
    ? new ReviewsClient(upstreamTarget, new xds.XdsChannelCredentials(grpc.credentials.createInsecure()))
    : undefined;
  const server = new xds.XdsServer();
  server.addService(ReviewsService, {
    Whoami: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      if (!upstream) {
        callback(null, text(name));
        return;
      }
      void call(upstream, "Whoami", new grpc.Metadata(), 4_000).then((result) =>
        result.error === undefined
          ? callback(null, text(name))
          : callback({
              code: grpc.status.UNAVAILABLE,
              details: `${name} could not reach ${upstreamTarget}: ${result.answer} ${result.error}`,
            }),
      );
    },
    Caller: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      const peer = spiffeIdOfPeer(call.getAuthContext()?.sslPeerCertificate);
      callback(null, text(peer ? formatSpiffeId(peer) : "plaintext"));
    },
  });
  // The callback runs once the server serves: after push sent its inbound listener.
  server.bindAsync(
    address,
    new xds.XdsServerCredentials(grpc.ServerCredentials.createInsecure()),
    (error) => {
      if (error) {
        console.error(`mesh-workload: cannot bind ${address}: ${error.message}`);
        process.exit(1);
      }
      console.log(JSON.stringify({ serving: true }));
      // Opens the upstream channel's xDS watch now rather than on the first call.
      upstream?.getChannel().getConnectivityState(true);
    },
  );
  // Registered after bindAsync, which creates the port's entry; later changes (a listener push refuses) show here.
  server.addServingStateListener(address, (status) =>
    console.log(JSON.stringify({ serving: status.code === grpc.status.OK, details: status.details })),
  );
  process.on("SIGTERM", () => {
    upstream?.close();
    server.forceShutdown();
    process.exit(0);
  });
}

interface CallResult {
  answer: string;
  error?: string;
}

function call(
  client: grpc.Client,
  method: "Whoami" | "Caller",
  metadata: grpc.Metadata,
  deadlineMs = 5_000,
): Promise<CallResult> {
  return new Promise((resolve) => {
    const invoke = (client as unknown as Record<string, (...args: unknown[]) => void>)[method];
    invoke?.call(
      client,
      Buffer.alloc(0),
      metadata,
      { deadline: Date.now() + deadlineMs },
      (error: grpc.ServiceError | null, response: Buffer) =>
        resolve(
          error
            ? { answer: `error:${grpc.status[error.code] ?? error.code}`, error: error.details }
            : { answer: response.toString("utf8") },
        ),
    );
  });
}

/** Makes calls on request of the test or demo driving it; one channel per target, kept. */
function runClient(): void {
  const port = Number(required("CONTROL_PORT"));
  const detailsTarget = process.env.DETAILS_TARGET;
  const clients = new Map<string, grpc.Client>();
  const clientFor = (target: string) => {
    let client = clients.get(target);
    if (!client) {
      client = new ReviewsClient(target, new xds.XdsChannelCredentials(grpc.credentials.createInsecure()));
      clients.set(target, client);
    }
    return client;
  };
  const server = createServer(async (request, response) => {
    const url = new URL(request.url ?? "/", "http://localhost");
    const target = url.searchParams.get("target");
    if (!target) {
      response.writeHead(400).end("target is required");
      return;
    }
    const metadata = new grpc.Metadata();
    for (const header of url.searchParams.getAll("header")) {
      const [key, ...value] = header.split(":");
      if (key) metadata.set(key, value.join(":"));
    }
    const client = clientFor(target);
    const details = detailsTarget ? clientFor(detailsTarget) : undefined;
    let body: unknown;
    if (url.pathname === "/caller") {
      body = await call(client, "Caller", metadata);
    } else if (url.pathname === "/tally") {
      const calls = Number(url.searchParams.get("calls") ?? "20");
      const counts: Record<string, number> = {};
      const errors = new Set<string>();
      for (let i = 0; i < calls; i++) {
        // Bookinfo's productpage calls details, then reviews: a failed details call counts as that call's answer.
        const detailsResult = details ? await call(details, "Whoami", new grpc.Metadata()) : undefined;
        const result =
          detailsResult?.error !== undefined
            ? { answer: detailsResult.answer, error: `details: ${detailsResult.error}` }
            : await call(client, "Whoami", metadata);
        counts[result.answer] = (counts[result.answer] ?? 0) + 1;
        if (result.error) errors.add(`${result.answer}: ${result.error}`);
      }
      body = { counts, errors: [...errors] };
    } else {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  server.listen(port, "127.0.0.1", () => console.log(JSON.stringify({ control: port })));
  process.on("SIGTERM", () => {
    for (const client of clients.values()) client.close();
    server.close();
    process.exit(0);
  });
}

xds.register();
if (process.env.WORKLOAD_ROLE === "server") runServer();
else if (process.env.WORKLOAD_ROLE === "client") runClient();
else {
  console.error("mesh-workload: WORKLOAD_ROLE must be server or client");
  process.exit(2);
}
