import { type ChildProcess, spawn } from "node:child_process";
import { constants } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "@sextant/observability";
import type { Runner } from "@sextant/runtime";
import { writeFileAtomic } from "../files/atomic-write.js";
import type { EnvoyAdmin } from "./admin.js";

/** What the Envoy runner starts and how it stops it. */
export interface EnvoyRunnerOptions {
  binary: string;
  args: string[];
  /** Where the bootstrap is written before each start, and its text. */
  bootstrapPath: string;
  bootstrapText: string;
  admin: EnvoyAdmin;
  /** A sidecar drains its inbound listeners only; a router all of them. */
  inboundOnlyDrain: boolean;
  /** How long Envoy drains after the agent is told to stop, before it gets SIGTERM. */
  terminationDrainMs: number;
  logger: Logger;
}

/** The Envoy runner: its child's exit status is the agent's once it has stopped. */
export interface EnvoyRunner extends Runner {
  /** Envoy's last exit status (128 + the signal's number for a signal), 0 before any exit. */
  exitCode(): number;
  /** Starts Envoy's drain now, and leaves it running (the status port's POST /drain). */
  drainNow(): Promise<void>;
}

/** Restart delays after Envoy dies: doubling from the first to the cap. */
const FIRST_RESTART_DELAY_MS = 500;
const MAX_RESTART_DELAY_MS = 30_000;
/** An Envoy that ran this long before it died starts the delays over. */
const STABLE_RUN_MS = 60_000;
/** How long Envoy may take to exit after SIGTERM before it gets SIGKILL. */
const EXIT_GRACE_MS = 5_000;

/** The longest a stop of the runner can take: the drain, then the grace of SIGTERM. */
export const envoyStopMs = (terminationDrainMs: number) => terminationDrainMs + EXIT_GRACE_MS;

function exitStatus(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
}

/**
 * Envoy as a child process (istio-agent's job): the bootstrap is written,
 * Envoy started with it, and restarted with a growing delay whenever it
 * dies. Stopping drains its listeners on the admin API, waits the
 * termination drain duration so that open requests finish, then sends
 * SIGTERM and waits for the exit, whose status the agent exits with.
 */
export function envoyRunner(options: EnvoyRunnerOptions): EnvoyRunner {
  const { logger } = options;
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let lastExit = 0;
  let stopping = false;
  let restartDelay = FIRST_RESTART_DELAY_MS;
  let restartTimer: NodeJS.Timeout | undefined;

  // A restart that cannot even run the binary is retried too, on the same growing delays.
  const scheduleRestart = () => {
    restartTimer = setTimeout(() => {
      restartTimer = undefined;
      if (stopping) return;
      launch().catch((error) => {
        logger.error({ err: error, restartInMs: restartDelay }, "Envoy restart failed");
        scheduleRestart();
      });
    }, restartDelay);
    restartDelay = Math.min(restartDelay * 2, MAX_RESTART_DELAY_MS);
  };

  const launch = (): Promise<void> =>
    new Promise((resolve, reject) => {
      writeFileAtomic(options.bootstrapPath, options.bootstrapText);
      const startedAt = Date.now();
      const envoy = spawn(options.binary, options.args, { stdio: ["ignore", "inherit", "inherit"] });
      child = envoy;
      envoy.once("error", (error) => {
        child = undefined;
        reject(new Error(`cannot start Envoy (${options.binary}): ${error.message}`));
      });
      exited = new Promise((done) =>
        envoy.once("exit", (code, signal) => {
          child = undefined;
          lastExit = exitStatus(code, signal);
          done();
          // A binary that could not be run is start()'s failure, not a crash to restart.
          if (stopping || envoy.pid === undefined) return;
          if (Date.now() - startedAt >= STABLE_RUN_MS) restartDelay = FIRST_RESTART_DELAY_MS;
          logger.error({ code, signal, restartInMs: restartDelay }, "Envoy exited; restarting it");
          scheduleRestart();
        }),
      );
      envoy.once("spawn", () => {
        logger.info({ pid: envoy.pid, binary: options.binary, args: options.args }, "Envoy started");
        resolve();
      });
    });

  return {
    name: "envoy",
    exitCode: () => lastExit,
    async drainNow() {
      if (!child) throw new Error("Envoy is not running");
      await options.admin.drainListeners(options.inboundOnlyDrain, true);
      logger.info("Envoy is draining, on request");
    },
    start: launch,
    async close() {
      stopping = true;
      clearTimeout(restartTimer);
      if (!child) return;
      try {
        await options.admin.drainListeners(options.inboundOnlyDrain);
        logger.info({ drainMs: options.terminationDrainMs }, "Envoy is draining");
      } catch (error) {
        logger.warn({ err: error }, "could not drain Envoy's listeners");
      }
      // Envoy may die during the drain: then there is nothing left to wait for.
      const drained = new AbortController();
      await Promise.race([sleep(options.terminationDrainMs, undefined, { signal: drained.signal }), exited]);
      drained.abort();
      const draining = child as ChildProcess | undefined;
      if (!draining) return;
      draining.kill("SIGTERM");
      const killer = setTimeout(() => draining.kill("SIGKILL"), EXIT_GRACE_MS);
      await exited;
      clearTimeout(killer);
      logger.info({ exitCode: lastExit }, "Envoy stopped");
    },
  };
}
