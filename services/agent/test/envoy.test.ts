// `agent proxy sidecar` as a process, as the injector starts it, against the
// real ca (with nats-server), a stand-in for push's mTLS port that answers
// only when the test lets it, the test double for Envoy (helpers/fake-envoy.mjs)
// and a real application: HTTP, TCP and gRPC servers and a metrics endpoint.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { createServer as createTcpServer, type Server as TcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  Server as GrpcServer,
  ServerCredentials,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type sendUnaryData,
  status,
} from "@grpc/grpc-js";
import {
  caTrustBundleSource,
  type IdentitySource,
  mtlsServerCredentials,
  WorkloadIdentity,
} from "@sextant/identity";
import {
  AggregatedDiscoveryServiceService,
  type DiscoveryRequest,
  DiscoveryResponse,
} from "@sextant/proto/envoy";
import {
  captureOutput,
  eventually,
  freePort,
  type GrpcServerFixture,
  type NatsServerFixture,
  type ServiceProcess,
  startGrpcServer,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { testLogger } from "./helpers/logger.js";

const AGENT_TOKEN = "agent-bootstrap-token-0123456789";
const PUSH_TOKEN = "push-bootstrap-token-0123456789";
const FAKE_ENVOY = join(import.meta.dirname, "helpers", "fake-envoy.mjs");
const AGENT_MAIN = join(import.meta.dirname, "..", "src", "main.ts");
/** The exit status the double exits with on SIGTERM, which the agent must pass on. */
const ENVOY_EXIT_CODE = 7;

interface Event {
  event: string;
  pid: number;
  argv?: string[];
  method?: string;
  url?: string;
}

function listen(server: Server | TcpServer): Promise<number> {
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
  );
}

/** A gRPC health server: `app` is SERVING, `broken` NOT_SERVING (wire form by hand, as the double's). */
async function startHealthServer(): Promise<{ port: number; server: GrpcServer }> {
  const server = new GrpcServer();
  server.addService(
    {
      check: {
        path: "/grpc.health.v1.Health/Check",
        requestStream: false,
        responseStream: false,
        requestSerialize: (value: Buffer) => value,
        requestDeserialize: (bytes: Buffer) => bytes,
        responseSerialize: (value: Buffer) => value,
        responseDeserialize: (bytes: Buffer) => bytes,
      },
    },
    {
      check: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
        // HealthCheckRequest { string service = 1 }: after the tag and a one-byte length.
        const service = call.request.length > 2 ? call.request.subarray(2).toString() : "";
        if (service === "app") callback(null, Buffer.from([0x08, 1]));
        else if (service === "broken") callback(null, Buffer.from([0x08, 2]));
        else callback({ code: status.NOT_FOUND, details: `unknown service ${service}` });
      },
    },
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  return { port, server };
}

describe("agent proxy sidecar, with the Envoy test double", () => {
  const work = mkdtempSync(join(tmpdir(), "sextant-agent-proxy-"));
  const envoyLog = join(work, "envoy.log");
  const bootstrapPath = join(work, "proxy", "envoy-rev.json");
  let nats: NatsServerFixture;
  let ca: ServiceProcess;
  let pushIdentity: WorkloadIdentity;
  let push: GrpcServerFixture;
  /** push's stand-in holds its answers until the test lets it answer. */
  let pushAnswers = false;
  const heldRequests: Array<() => void> = [];
  let app: Server;
  const appRequests: Array<{ path: string; headers: IncomingHttpHeaders; source: string | undefined }> = [];
  let appMetricsFail = false;
  let appPort: number;
  let tcp: TcpServer;
  let tcpPort: number;
  let closedPort: number;
  let health: { port: number; server: GrpcServer };
  let agent: ChildProcess;
  let output: () => string;
  let httpPort: number;
  let adminPort: number;
  const agentUrl = (path: string) => `http://127.0.0.1:${httpPort}${path}`;
  const events = (): Event[] =>
    existsSync(envoyLog)
      ? readFileSync(envoyLog, "utf8")
          .trim()
          .split("\n")
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Event)
      : [];

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
    const caAddress = `localhost:${caPort}`;
    ca = await startServiceProcess("ca", {
      NATS_URL: nats.url,
      GRPC_PORT: String(caPort),
      CA_CERTS_DIR: join(work, "cacerts"),
      BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
      CA_AUTHENTICATORS: "mesh-certificate,bootstrap-token",
    });
    const caRootPem = readFileSync(join(work, "cacerts", "root-cert.pem"), "utf8");
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
              call.on("data", (request: DiscoveryRequest) => {
                const answer = () =>
                  call.write(DiscoveryResponse.fromPartial({ typeUrl: request.typeUrl, nonce: "1" }));
                if (pushAnswers) answer();
                else heldRequests.push(answer);
              });
            },
            deltaAggregatedResources: () => {},
          },
        },
      ],
      mtlsServerCredentials(pushIdentity as IdentitySource, { requireClientCertificate: true }),
    );

    // The application: probes and metrics on one HTTP server, a TCP listener, a gRPC health server.
    app = createServer((request, response) => {
      appRequests.push({
        path: request.url ?? "",
        headers: request.headers,
        source: request.socket.remoteAddress,
      });
      if (request.url === "/healthy") response.writeHead(200).end("all good");
      else if (request.url === "/moved") response.writeHead(302, { location: "/healthy" }).end();
      // A redirect to another host is not followed: no request leaves for it.
      else if (request.url === "/away") response.writeHead(302, { location: "http://other.invalid/" }).end();
      else if (request.url === "/loop") response.writeHead(302, { location: "/loop" }).end();
      else if (request.url === "/metrics" && !appMetricsFail)
        response
          .writeHead(200, { "content-type": "text/plain; version=0.0.4" })
          .end("# TYPE app_orders_total counter\napp_orders_total 3\n");
      else response.writeHead(503).end("not yet");
    });
    appPort = await listen(app);
    tcp = createTcpServer((socket) => socket.end());
    tcpPort = await listen(tcp);
    closedPort = await freePort();
    health = await startHealthServer();

    writeFileSync(join(work, "istio-token"), `${AGENT_TOKEN}\n`);
    httpPort = await freePort();
    adminPort = await freePort();
    const probers = {
      "/app-health/web/readyz": {
        httpGet: { path: "/healthy", port: appPort, httpHeaders: [{ name: "X-Probe", value: "ready" }] },
        timeoutSeconds: 2,
      },
      "/app-health/web/livez": { httpGet: { path: "/failing", port: appPort }, timeoutSeconds: 2 },
      "/app-health/moved/livez": { httpGet: { path: "/moved", port: appPort }, timeoutSeconds: 2 },
      "/app-health/away/livez": { httpGet: { path: "/away", port: appPort }, timeoutSeconds: 2 },
      "/app-health/loop/livez": { httpGet: { path: "/loop", port: appPort }, timeoutSeconds: 2 },
      "/app-health/tcp/readyz": { tcpSocket: { port: tcpPort }, timeoutSeconds: 2 },
      "/app-health/tcp/livez": { tcpSocket: { port: closedPort }, timeoutSeconds: 2 },
      "/app-health/grpc/readyz": { grpc: { port: health.port, service: "app" }, timeoutSeconds: 2 },
      "/app-health/grpc/livez": { grpc: { port: health.port, service: "broken" }, timeoutSeconds: 2 },
    };
    agent = spawn(
      process.execPath,
      [
        "--conditions=@sextant/source",
        "--import",
        "tsx",
        AGENT_MAIN,
        // The args the injector writes (services/webhook's template, as Istio's).
        "proxy",
        "sidecar",
        "--domain",
        "shop.svc.cluster.local",
        "--proxyLogLevel=warning",
        "--proxyComponentLogLevel=misc:error",
        "--log_output_level=default:info",
      ],
      {
        env: {
          ...process.env,
          OTEL_SDK_DISABLED: "true",
          HTTP_PORT: String(httpPort),
          CA_ADDR: caAddress,
          CA_ROOT_CERT: join(work, "cacerts", "root-cert.pem"),
          TOKEN_FILE: join(work, "istio-token"),
          XDS_ADDR: `localhost:${push.port}`,
          POD_NAME: "web-0",
          POD_NAMESPACE: "shop",
          SERVICE_ACCOUNT: "web",
          INSTANCE_IP: "127.0.0.1",
          SDS_SOCKET: join(work, "sds", "socket"),
          XDS_SOCKET: join(work, "proxy", "XDS"),
          XDS_PROXY_PORT: "0",
          OUTPUT_CERTS: "",
          ENVOY_BINARY: FAKE_ENVOY,
          ENVOY_BOOTSTRAP_FILE: bootstrapPath,
          // PROXY_CONFIG's terminationDrainDuration wins over Istio's variable. It is longer than the
          // runtime's usual 10 s stop deadline, which `agent proxy` must extend to pass Envoy's status on.
          // Its concurrency (a ProxyConfig's, merged by the injector) is Envoy's --concurrency.
          PROXY_CONFIG: JSON.stringify({
            terminationDrainDuration: "11s",
            proxyAdminPort: adminPort,
            concurrency: 3,
          }),
          TERMINATION_DRAIN_DURATION_SECONDS: "60",
          ISTIO_KUBE_APP_PROBERS: JSON.stringify(probers),
          ISTIO_PROMETHEUS_ANNOTATIONS: JSON.stringify({
            scrape: "true",
            path: "/metrics",
            port: String(appPort),
          }),
          FAKE_ENVOY_LOG: envoyLog,
          FAKE_ENVOY_EXIT_CODE: String(ENVOY_EXIT_CODE),
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    output = captureOutput(agent);
    await eventually(async () => (await fetch(agentUrl("/ready")).catch(() => undefined))?.ok, {
      message: "the agent did not start",
      timeoutMs: 30_000,
    }).catch((error) => {
      throw new Error(`${error.message}\n${output()}`);
    });
  });

  after(async () => {
    if (agent && agent.exitCode === null && agent.signalCode === null) agent.kill("SIGKILL");
    await push?.close();
    await pushIdentity?.close();
    await ca?.stop();
    await nats?.dispose();
    app?.close();
    tcp?.close();
    health?.server.forceShutdown();
  });

  test("starts Envoy with the bootstrap it wrote and istio-agent's arguments", async () => {
    const start = await eventually(() => events().find((event) => event.event === "start"), {
      message: "Envoy did not start",
    });
    assert.deepEqual(start?.argv, [
      "-c",
      bootstrapPath,
      "--drain-time-s",
      "45",
      "--drain-strategy",
      "immediate",
      "--local-address-ip-version",
      "v4",
      "--file-flush-interval-msec",
      "1000",
      "--disable-hot-restart",
      "--allow-unknown-static-fields",
      "-l",
      "warning",
      "--component-log-level",
      "misc:error",
      "--concurrency",
      "3",
    ]);
    const bootstrap = JSON.parse(readFileSync(bootstrapPath, "utf8"));
    assert.equal(bootstrap.node.id, "sidecar~127.0.0.1~web-0.shop~shop.svc.cluster.local");
    assert.deepEqual(bootstrap.admin.address.socket_address, { address: "127.0.0.1", port_value: adminPort });
  });

  test("/healthz/ready waits for Envoy's first config from push, then answers 200", async () => {
    // Envoy's ADS request has reached push, which holds its answer: Envoy is up but has no config.
    await eventually(() => heldRequests.length > 0, { message: "Envoy's ADS request did not reach push" });
    const before = await fetch(agentUrl("/healthz/ready"));
    assert.equal(before.status, 503);
    assert.deepEqual(((await before.json()) as { pending: string[] }).pending, ["envoy"]);
    assert.equal(
      (await fetch(agentUrl("/ready"))).status,
      200,
      "the agent's own readiness does not wait for Envoy",
    );

    pushAnswers = true;
    for (const answer of heldRequests.splice(0)) answer();
    const ready = await eventually(
      async () => {
        const response = await fetch(agentUrl("/healthz/ready"));
        return response.status === 200 ? response.json() : undefined;
      },
      { message: "never ready after push answered" },
    );
    assert.deepEqual(ready, { ready: true, pending: [] });
  });

  test("/stats/prometheus merges the agent's, Envoy's and the application's metrics, in that order", async () => {
    const response = await fetch(agentUrl("/stats/prometheus?usedonly"));
    assert.equal(response.status, 200);
    assert.equal(response.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    const text = await response.text();
    const agentAt = text.indexOf("istio_agent_scrapes_total");
    const envoyAt = text.indexOf("envoy_server_live 1");
    const appAt = text.indexOf("app_orders_total 3");
    assert.ok(agentAt >= 0 && envoyAt > agentAt && appAt > envoyAt, text);
    assert.match(text, /envoy_fake_scrape\{query="\?usedonly"\} 1/, "the scrape's query reaches Envoy");
  });

  test("/stats/prometheus still serves the agent's and Envoy's metrics when the application's fail", async () => {
    appMetricsFail = true;
    try {
      const text = await (await fetch(agentUrl("/stats/prometheus"))).text();
      assert.match(text, /envoy_server_live 1/);
      assert.doesNotMatch(text, /app_orders_total/);
      assert.match(text, /istio_agent_scrape_failures_total\{type="application"[^}]*\} 1/);
    } finally {
      appMetricsFail = false;
    }
  });

  test("performs the rewritten HTTP, TCP and gRPC probes against the application", async () => {
    const probe = async (path: string) => {
      const response = await fetch(agentUrl(path), { headers: { "User-Agent": "kube-probe/1.31" } });
      return { status: response.status, body: await response.text() };
    };
    assert.deepEqual(await probe("/app-health/web/readyz"), { status: 200, body: "all good" });
    assert.deepEqual(await probe("/app-health/web/livez"), { status: 503, body: "not yet" });
    assert.deepEqual(await probe("/app-health/moved/livez"), { status: 200, body: "all good" }, "followed");
    assert.equal((await probe("/app-health/away/livez")).status, 200, "a redirect elsewhere is a success");
    const loops = appRequests.length;
    assert.equal((await probe("/app-health/loop/livez")).status, 500, "kubelet gives up after 10 redirects");
    assert.equal(appRequests.length - loops, 11);
    assert.equal((await probe("/app-health/tcp/readyz")).status, 200);
    assert.equal((await probe("/app-health/tcp/livez")).status, 500);
    assert.equal((await probe("/app-health/grpc/readyz")).status, 200);
    assert.equal((await probe("/app-health/grpc/livez")).status, 500);
    assert.equal((await probe("/app-health/other/readyz")).status, 400);

    const seen = appRequests.find((request) => request.path === "/healthy");
    assert.equal(seen?.headers["x-probe"], "ready");
    assert.equal(seen?.headers["user-agent"], "kube-probe/1.31");
    assert.equal(seen?.headers.host, `127.0.0.1:${appPort}`, "the status port in Host becomes the app's");
    assert.equal(
      seen?.source,
      "127.0.0.6",
      "Istio's probe source address, which its iptables rules let through",
    );
  });

  test("restarts Envoy after it is killed", async () => {
    const first = events().find((event) => event.event === "start")!;
    process.kill(first.pid, "SIGKILL");
    const second = await eventually(
      () => events().find((event) => event.event === "start" && event.pid !== first.pid),
      { message: "Envoy was not restarted", timeoutMs: 20_000 },
    );
    assert.deepEqual(second.argv, first.argv);
    await eventually(async () => (await fetch(agentUrl("/healthz/ready"))).status === 200, {
      message: "the restarted Envoy never became ready",
    });
  });

  test("`agent request POST drain` (the native sidecar's preStop) starts Envoy's drain and leaves it running", async () => {
    assert.equal((await fetch(agentUrl("/drain"))).status, 405, "POST only");
    const request = spawn(
      process.execPath,
      [
        "--conditions=@sextant/source",
        "--import",
        "tsx",
        AGENT_MAIN,
        "request",
        `--debug-port=${httpPort}`,
        "POST",
        "drain",
      ],
      { env: { ...process.env, HTTP_PORT: String(httpPort) }, stdio: ["ignore", "pipe", "pipe"] },
    );
    const requestOutput = captureOutput(request);
    const code = await new Promise<number | null>((resolve) => request.once("exit", resolve));
    assert.equal(code, 0, requestOutput());
    assert.equal(requestOutput(), "OK\n");
    await eventually(
      () => events().some((event) => event.url === "/drain_listeners?inboundonly&graceful&skip_exit"),
      { message: "Envoy was not asked to drain" },
    );
    assert.equal(agent.exitCode, null, "the agent keeps running");
  });

  test("on SIGTERM drains Envoy's inbound listeners, waits, stops Envoy and exits with its status", async () => {
    const envoyPid = events()
      .filter((event) => event.event === "start")
      .at(-1)!.pid;
    const exited = new Promise<number | null>((resolve) => agent.once("exit", resolve));
    agent.kill("SIGTERM");
    assert.equal(await exited, ENVOY_EXIT_CODE, output());
    const steps = events()
      .filter((event) => event.pid === envoyPid && !(event.event === "request" && event.method === "GET"))
      .map((event) => (event.event === "request" ? `${event.method} ${event.url}` : event.event));
    assert.deepEqual(steps, [
      "start",
      "xds-response",
      "POST /drain_listeners?inboundonly&graceful&skip_exit",
      "POST /drain_listeners?inboundonly&graceful",
      "signal",
      "exit",
    ]);
    // The drain lasted PROXY_CONFIG's terminationDrainDuration, not TERMINATION_DRAIN_DURATION_SECONDS.
    assert.match(output(), /"drainMs":11000[^\n]*Envoy is draining/);
    assert.equal(existsSync(join(work, "proxy", "XDS")), false, "the agent's other runners closed too");
  });
});
