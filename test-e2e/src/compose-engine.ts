import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { promisify } from "node:util";
import { getContainerRuntimeClient } from "testcontainers";

/** How long to wait for a container runtime to answer before calling it absent. */
const PROBE_TIMEOUT_MS = 15_000;

/**
 * Why the compose end-to-end suite cannot run here, or undefined when it
 * can: a Docker engine must answer (testcontainers' own runtime strategies:
 * DOCKER_HOST, ~/.testcontainers.properties, the Unix sockets) and have the
 * compose plugin. The probe has a deadline, so a dead socket skips the suite
 * instead of hanging it.
 */
export async function composeEngineProblem(): Promise<string | undefined> {
  const where = process.env.DOCKER_HOST
    ? `DOCKER_HOST=${process.env.DOCKER_HOST}`
    : existsSync("/var/run/docker.sock")
      ? "/var/run/docker.sock"
      : "DOCKER_HOST is unset and /var/run/docker.sock does not exist";
  let timer: NodeJS.Timeout | undefined;
  try {
    const client = await Promise.race([
      getContainerRuntimeClient(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS / 1000} s`)),
          PROBE_TIMEOUT_MS,
        );
        timer.unref();
      }),
    ]);
    // testcontainers drives compose through the docker CLI's compose plugin.
    try {
      await promisify(execFile)("docker", ["compose", "version"], { timeout: PROBE_TIMEOUT_MS });
    } catch (error) {
      return `no docker compose CLI here (the engine at ${client.info.containerRuntime.host} answered): ${(error as Error).message}`;
    }
    return undefined;
  } catch (error) {
    return `no Docker engine here (${where}): ${(error as Error).message}`;
  } finally {
    clearTimeout(timer);
  }
}
