import assert from "node:assert/strict";
import { createServer } from "node:http";
import { describe, test } from "node:test";
import { parseSettings } from "@sextant/runtime";
import { parseCommand, UsageError } from "../src/cli.js";
import { envoyArgs } from "../src/envoy/envoy-args.js";
import { agentLogLevel, envoyLogArgs, parseProxyCommand } from "../src/envoy/proxy-command.js";
import { terminationDrainMs, workerThreads } from "../src/envoy/proxy-config.js";
import { appMetricsSource } from "../src/envoy/proxy-service.js";
import { runRequestCommand } from "../src/envoy/request-command.js";
import { agentSettings } from "../src/settings.js";

/** The args the injector gives the proxy container (services/webhook's template, as Istio's). */
const INJECTED = [
  "proxy",
  "sidecar",
  "--domain",
  "shop.svc.cluster.local",
  "--proxyLogLevel=warning",
  "--proxyComponentLogLevel=misc:error",
  "--log_output_level=default:info",
];

describe("agent proxy's command line", () => {
  test("reads the injected args as Istio's pilot-agent does", () => {
    const command = parseCommand(INJECTED);
    assert.equal(command.command, "proxy");
    assert.deepEqual(command.command === "proxy" && command.proxy, {
      type: "sidecar",
      domain: "shop.svc.cluster.local",
      proxyLogLevel: "warning",
      proxyComponentLogLevel: "misc:error",
      concurrency: 0,
      logOutputLevel: "default:info",
      ignored: [],
    });
  });

  test("takes router, --flag value and --flag=value, and Istio's defaults", () => {
    const args = parseProxyCommand(["router", "--concurrency", "4", "--serviceCluster=istio-proxy"]);
    assert.equal(args.type, "router");
    assert.equal(args.concurrency, 4);
    assert.equal(args.proxyLogLevel, "warning,misc:error");
    assert.deepEqual(args.ignored, ["--serviceCluster"]);
    assert.equal(parseProxyCommand([]).type, "sidecar");
  });

  test("tolerates unknown flags, with or without a value, as Istio does", () => {
    const args = parseProxyCommand(["--someFutureFlag", "value", "sidecar", "--other=1", "--profiling"]);
    assert.equal(args.type, "sidecar");
    assert.deepEqual(args.ignored, ["--someFutureFlag", "--other", "--profiling"]);
  });

  test("refuses what it cannot honour", () => {
    for (const [argv, message] of [
      [["proxy", "waypoint"], /unknown proxy type "waypoint"/],
      [["proxy", "--concurrency", "many"], /--concurrency takes a number/],
      [["proxy", "--stsPort", "15463"], /no Security Token Service/],
      [["proxy", "--templateFile", "/t.yaml"], /--templateFile is not supported/],
      [["proxy", "sidecar", "extra"], /unexpected argument "extra"/],
    ] as const)
      assert.throws(
        () => parseCommand([...argv]),
        (error: Error) => error instanceof UsageError && message.test(error.message),
      );
  });

  test("splits Envoy's log level from its component levels, as Istio", () => {
    assert.deepEqual(envoyLogArgs({ proxyLogLevel: "warning", proxyComponentLogLevel: "misc:error" }), [
      "-l",
      "warning",
      "--component-log-level",
      "misc:error",
    ]);
    // Component levels in --proxyLogLevel win over --proxyComponentLogLevel.
    assert.deepEqual(
      envoyLogArgs({
        proxyLogLevel: "info,misc:error,upstream:debug",
        proxyComponentLogLevel: "misc:warning",
      }),
      ["-l", "info", "--component-log-level", "misc:error,upstream:debug"],
    );
  });

  test("gives the agent the default scope's level of --log_output_level", () => {
    assert.equal(agentLogLevel("default:info"), "info");
    assert.equal(agentLogLevel("ads:debug,default:warn"), "warn");
    assert.equal(agentLogLevel("default:none"), "silent");
    assert.equal(agentLogLevel("ads:debug"), undefined);
  });
});

describe("Envoy's command line", () => {
  const inputs = {
    bootstrapPath: "/etc/istio/proxy/envoy-rev.json",
    instanceIp: "10.1.2.3",
    proxy: { proxyLogLevel: "warning", proxyComponentLogLevel: "misc:error" },
    drainDurationSeconds: 45,
    concurrency: 2,
  };

  test("is istio-agent's", () => {
    assert.deepEqual(envoyArgs(inputs), [
      "-c",
      "/etc/istio/proxy/envoy-rev.json",
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
      "2",
    ]);
  });

  test("IPv6 pods get v6; no worker count leaves it to Envoy", () => {
    const args = envoyArgs({ ...inputs, instanceIp: "fd00::7", concurrency: undefined });
    assert.equal(args[args.indexOf("--local-address-ip-version") + 1], "v6");
    assert.equal(args.includes("--concurrency"), false);
  });
});

describe("PROXY_CONFIG for Envoy", () => {
  const settings = (env: Record<string, string>) =>
    parseSettings(agentSettings, { INSTANCE_IP: "10.1.2.3", ...env });

  test("worker threads as pilot-agent decides them", () => {
    const decide = (flag: number, env: Record<string, string>, sidecar: boolean) =>
      workerThreads({ flag, configured: settings(env).PROXY_CONFIG.concurrency, sidecar });
    assert.equal(decide(0, {}, true), 2, "a sidecar's default");
    assert.equal(decide(0, { PROXY_CONFIG: '{"concurrency":4}' }, true), 4, "PROXY_CONFIG's");
    assert.equal(decide(8, { PROXY_CONFIG: '{"concurrency":4}' }, true), 8, "--concurrency wins");
    assert.equal(decide(0, {}, false), undefined, "a router uses every core");
    assert.equal(decide(0, { ISTIO_CPU_LIMIT: "7" }, false), 7, "or its CPU limit's");
    assert.equal(
      decide(0, { PROXY_CONFIG: '{"concurrency":0}', ISTIO_CPU_LIMIT: "7" }, true),
      undefined,
      "an explicit 0 is every core, over the CPU limit and the sidecar default (Istio's)",
    );
  });

  test("terminationDrainDuration: PROXY_CONFIG's when it sets one, else TERMINATION_DRAIN_DURATION_SECONDS, else 5 s", () => {
    assert.equal(terminationDrainMs(settings({})), 5000);
    assert.equal(terminationDrainMs(settings({ TERMINATION_DRAIN_DURATION_SECONDS: "20" })), 20_000);
    assert.equal(
      terminationDrainMs(
        settings({
          TERMINATION_DRAIN_DURATION_SECONDS: "20",
          PROXY_CONFIG: '{"terminationDrainDuration":"12s"}',
        }),
      ),
      12_000,
    );
    assert.throws(
      () => settings({ TERMINATION_DRAIN_DURATION_SECONDS: "soon" }),
      /TERMINATION_DRAIN_DURATION_SECONDS/,
    );
  });
});

describe("agent proxy's settings", () => {
  const settings = (env: Record<string, string>) =>
    parseSettings(agentSettings, { INSTANCE_IP: "10.1.2.3", ...env });

  test("default to Istio's: Envoy in /usr/local/bin, a 5 s termination drain", () => {
    const defaults = settings({});
    assert.equal(defaults.ENVOY_BINARY, "/usr/local/bin/envoy");
    assert.equal(defaults.ENVOY_BOOTSTRAP_FILE, "./etc/istio/proxy/envoy-rev.json");
    assert.equal(defaults.TERMINATION_DRAIN_DURATION_SECONDS, 5);
    assert.equal(defaults.ISTIO_KUBE_APP_PROBERS.size, 0);
    assert.equal(defaults.ISTIO_PROMETHEUS_ANNOTATIONS, undefined);
  });

  test("read Istio's ISTIO_KUBE_APP_PROBERS and refuse a prober that cannot be performed", () => {
    const probers = settings({
      ISTIO_KUBE_APP_PROBERS: JSON.stringify({
        "/app-health/app/readyz": { httpGet: { path: "/ready", port: 8080 }, timeoutSeconds: 1 },
        "/app-health/app/livez": { tcpSocket: { port: 8080 } },
        "/app-health/app/startupz": { grpc: { port: 9090, service: "app" } },
      }),
    }).ISTIO_KUBE_APP_PROBERS;
    assert.deepEqual(probers.get("/app-health/app/readyz")?.httpGet, {
      path: "/ready",
      port: 8080,
      scheme: "HTTP",
      httpHeaders: [],
    });
    assert.equal(probers.get("/app-health/app/startupz")?.grpc?.service, "app");
    for (const [value, message] of [
      ["{", /ISTIO_KUBE_APP_PROBERS.*not JSON/],
      ['{"/healthz/app":{"tcpSocket":{"port":1}}}', /not a prober path/],
      ['{"/app-health/app/livez":{"httpGet":{"port":"http"}}}', /ISTIO_KUBE_APP_PROBERS/],
      ['{"/app-health/app/livez":{"tcpSocket":{"port":1},"grpc":{"port":2}}}', /exactly one of/],
    ] as const)
      assert.throws(() => settings({ ISTIO_KUBE_APP_PROBERS: value }), message);
  });

  test("merge the application's metrics for a sidecar only, as Istio", () => {
    const target = { port: 9102, path: "/metrics" };
    assert.deepEqual(appMetricsSource("sidecar", target, "127.0.0.1"), { ...target, host: "127.0.0.1" });
    assert.equal(appMetricsSource("router", target, "127.0.0.1"), undefined);
    assert.equal(appMetricsSource("sidecar", undefined, "127.0.0.1"), undefined);
  });

  test("read ISTIO_PROMETHEUS_ANNOTATIONS with Istio's defaults (/metrics, port 80; scrape false is off)", () => {
    assert.deepEqual(
      settings({ ISTIO_PROMETHEUS_ANNOTATIONS: '{"scrape":"true"}' }).ISTIO_PROMETHEUS_ANNOTATIONS,
      {
        port: 80,
        path: "/metrics",
      },
    );
    assert.deepEqual(
      settings({ ISTIO_PROMETHEUS_ANNOTATIONS: '{"scrape":"true","path":"/m","port":"9102"}' })
        .ISTIO_PROMETHEUS_ANNOTATIONS,
      { port: 9102, path: "/m" },
    );
    assert.equal(
      settings({ ISTIO_PROMETHEUS_ANNOTATIONS: '{"scrape":"false"}' }).ISTIO_PROMETHEUS_ANNOTATIONS,
      undefined,
    );
    assert.throws(() => settings({ ISTIO_PROMETHEUS_ANNOTATIONS: '{"port":"http"}' }), /not a port number/);
  });
});

describe("agent request", () => {
  test("sends a local request, prints the answer, and fails on an error status other than 404", async () => {
    const server = createServer((request, response) => {
      if (request.url === "/drain" && request.method === "POST") response.end("OK");
      else if (request.url === "/missing") response.writeHead(404).end("no such path");
      else response.writeHead(500).end("broken");
    });
    const port = await new Promise<number>((resolve) =>
      server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)),
    );
    const run = async (argv: string[], env: NodeJS.ProcessEnv = { HTTP_PORT: String(port) }) => {
      let stdout = "";
      let stderr = "";
      const code = await runRequestCommand(argv, {
        env: { INSTANCE_IP: "127.0.0.1", ...env },
        stdout: (text) => {
          stdout += text;
        },
        stderr: (text) => {
          stderr += text;
        },
      });
      return { code, stdout, stderr };
    };
    try {
      assert.deepEqual(await run([`--debug-port=${port}`, "POST", "drain"]), {
        code: 0,
        stdout: "OK\n",
        stderr: "",
      });
      assert.equal(
        (await run(["--debug-port", String(port), "GET", "/missing"])).code,
        0,
        "404 passes, as Istio's",
      );
      const failed = await run([`--debug-port=${port}`, "GET", "other"]);
      assert.equal(failed.code, 1);
      assert.match(failed.stderr, /unsuccessful status code 500: broken/);
      // A port that is neither Istio's nor this pod's agent or admin port is refused before any request.
      const refused = await run([`--debug-port=${port}`, "POST", "drain"], {});
      assert.equal(refused.code, 2);
      assert.match(refused.stderr, /debug port \d+ is not in allowed list \[15000 15004 15020 15021\]/);
      assert.equal((await run(["POST"])).code, 2, "a method and a path are needed");
    } finally {
      server.close();
    }
  });
});
