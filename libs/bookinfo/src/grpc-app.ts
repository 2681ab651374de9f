import * as grpc from "@grpc/grpc-js";

/**
 * A tiny gRPC service for the end-to-end tests, in the spirit of Bookinfo's
 * reviews: `Whoami` answers with the backend's name, so tests can count
 * which version served each call. Messages are raw UTF-8 bytes: no proto.
 */
const identity = (buffer: Buffer) => buffer;
const text = (value: string) => Buffer.from(value, "utf8");

const rawUnary = (path: string) => ({
  path,
  requestStream: false,
  responseStream: false,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
});

/**
 * The service definition, shared by backends and clients. `Caller` answers
 * with the SPIFFE identity the server saw on the connection ("plaintext"
 * without mTLS); only mesh workloads (mesh-workload.ts) implement it.
 */
export const ReviewsService: grpc.ServiceDefinition = {
  Whoami: rawUnary("/bookinfo.Reviews/Whoami"),
  Caller: rawUnary("/bookinfo.Reviews/Caller"),
};

/** A running backend. */
export interface Backend {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  readonly calls: number;
  close(): void;
}

/**
 * Starts a backend that answers its name, on a port the OS picks. Each
 * backend can have a loopback address of its own (all of 127.0.0.0/8 is
 * local on Linux), as each VM of a mesh has its own IP.
 */
export async function startBackend(name: string, address = "127.0.0.1"): Promise<Backend> {
  const server = new grpc.Server();
  let calls = 0;
  server.addService(ReviewsService, {
    Whoami: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
      calls++;
      callback(null, text(name));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${address}:0`, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return {
    name,
    address,
    port,
    get calls() {
      return calls;
    },
    close: () => server.forceShutdown(),
  };
}

/** A generic client constructor for ReviewsService. */
export const ReviewsClient = grpc.makeGenericClientConstructor(ReviewsService, "Reviews");

/** One Whoami call: the backend's name, or the error's status code as "error:<code>". */
export function whoami(
  client: grpc.Client,
  metadata = new grpc.Metadata(),
  deadlineMs = 5_000,
  method: "Whoami" | "Caller" = "Whoami",
): Promise<string> {
  return new Promise((resolve) => {
    const call = (client as unknown as Record<string, (...args: unknown[]) => void>)[method]?.bind(client);
    if (!call) throw new Error(`ReviewsClient has no method ${method}`);
    call(
      Buffer.alloc(0),
      metadata,
      { deadline: Date.now() + deadlineMs },
      (error: grpc.ServiceError | null, response: Buffer) =>
        resolve(error ? `error:${error.code}` : response.toString("utf8")),
    );
  });
}

/** Makes `count` calls, `parallel` at a time, and counts the answers. */
export async function tally(
  client: grpc.Client,
  count: number,
  metadata?: grpc.Metadata,
  parallel = 20,
): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  let started = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (started < count) {
        started++;
        const answer = await whoami(client, metadata);
        counts.set(answer, (counts.get(answer) ?? 0) + 1);
      }
    }),
  );
  return counts;
}

/** The host the reviews backends serve, as Bookinfo names it in Kubernetes. */
export const REVIEWS_HOST = "reviews.default.svc.cluster.local";

/** A workload serving a gRPC service's port 9080 on port at address, as one version of the service's app. */
export interface GrpcWorkloadEntry {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  readonly version: string;
  readonly serviceAccount: string;
}

/**
 * How gRPC workloads join a mesh without Kubernetes, as Bookinfo's VMs
 * would: a ServiceEntry for host (gRPC on 9080, VIP vip) selecting the app
 * host names (its first label), and one WorkloadEntry per workload, labelled
 * with that app and its version, mapping port 9080 to its own. YAML for ingest.
 */
export function grpcRegistrationYaml(
  host: string,
  vip: string,
  entries: readonly GrpcWorkloadEntry[],
): string {
  const app = host.split(".")[0];
  const serviceEntry = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${app}, namespace: default}
spec:
  hosts: [${host}]
  addresses: [${vip}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: grpc, protocol: GRPC}]
  workloadSelector:
    labels: {app: ${app}}
`;
  const workloadEntries = entries.map(
    (entry) => `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ${entry.name}, namespace: default}
spec:
  address: ${entry.address}
  ports: {grpc: ${entry.port}}
  labels: {app: ${app}, version: ${entry.version}}
  serviceAccount: ${entry.serviceAccount}
`,
  );
  return [serviceEntry, ...workloadEntries].join("---\n");
}

/** The reviews backends' registration (VIP 10.96.0.10, service account bookinfo-reviews). */
export function reviewsRegistrationYaml(backends: readonly Backend[]): string {
  return grpcRegistrationYaml(
    REVIEWS_HOST,
    "10.96.0.10",
    backends.map((backend) => ({
      name: backend.name,
      address: backend.address,
      port: backend.port,
      version: backend.name.replace("reviews-", ""),
      serviceAccount: "bookinfo-reviews",
    })),
  );
}

/** Starts reviews v1, v2 and v3, each on a loopback address of its own (127.0.0.11-13), as VMs have their own IPs. */
export async function startReviewsBackends(): Promise<Backend[]> {
  const backends: Backend[] = [];
  for (const [index, version] of ["v1", "v2", "v3"].entries()) {
    backends.push(await startBackend(`reviews-${version}`, `127.0.0.${11 + index}`));
  }
  return backends;
}
