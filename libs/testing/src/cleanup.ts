import type { ChildProcess } from "node:child_process";
import { after, afterEach, beforeEach } from "node:test";

/**
 * Cleanup that does not depend on each suite remembering it.
 *
 * Every helper of this package that starts something (nats-server, a service
 * process, a gRPC server, the fake kube-apiserver, any child a test captures
 * the output of) registers how to stop it here, at the moment it starts it.
 * So when a suite's `before` hook throws half-way, or its `after` hook never
 * reaches a line, whatever was started is still stopped:
 *
 * - a root `after` hook of the test file runs every cleanup still registered
 *   (newest first), each with its own time limit;
 * - when the process exits for any reason (a crash, SIGTERM from the
 *   runner's `--test-timeout`, the exit below), every child process still
 *   alive gets SIGKILL, synchronously, so none outlives the file;
 * - a file whose tests and cleanups are done but whose process is still held
 *   open (a socket or timer nobody closed) names what holds it and exits
 *   LEAK_GRACE_MS later with the tests' own exit code. This replaces node's
 *   `--test-force-exit`, which exits at once and can drop the last results a
 *   file reported before its parent reads them (nodejs/node#64833: a file
 *   reported 35 of its 54 tests here, all passing, exit 0);
 * - each test has a time limit of its own (SEXTANT_TEST_TIMEOUT_MS, 5 minutes
 *   by default), shorter than the runner's limit per file (`--test-timeout`
 *   in each package's test script): when it trips, the file prints the test's
 *   name, stops its children and exits with a failure, so the report names
 *   the file and the test rather than only the file.
 */

type Cleanup = () => unknown;

const cleanups = new Map<symbol, { label: string; run: Cleanup }>();
const children = new Set<ChildProcess>();

/** How long a file whose tests are done may stay open before it is made to exit. */
const LEAK_GRACE_MS = 5_000;

/** How long one cleanup may take in the root `after` hook before the next one runs. */
const CLEANUP_LIMIT_MS = 20_000;

/**
 * Registers how to stop something a test started. The returned function
 * unregisters it: call it once the thing was stopped the ordinary way.
 */
export function onCleanup(label: string, run: Cleanup): () => void {
  const id = Symbol(label);
  cleanups.set(id, { label, run });
  return () => {
    cleanups.delete(id);
  };
}

/** Makes sure `child` does not outlive this process: SIGKILL at exit if it is still running. */
export function trackChildProcess(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  children.add(child);
  child.once("exit", () => children.delete(child));
}

/** Runs every registered cleanup, newest first; a failing or stuck one does not stop the others. */
async function runCleanups(): Promise<void> {
  const failures: string[] = [];
  for (const [id, { label, run }] of [...cleanups].reverse()) {
    cleanups.delete(id);
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        Promise.resolve().then(run),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`did not finish within ${CLEANUP_LIMIT_MS} ms`)),
            CLEANUP_LIMIT_MS,
          );
        }),
      ]);
    } catch (error) {
      failures.push(`${label}: ${(error as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }
  killChildren();
  exitIfHeldOpen();
  if (failures.length > 0) throw new Error(`cleanup failed:\n  ${failures.join("\n  ")}`);
}

/**
 * After the last root hook, the runner writes the file's summary and the
 * process ends by itself, unless something still holds it open. This timer
 * does not hold it (unref), so it fires only then, long after the results
 * were written, and exits with the code the runner chose.
 */
function exitIfHeldOpen(): void {
  setTimeout(() => {
    const holders = process.getActiveResourcesInfo().filter((name) => name !== "TTYWrap");
    process.stderr.write(
      `\n# @sextant/testing: tests done, process still held open by ${holders.join(", ") || "nothing known"}; exiting\n`,
    );
    killChildren();
    process.exit();
  }, LEAK_GRACE_MS).unref();
}

function killChildren(): void {
  for (const child of children) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone: nothing to stop.
    }
  }
}

/** The limit of one test (its hooks included), below the runner's per-file limit. */
const testLimitMs = Number(process.env.SEXTANT_TEST_TIMEOUT_MS ?? 300_000);

function stopStuckTest(name: string): void {
  process.stderr.write(
    `\n# @sextant/testing: test ${JSON.stringify(name)} did not finish within ${testLimitMs} ms (SEXTANT_TEST_TIMEOUT_MS); stopping this file\n`,
  );
  killChildren();
  process.exit(1);
}

process.on("exit", killChildren);

// Only inside node's test runner (a test file's process): the demo and other
// scripts that use these helpers keep their own lifetime.
if (process.env.NODE_TEST_CONTEXT !== undefined) {
  const timers = new Map<string, NodeJS.Timeout>();
  after(runCleanups);
  beforeEach((context) => {
    timers.set(
      context.name,
      setTimeout(() => stopStuckTest(context.name), testLimitMs),
    );
  });
  afterEach((context) => {
    clearTimeout(timers.get(context.name));
    timers.delete(context.name);
  });
  // The runner ends a file that overran its limit with SIGTERM, which would
  // skip the exit handler: stop the children first.
  process.once("SIGTERM", () => {
    killChildren();
    process.exit(143);
  });
}
