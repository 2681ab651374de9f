// The agent as a process, against the real ca service (as a process, with a
// real nats-server) and a stand-in for push's mTLS port that is a plain
// grpc-js ADS server with push's own mesh identity from the same CA.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { credentials, type ServerDuplexStream, type ServiceError } from "@grpc/grpc-js";
import { validateBootstrapConfig } from "@grpc/grpc-js-xds/build/src/xds-bootstrap.js";
import {
  callerSpiffeId,
  caTrustBundleSource,
  formatSpiffeId,
  type IdentitySource,
  mtlsServerCredentials,
  WorkloadIdentity,
} from "@sextant/identity";
import { unpackAny } from "@sextant/proto";
import {
  AggregatedDiscoveryServiceClient,
  AggregatedDiscoveryServiceService,
  DiscoveryRequest,
  DiscoveryResponse,
  Secret,
  SecretDiscoveryServiceClient,
  TypeUrl,
} from "@sextant/proto/envoy";
import {
  eventually,
  freePort,
  type GrpcServerFixture,
  type NatsServerFixture,
  type ServiceProcess,
  startGrpcServer,
  startNatsServer,
  startServiceProcess,
  trackChildProcess,
} from "@sextant/testing";
import { publicKeys } from "./helpers/certs.js";
import { testLogger } from "./helpers/logger.js";

const AGENT_TOKEN = "agent-bootstrap-token-0123456789";
const PUSH_TOKEN = "push-bootstrap-token-0123456789";

describe("agent run, against ca and a push over mTLS", () => {
  const work = mkdtempSync(join(tmpdir(), "sextant-agent-e2e-"));
  const paths = {
    sds: join(work, "sds", "socket"),
    xds: join(work, "proxy", "XDS"),
    certs: join(work, "certs"),
    grpcBootstrap: join(work, "grpc-bootstrap.json"),
    token: join(work, "istio-token"),
  };
  let nats: NatsServerFixture;
  let ca: ServiceProcess;
  let caAddress: string;
  let caRootPem: string;
  let pushIdentity: WorkloadIdentity;
  let push: GrpcServerFixture;
  const pushCallers: string[] = [];
  let agent: ServiceProcess;
  let xdsProxyPort: number;

  before(async () => {
    nats = await startNatsServer();
    writeFileSync(
      join(work, "tokens.json"),
      JSON.stringify({
        [AGENT_TOKEN]: { namespace: "shop", serviceAccount: "web" },
        [PUSH_TOKEN]: { namespace: "istio-system", serviceAccount: "sextant-push" },
      }),
    );
    const caPort = await freePort();
    caAddress = `localhost:${caPort}`;
    ca = await startServiceProcess("ca", {
      NATS_URL: nats.url,
      GRPC_PORT: String(caPort),
      CA_CERTS_DIR: join(work, "cacerts"),
      BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
      CA_AUTHENTICATORS: "mesh-certificate,bootstrap-token",
    });
    caRootPem = readFileSync(join(work, "cacerts", "root-cert.pem"), "utf8");

    // push's side: its own certificate from the same CA, and an ADS server
    // that answers each request and records who called.
    pushIdentity = new WorkloadIdentity({
      caAddress,
      caRootPem,
      trustDomain: "cluster.local",
      namespace: "istio-system",
      serviceAccount: "sextant-push",
      token: async () => PUSH_TOKEN,
      ttlSeconds: 3600,
      trust: caTrustBundleSource({ caAddress, caRootPem, logger: testLogger }),
      logger: testLogger,
    });
    await pushIdentity.start();
    push = await startGrpcServer(
      [
        {
          definition: AggregatedDiscoveryServiceService,
          implementation: {
            streamAggregatedResources: (call: ServerDuplexStream<DiscoveryRequest, DiscoveryResponse>) => {
              const caller = callerSpiffeId(call);
              pushCallers.push(caller ? formatSpiffeId(caller) : "(none)");
              call.on("data", (request: DiscoveryRequest) =>
                call.write(
                  DiscoveryResponse.fromPartial({
                    typeUrl: request.typeUrl,
                    nonce: `for ${request.node?.id}`,
                  }),
                ),
              );
            },
            deltaAggregatedResources: () => {},
          },
        },
      ],
      mtlsServerCredentials(pushIdentity as IdentitySource, { requireClientCertificate: true }),
    );

    writeFileSync(paths.token, `${AGENT_TOKEN}\n`);
    xdsProxyPort = await freePort();
    agent = await startServiceProcess("agent", {
      CA_ADDR: caAddress,
      CA_ROOT_CERT: join(work, "cacerts", "root-cert.pem"),
      TOKEN_FILE: paths.token,
      XDS_ADDR: `localhost:${push.port}`,
      POD_NAME: "web-0",
      POD_NAMESPACE: "shop",
      SERVICE_ACCOUNT: "web",
      INSTANCE_IP: "127.0.0.1",
      ISTIO_METAJSON_LABELS: '{"app":"web"}',
      SECRET_TTL: "1h",
      SDS_SOCKET: paths.sds,
      XDS_SOCKET: paths.xds,
      XDS_PROXY_PORT: String(xdsProxyPort),
      OUTPUT_CERTS: paths.certs,
      GRPC_XDS_BOOTSTRAP: paths.grpcBootstrap,
    });
  });

  after(async () => {
    await agent?.stop();
    await push?.close();
    await pushIdentity?.close();
    await ca?.stop();
    await nats?.dispose();
  });

  test("is ready once it has its certificate, also on Istio's /healthz/ready", async () => {
    const response = await fetch(`http://127.0.0.1:${agent.httpPort}/healthz/ready`);
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), { ready: true, pending: [] });
  });

  test("serves the workload certificate from ca over SDS", async () => {
    const client = new SecretDiscoveryServiceClient(`unix://${paths.sds}`, credentials.createInsecure());
    const response = await new Promise<DiscoveryResponse>((resolve, reject) =>
      client.fetchSecrets(
        DiscoveryRequest.fromPartial({ resourceNames: ["default", "ROOTCA"], typeUrl: TypeUrl.Secret }),
        (error, answer) => (error ? reject(error) : resolve(answer)),
      ),
    );
    client.close();
    const [workload, roots] = response.resources.map((any) => unpackAny(any, TypeUrl.Secret, Secret));
    const chain = workload?.tlsCertificate?.certificateChain?.inlineBytes?.toString() ?? "";
    assert.equal(new X509Certificate(chain).subjectAltName, "URI:spiffe://cluster.local/ns/shop/sa/web");
    assert.equal(roots?.validationContext?.trustedCa?.inlineBytes?.toString().trim(), caRootPem.trim());
  });

  test("keeps the certificate files and the gRPC bootstrap for proxyless apps", () => {
    const chain = readFileSync(join(paths.certs, "cert-chain.pem"), "utf8");
    const keys = publicKeys(chain, readFileSync(join(paths.certs, "key.pem"), "utf8"));
    assert.equal(keys.ofCert, keys.ofKey);
    assert.equal(statSync(join(paths.certs, "key.pem")).mode & 0o777, 0o600);
    assert.equal(readFileSync(join(paths.certs, "root-cert.pem"), "utf8").trim(), caRootPem.trim());
    const info = validateBootstrapConfig(JSON.parse(readFileSync(paths.grpcBootstrap, "utf8")));
    assert.equal(info.xdsServers[0]?.server_uri, `127.0.0.1:${xdsProxyPort}`);
    assert.equal(info.node.id, "sidecar~127.0.0.1~web-0.shop~shop.svc.cluster.local");
  });

  test("relays ADS to push over mTLS with the workload's identity, on the socket and the TCP port", async () => {
    for (const target of [`unix://${paths.xds}`, `127.0.0.1:${xdsProxyPort}`]) {
      const client = new AggregatedDiscoveryServiceClient(target, credentials.createInsecure());
      const call = client.streamAggregatedResources();
      const received: DiscoveryResponse[] = [];
      let failed: ServiceError | undefined;
      call.on("data", (response: DiscoveryResponse) => received.push(response));
      call.on("error", (error: ServiceError) => {
        failed = error;
      });
      call.write(
        DiscoveryRequest.fromPartial({
          node: { id: "sidecar~127.0.0.1~web-0.shop~shop.svc.cluster.local" },
          typeUrl: TypeUrl.Cluster,
        }),
      );
      await eventually(() => received.length > 0 || failed, { message: `no answer through ${target}` });
      assert.equal(failed, undefined, failed?.details);
      assert.equal(received[0]?.nonce, "for sidecar~127.0.0.1~web-0.shop~shop.svc.cluster.local");
      call.cancel();
      client.close();
    }
    assert.deepEqual(pushCallers, [
      "spiffe://cluster.local/ns/shop/sa/web",
      "spiffe://cluster.local/ns/shop/sa/web",
    ]);
  });

  test("stops cleanly on SIGTERM and removes its sockets", async () => {
    assert.equal(await agent.stop(), 0, agent.output());
    assert.equal(existsSync(paths.sds), false);
    assert.equal(existsSync(paths.xds), false);
  });
});

describe("agent run, while ca cannot be reached", () => {
  test("is not ready, and says it waits for the identity", async () => {
    const work = mkdtempSync(join(tmpdir(), "sextant-agent-noca-"));
    writeFileSync(join(work, "root-cert.pem"), "not used before a connection");
    const httpPort = await freePort();
    const child = spawn(
      process.execPath,
      ["--conditions=@sextant/source", "--import", "tsx", join(import.meta.dirname, "..", "src", "main.ts")],
      {
        env: {
          ...process.env,
          OTEL_SDK_DISABLED: "true",
          LOG_LEVEL: "error",
          HTTP_PORT: String(httpPort),
          CA_ADDR: `127.0.0.1:${await freePort()}`,
          CA_ROOT_CERT: join(work, "root-cert.pem"),
          TOKEN_FILE: join(work, "token"),
          SDS_SOCKET: join(work, "sds"),
          XDS_SOCKET: join(work, "XDS"),
          XDS_PROXY_PORT: "0",
          OUTPUT_CERTS: "",
          INSTANCE_IP: "127.0.0.1",
        },
        stdio: ["ignore", "ignore", "pipe"],
      },
    );
    trackChildProcess(child);
    let stderr = "";
    child.stderr?.on("data", (chunk) => {
      stderr += chunk;
    });
    const output = () => stderr;
    try {
      for (const path of ["/ready", "/healthz/ready"]) {
        const answer = await eventually(
          async () => {
            const response = await fetch(`http://127.0.0.1:${httpPort}${path}`);
            return { status: response.status, body: (await response.json()) as { pending: string[] } };
          },
          { message: `${path} did not answer`, timeoutMs: 30_000 },
        );
        // A 200 here once came from another process on the port freePort gave (CI, 2026-12-01):
        // say whose answer it was, so a repeat is diagnosable.
        assert.equal(
          answer.status,
          503,
          `${path} answered ${answer.status} ${JSON.stringify(answer.body)}; the agent ${
            child.exitCode === null && child.signalCode === null
              ? "is running"
              : `exited (${child.exitCode ?? child.signalCode})`
          }; its stderr: ${output()}`,
        );
        assert.ok(answer.body.pending.includes("identity"), JSON.stringify(answer.body));
      }
      // SIGTERM gives up the wait for ca: the agent exits, saying it did not start.
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      assert.equal(await exited, 1);
      // Whichever wait ends first (the certificate's or the trust bundle's) names itself.
      assert.match(output(), /agent: failed to start: .*closed before/);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  });
});
