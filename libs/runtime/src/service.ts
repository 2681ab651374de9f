import {
  createLogger,
  createMetricsRegistry,
  type HealthServer,
  type JsonRoute,
  type Logger,
  ReadinessGate,
  type Registry,
  type RequestHandler,
  startHealthServer,
  startTelemetry,
} from "@sextant/observability";
import type { z } from "zod";
import type { ServiceContract } from "./contract.js";
import { type Runner, RunnerGroup } from "./runner.js";
import { parseSettings, type ServiceSettingsSchema, SettingsError } from "./settings.js";

/** What a service's runners are built from. */
export interface ServiceContext<Settings> {
  readonly service: string;
  /** What the service declared it uses: @sextant/bus's runner allows exactly this. */
  readonly contract: ServiceContract;
  readonly settings: Settings;
  readonly logger: Logger;
  readonly metrics: Registry;
  readonly readiness: ReadinessGate;
  /**
   * Aborted by SIGTERM or SIGINT, from the process's first moment: a runner
   * whose start() may wait indefinitely (for a CA that cannot be reached, say)
   * gives up when it fires, since the stop itself waits for the start.
   */
  readonly shutdown: AbortSignal;
  /** Serves the service's own HTTP API and JSON debug routes on HTTP_PORT, beside /metrics and /ready. */
  readonly http: {
    mount(handler: RequestHandler | undefined): void;
    route(path: string, handler: JsonRoute): void;
  };
}

/** The description of a service that {@link runService} starts. */
export interface ServiceDefinition<Schema extends ServiceSettingsSchema> {
  service: string;
  /** The buckets, subjects and ports the service uses, declared once (see ServiceContract). */
  contract: ServiceContract;
  settings: Schema;
  /** Lists the runners, in start order. */
  runners(context: ServiceContext<z.infer<Schema>>): Runner[] | Promise<Runner[]>;
}

/** A service started by {@link startService}. */
export interface StartedService<Settings> extends ServiceContext<Settings> {
  readonly httpPort: number;
  stop(): Promise<void>;
  /** The runner being closed right now, if a stop is under way. */
  readonly closing: string | undefined;
}

/** The readiness condition held while the runners start. */
const STARTING = "starting";

/** How long a SIGTERM may take before the process gives up on a clean stop (Kubernetes' grace period is 30 s). */
const SHUTDOWN_DEADLINE_MS = 10_000;

/**
 * Starts a service: settings, logger, telemetry, the /metrics + /ready server
 * on HTTP_PORT, then its runners in order. stop() closes them in reverse.
 */
export async function startService<Schema extends ServiceSettingsSchema>(
  definition: ServiceDefinition<Schema>,
  env = process.env,
  shutdown: AbortSignal = new AbortController().signal,
): Promise<StartedService<z.infer<Schema>>> {
  const settings = parseSettings(definition.settings, env);
  const logger = createLogger({ service: definition.service, level: settings.LOG_LEVEL });
  const telemetry = await startTelemetry(definition.service, env);
  const metrics = createMetricsRegistry(definition.service);
  const readiness = new ReadinessGate();
  let health: HealthServer | undefined;
  const context: ServiceContext<z.infer<Schema>> = {
    service: definition.service,
    contract: definition.contract,
    settings,
    logger,
    metrics,
    readiness,
    shutdown,
    http: {
      mount: (handler) => health?.mount(handler),
      route: (path, handler) => health?.route(path, handler),
    },
  };
  const runners = new RunnerGroup(logger);
  let stopping = false;
  // The health server starts first so that a slow start shows as "not ready"
  // rather than as a refused connection; runners register their own
  // conditions as they start, so until the last one has, the service as a
  // whole is not ready.
  readiness.require(STARTING);
  health = await startHealthServer({
    port: settings.HTTP_PORT,
    registry: metrics,
    readiness,
  });
  try {
    await runners.start(await definition.runners(context));
  } catch (error) {
    await health.close();
    await telemetry.shutdown();
    throw error;
  }
  readiness.done(STARTING);
  logger.info({ httpPort: health.port, replica: settings.REPLICA_ID }, `${definition.service} started`);
  return {
    ...context,
    httpPort: health.port,
    get closing() {
      return runners.closing ?? (stopping ? "health server" : undefined);
    },
    async stop() {
      stopping = true;
      await runners.close();
      await health?.close();
      await telemetry.shutdown();
    },
  };
}

/** How {@link runService} ends a process whose stop is not the common one. */
export interface RunServiceOptions {
  /** How long a stop may take (default 10 s); a service whose stop waits on purpose (a drain) needs longer. */
  stopDeadlineMs?: number;
  /** The exit status after a clean stop (default 0), for a service that passes on a child's. */
  exitCode?: () => number;
}

/**
 * The entry point of a service process: starts it, and on SIGTERM or SIGINT
 * stops it and exits. A bad setting exits with status 2 and says which.
 */
export async function runService<Schema extends ServiceSettingsSchema>(
  definition: ServiceDefinition<Schema>,
  options: RunServiceOptions = {},
): Promise<void> {
  const stopDeadlineMs = options.stopDeadlineMs ?? SHUTDOWN_DEADLINE_MS;
  // Signals are handled from the first moment: a SIGTERM during start-up
  // aborts `shutdown` (so a runner waiting indefinitely gives up), waits for
  // the start to finish, then stops cleanly.
  let signalled: string | undefined;
  const shutdown = new AbortController();
  let stop: (signal: string) => void = (signal) => {
    signalled ??= signal;
    shutdown.abort();
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));
  let started: StartedService<z.infer<Schema>>;
  try {
    started = await startService(definition, process.env, shutdown.signal);
  } catch (error) {
    if (error instanceof SettingsError) {
      process.stderr.write(`${definition.service}: ${error.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`${definition.service}: failed to start: ${(error as Error).stack ?? error}\n`);
    process.exit(1);
  }
  let stopping = false;
  stop = (signal) => {
    if (stopping) return;
    stopping = true;
    shutdown.abort();
    started.logger.info({ signal }, `${definition.service} stopping`);
    // A runner that never finishes closing must not keep the process alive:
    // say which one it was and exit with an error.
    setTimeout(() => {
      started.logger.error({ runner: started.closing }, `stop did not finish within ${stopDeadlineMs} ms`);
      process.exit(1);
    }, stopDeadlineMs).unref();
    void started.stop().then(() => process.exit(options.exitCode?.() ?? 0));
  };
  if (signalled) stop(signalled);
}
