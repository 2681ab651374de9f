import { resolve } from "node:path";
import { JsonAnswer, type ReadinessGate } from "@sextant/observability";
import { parseSettings, runService, type ServiceDefinition, SettingsError } from "@sextant/runtime";
import { bootstrapText, envoyBootstrapFromSettings } from "../bootstrap/from-settings.js";
import { ISTIO_READY_PATH } from "../health.js";
import { localAddresses } from "../node/proxy-node.js";
import { type AgentSettings, agentSettings } from "../settings.js";
import { handleAppProbe, isAppProbePath } from "../status/app-probe.js";
import { DRAIN_PATH, handleLifecycle, QUIT_PATH } from "../status/lifecycle.js";
import { mergedMetricsHandler } from "../status/merged-metrics.js";
import type { AppMetricsTarget } from "../status/prometheus-annotations.js";
import { EnvoyAdmin } from "./admin.js";
import { envoyArgs } from "./envoy-args.js";
import { envoyRunner, envoyStopMs } from "./envoy-runner.js";
import { agentLogLevel, type ProxyArgs, type ProxyType } from "./proxy-command.js";
import { terminationDrainMs, workerThreads } from "./proxy-config.js";

/** Everything `agent proxy` decided before it starts, from its flags and settings. */
interface ProxyPlan {
  args: ProxyArgs;
  drainDurationSeconds: number;
  concurrency: number | undefined;
  terminationDrainMs: number;
}

/**
 * Where the merged metrics read the application's: a sidecar's
 * ISTIO_PROMETHEUS_ANNOTATIONS on the loopback address. A router's status
 * port is exposed by its Service, so Istio merges no application metrics there.
 */
export function appMetricsSource(
  type: ProxyType,
  target: AppMetricsTarget | undefined,
  host: string,
): (AppMetricsTarget & { host: string }) | undefined {
  return type === "sidecar" && target ? { ...target, host } : undefined;
}

/** The readiness condition Envoy adds, named in `/healthz/ready`'s pending list. */
const ENVOY_READY = "envoy";

/**
 * `/healthz/ready` of `agent proxy`: the agent's own readiness (identity, SDS,
 * xDS proxy), then Envoy's, asked from its admin API on each probe as
 * istio-agent does (LIVE, and its first CDS and LDS from push).
 */
function proxyReadyRoute(readiness: ReadinessGate, admin: EnvoyAdmin) {
  return async () => {
    if (!readiness.ready) return new JsonAnswer(503, { ready: false, pending: readiness.pending });
    const reason = await admin.notReadyReason();
    if (reason) return new JsonAnswer(503, { ready: false, pending: [ENVOY_READY], reason });
    return { ready: true, pending: [] };
  };
}

/**
 * --domain is `<namespace>.svc.<suffix>` on an injected pod: the suffix is
 * the node id's DOMAIN_SUFFIX. Another form would name a node push does not
 * expect, so it is refused rather than half-honoured.
 */
function domainSuffix(settings: AgentSettings, domain: string | undefined): string {
  if (domain === undefined) return settings.DOMAIN_SUFFIX;
  const prefix = `${settings.POD_NAMESPACE}.svc.`;
  if (!domain.startsWith(prefix) || domain.length === prefix.length)
    throw new SettingsError([
      `--domain "${domain}" must be ${prefix}<suffix> (POD_NAMESPACE is ${settings.POD_NAMESPACE})`,
    ]);
  return domain.slice(prefix.length);
}

/**
 * The `agent proxy` service: everything `agent run` runs, then Envoy, with
 * the status port's Envoy-aware readiness, merged metrics and application
 * probes.
 */
function proxyService(
  base: ServiceDefinition<typeof agentSettings>,
  plan: ProxyPlan,
  onEnvoy: (runner: ReturnType<typeof envoyRunner>) => void,
): ServiceDefinition<typeof agentSettings> {
  return {
    ...base,
    runners: async (context) => {
      const runners = await base.runners(context);
      const settings = {
        ...context.settings,
        DOMAIN_SUFFIX: domainSuffix(context.settings, plan.args.domain),
      };
      const { localhost } = localAddresses(settings.INSTANCE_IP);
      const admin = new EnvoyAdmin(localhost, settings.PROXY_CONFIG.proxyAdminPort);
      const bootstrap = envoyBootstrapFromSettings(settings);
      // The bootstrap builder names every node a sidecar; a router's id starts with its own type.
      const node = bootstrap.node as { id: string };
      node.id = node.id.replace(/^sidecar~/, `${plan.args.type}~`);
      const bootstrapPath = resolve(settings.ENVOY_BOOTSTRAP_FILE);
      const envoy = envoyRunner({
        binary: settings.ENVOY_BINARY,
        args: envoyArgs({
          bootstrapPath,
          instanceIp: settings.INSTANCE_IP,
          proxy: plan.args,
          drainDurationSeconds: plan.drainDurationSeconds,
          concurrency: plan.concurrency,
        }),
        bootstrapPath,
        bootstrapText: bootstrapText(bootstrap),
        admin,
        inboundOnlyDrain: plan.args.type === "sidecar",
        terminationDrainMs: plan.terminationDrainMs,
        logger: context.logger,
      });
      onEnvoy(envoy);
      context.http.route(ISTIO_READY_PATH, proxyReadyRoute(context.readiness, admin));
      const metrics = mergedMetricsHandler({
        registry: context.metrics,
        envoyUrl: (query) => admin.prometheusUrl(query),
        app: appMetricsSource(plan.args.type, settings.ISTIO_PROMETHEUS_ANNOTATIONS, localhost),
        logger: context.logger,
      });
      const probes = {
        probers: settings.ISTIO_KUBE_APP_PROBERS,
        destination: settings.REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION ? "localhost" : settings.INSTANCE_IP,
        statusPort: settings.HTTP_PORT,
        logger: context.logger,
      };
      const failed = (path: string) => (error: unknown) =>
        context.logger.error({ err: error, path }, "status request failed");
      context.http.mount((request, response) => {
        const path = new URL(request.url ?? "/", "http://agent").pathname;
        let answer: Promise<void> = Promise.resolve();
        if (path === "/stats/prometheus") answer = metrics(request, response);
        else if (isAppProbePath(path)) answer = handleAppProbe(probes, request, response);
        else if (path === DRAIN_PATH)
          handleLifecycle(request, response, () => envoy.drainNow(), failed(path));
        // The agent stops as on SIGTERM: Envoy drains, then everything closes.
        else if (path === QUIT_PATH)
          handleLifecycle(
            request,
            response,
            async () => void process.kill(process.pid, "SIGTERM"),
            failed(path),
          );
        else response.writeHead(404, { "content-type": "text/plain" }).end(`no route ${path}\n`);
        answer.catch((error) => {
          failed(path)(error);
          if (!response.headersSent) response.writeHead(500).end();
        });
      });
      return [...runners, envoy];
    },
  };
}

/**
 * Checks what `agent proxy` needs beyond the agent's settings (PROXY_CONFIG,
 * --domain, the metrics port), then runs the service. The agent exits with
 * Envoy's exit status, and its stop may last the whole termination drain.
 */
export async function runProxy(
  args: ProxyArgs,
  base: ServiceDefinition<typeof agentSettings>,
  env: NodeJS.ProcessEnv,
): Promise<void> {
  const level = agentLogLevel(args.logOutputLevel);
  if (level && env.LOG_LEVEL === undefined) env.LOG_LEVEL = level;
  let plan: ProxyPlan;
  try {
    const settings = parseSettings(agentSettings, env);
    domainSuffix(settings, args.domain);
    if (settings.ISTIO_PROMETHEUS_ANNOTATIONS?.port === settings.HTTP_PORT)
      throw new SettingsError([
        `ISTIO_PROMETHEUS_ANNOTATIONS: the application's metrics port is the agent's own (${settings.HTTP_PORT}), which would scrape itself`,
      ]);
    plan = {
      args,
      drainDurationSeconds: settings.PROXY_CONFIG.drainDurationMs / 1000,
      concurrency: workerThreads({
        flag: args.concurrency,
        configured: settings.PROXY_CONFIG.concurrency,
        sidecar: args.type === "sidecar",
      }),
      terminationDrainMs: terminationDrainMs(settings),
    };
  } catch (error) {
    if (!(error instanceof SettingsError)) throw error;
    process.stderr.write(`agent: ${error.message}\n`);
    process.exit(2);
  }
  let envoy: ReturnType<typeof envoyRunner> | undefined;
  if (args.ignored.length > 0)
    process.stderr.write(`agent: flags without effect here: ${args.ignored.join(" ")}\n`);
  await runService(
    proxyService(base, plan, (runner) => {
      envoy = runner;
    }),
    {
      // The runtime's own deadline, on top of the drain and Envoy's exit.
      stopDeadlineMs: envoyStopMs(plan.terminationDrainMs) + 10_000,
      exitCode: () => envoy?.exitCode() ?? 0,
    },
  );
}
