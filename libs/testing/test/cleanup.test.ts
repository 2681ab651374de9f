import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const fixture = fileURLToPath(new URL("./fixtures/hooks.fixture.ts", import.meta.url));

interface Started {
  ports: number[];
  pids: number[];
  folders: string[];
}

/** Runs the fixture as its own test file under node's runner, as `pnpm test` runs a file. */
async function runFixture(
  failure: "before" | "after" | "hang" | "hook-hang" | "leak",
  fileLimitMs = 60_000,
): Promise<{ code: number | null; output: string; started: Started }> {
  const dir = mkdtempSync(join(tmpdir(), "sextant-cleanup-"));
  const report = join(dir, "started.json");
  // Without this, the child takes itself for a file of this run and runs nothing.
  const { NODE_TEST_CONTEXT: _ours, ...env } = process.env;
  const child = spawn(
    process.execPath,
    ["--conditions=@sextant/source", "--import", "tsx", "--test", `--test-timeout=${fileLimitMs}`, fixture],
    {
      env: {
        ...env,
        FIXTURE_FAILURE: failure,
        FIXTURE_REPORT: report,
        // The fixture's hanging test trips its own limit long before the file's.
        SEXTANT_TEST_TIMEOUT_MS: "3000",
      },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr.on("data", (chunk) => {
    output += chunk;
  });
  // A fixture that never exits is the very failure under test: give up after 90 s.
  const guard = setTimeout(() => child.kill("SIGKILL"), 90_000);
  const code = await new Promise<number | null>((resolve) => child.once("exit", (exit) => resolve(exit)));
  clearTimeout(guard);
  assert.notEqual(child.signalCode, "SIGKILL", `the fixture file did not exit by itself:\n${output}`);
  assert.ok(existsSync(report), `the fixture started nothing:\n${output}`);
  const started = JSON.parse(readFileSync(report, "utf8")) as Started;
  rmSync(dir, { recursive: true, force: true });
  return { code, output, started };
}

/** True when a process is gone (or a zombie: dead, waiting only for its parent to reap it). */
function processGone(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];
    return state === "Z";
  } catch {
    return true;
  }
}

function portRefuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

async function assertNothingLeft(started: Started, output: string): Promise<void> {
  assert.equal(started.ports.length, 3);
  for (const port of started.ports)
    assert.ok(await portRefuses(port), `port ${port} still listens\n${output}`);
  for (const pid of started.pids) assert.ok(processGone(pid), `process ${pid} still runs\n${output}`);
}

describe("a test file whose suite fails", () => {
  it("exits with the failure of its before hook and leaves no process, port or folder behind", async () => {
    const { code, output, started } = await runFixture("before");
    assert.notEqual(code, 0);
    assert.match(output, /deliberate failure in before/);
    assert.match(output, /failureType: 'hookFailed'/);
    await assertNothingLeft(started, output);
    for (const folder of started.folders) assert.ok(!existsSync(folder), `${folder} was left behind`);
  });

  it("exits with the failure of its after hook and leaves nothing behind", async () => {
    const { code, output, started } = await runFixture("after");
    assert.notEqual(code, 0);
    assert.match(output, /deliberate failure in after/);
    await assertNothingLeft(started, output);
    for (const folder of started.folders) assert.ok(!existsSync(folder), `${folder} was left behind`);
  });

  it("stops a test that hangs, naming the test and the file, and leaves no process or port behind", async () => {
    const { code, output, started } = await runFixture("hang");
    assert.notEqual(code, 0);
    assert.match(output, /test "waits forever when asked to" did not finish within 3000 ms/);
    assert.match(output, /not ok 1 - .*hooks\.fixture\.ts/);
    await assertNothingLeft(started, output);
  });

  it("stops a file whose hook hangs at the file's limit, naming the file, and leaves no process or port behind", async () => {
    const { code, output, started } = await runFixture("hook-hang", 5_000);
    assert.notEqual(code, 0);
    assert.match(output, /not ok 1 - .*hooks\.fixture\.ts[\s\S]*test timed out after 5000ms/);
    await assertNothingLeft(started, output);
  });

  it("ends a passing file that something still holds open, naming what, with its tests' exit code and every result", async () => {
    const { code, output, started } = await runFixture("leak");
    assert.equal(code, 0, output);
    assert.match(output, /tests done, process still held open by [^\n]*Timeout/);
    assert.match(output, /# pass 1\n/);
    await assertNothingLeft(started, output);
  });
});
