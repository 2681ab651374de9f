// The control protocol of the mesh workloads, on grpc-js-xds
// (libs/bookinfo/src/mesh-workload.ts) and on C-core
// (test-e2e/python/mesh_workload.py) alike: a started workload prints a
// ready line; a client answers GET /tally and GET /caller on its control port.
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { eventually } from "@sextant/testing";

/** What a client workload's control port answers. */
export interface WorkloadControl {
  /** GET /tally: who answered `calls` calls to target, each sending header (`name:value`) if given. */
  tally(
    target: string,
    calls: number,
    header?: string,
  ): Promise<{ counts: Record<string, number>; errors: string[] }>;
  /** GET /caller: the identity the server saw. */
  caller(target: string): Promise<{ answer: string; error?: string }>;
}

/**
 * Waits until the workload child prints `ready`. Fails with its output when
 * it exits first, or when it does not within 30 s (and then kills it).
 */
export async function awaitWorkload(
  child: ChildProcess,
  options: { name: string; ready: string; output: () => string; controlPort: number },
): Promise<WorkloadControl> {
  const { name, ready, output, controlPort } = options;
  try {
    await eventually(() => output().includes(ready) || child.exitCode !== null, {
      timeoutMs: 30_000,
      message: `${name} did not start`,
    });
  } catch (error) {
    child.kill("SIGKILL");
    throw new Error(`${(error as Error).message}; its output:\n${output()}`);
  }
  assert.equal(child.exitCode, null, `${name} exited: ${output()}`);
  const get = async <T>(path: string): Promise<T> => {
    const response = await fetch(`http://127.0.0.1:${controlPort}${path}`);
    assert.equal(response.status, 200, await response.clone().text());
    return (await response.json()) as T;
  };
  return {
    tally: (target, calls, header) =>
      get(
        `/tally?target=${encodeURIComponent(target)}&calls=${calls}${header ? `&header=${encodeURIComponent(header)}` : ""}`,
      ),
    caller: (target) => get(`/caller?target=${encodeURIComponent(target)}`),
  };
}
