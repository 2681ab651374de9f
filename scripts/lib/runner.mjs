// The process runner behind `npm run demo` and `pnpm dev`: starts child
// processes (logs prefixed on screen, or written to files), waits for them to
// be ready, and stops them all, last started first, on Ctrl-C, on SIGTERM, or
// when one of them exits unexpectedly. Node built-ins only.
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { connect, createServer } from "node:net";
import { relative } from "node:path";

/** Wraps text in an ANSI colour code when stdout is a terminal. */
export const color = (code, text) => (process.stdout.isTTY ? `\x1b[${code}m${text}\x1b[0m` : text);

/** Resolves after ms milliseconds. */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Fails, naming the port and its owner, when something already listens on port. */
export async function assertPortFree(port, owner) {
  await new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", () =>
      reject(
        new Error(`port ${port} (${owner}) is already in use: stop whatever listens there and try again`),
      ),
    );
    probe.listen(port, "0.0.0.0", () => probe.close(resolve));
  });
}

/** Whether url answers 2xx within timeoutMs. */
export async function isReady(url, timeoutMs = 1_000) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

/** Waits until url answers 2xx (a service's /ready), or fails after timeoutMs. */
export async function waitReady(name, url, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await isReady(url)) return;
    await sleep(100);
  }
  throw new Error(`${name} did not report ready at ${url} within ${timeoutMs / 1000} s`);
}

/** Whether a NATS server on port greets a new connection with INFO. */
export function natsAnswers(port, timeoutMs = 1_000) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once("data", (data) => done(data.toString().startsWith("INFO")));
    socket.once("error", () => done(false));
  });
}

/** Waits until nats-server accepts connections on port, or fails after timeoutMs. */
export async function waitNats(port, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await natsAnswers(port)) return;
    await sleep(100);
  }
  throw new Error(`nats-server did not accept connections on ${port}`);
}

/** Shortens a JSON log line to "level msg"; other lines pass through. */
export function summarize(line) {
  try {
    const { level, msg, ...rest } = JSON.parse(line);
    delete rest.time;
    delete rest.service;
    delete rest.pid;
    delete rest.hostname;
    const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : "";
    return `${level.padEnd(5)} ${msg}${extra}`;
  } catch {
    return line;
  }
}

/**
 * A runner: the processes it started (`children`, in start order), `start`
 * and `stop`. It installs SIGINT and SIGTERM handlers that stop everything and
 * exit 0. A child that exits while the runner is not stopping is unexpected:
 * the runner says so and stops everything with exit code 1.
 *
 * - root: the working directory of every child, and the base of log paths in messages.
 * - label: what to call the whole in messages ("the demo").
 * - onChildExit(entry, code, signal, expected): called on every child's exit.
 * - onStopped(code): called once every child is gone, just before process.exit.
 * - report(message): how the runner says what went wrong (default: red on stderr).
 */
export function createRunner({
  root,
  label = "the demo",
  onChildExit,
  onStopped,
  report = (message) => console.error(color(31, message)),
} = {}) {
  const children = [];
  let stopping = false;

  /**
   * Starts command as a child named name, with env added to this process's.
   * Its output is, by options:
   * - { logFile }: written to logFile (and kept in `child.output` for readiness checks);
   * - { logFile, ownLog: true }: not read at all (the process writes logFile itself);
   * - {}: printed on stdout, each line prefixed with the name.
   * Returns the child process; `entry` (in `children`) has name, child, startedAt and logFile.
   */
  function start(name, command, args, env = {}, { logFile, ownLog = false, port } = {}) {
    const quiet = ownLog;
    const child = spawn(command, args, {
      cwd: root,
      env: { ...process.env, OTEL_SDK_DISABLED: process.env.OTEL_SDK_DISABLED ?? "true", ...env },
      stdio: ["ignore", quiet ? "ignore" : "pipe", quiet ? "ignore" : "pipe"],
    });
    const entry = { name, child, port, logFile, startedAt: Date.now() };
    child.output = "";
    if (logFile && !quiet) {
      const log = createWriteStream(logFile);
      for (const stream of [child.stdout, child.stderr]) {
        stream.setEncoding("utf8");
        stream.on("data", (chunk) => {
          log.write(chunk);
          if (child.output.length < 100_000) child.output += chunk;
        });
      }
      child.once("close", () => log.end());
    } else if (!quiet) {
      const prefix = color(36, `${name.padEnd(9)}|`);
      for (const stream of [child.stdout, child.stderr]) {
        let buffered = "";
        stream.setEncoding("utf8");
        stream.on("data", (chunk) => {
          buffered += chunk;
          const lines = buffered.split("\n");
          buffered = lines.pop();
          for (const line of lines) if (line.trim()) process.stdout.write(`${prefix} ${summarize(line)}\n`);
        });
      }
    }
    child.once("error", (error) => {
      // spawn failed (command not found): reported like an exit.
      report(`${name} could not start: ${error.message}`);
      if (!entry.exit) child.emit("exit", 127, null);
    });
    child.once("exit", (code, signal) => {
      if (entry.exit) return;
      entry.exitedAt = Date.now();
      entry.exit = { code, signal };
      // Ctrl-C in a terminal reaches the children too: give our own SIGINT handler a moment to run first.
      setTimeout(() => {
        const expected = stopping;
        onChildExit?.(entry, code, signal, expected);
        if (expected) return;
        const reason = signal ?? code;
        if (logFile) report(`${name} exited unexpectedly (${reason}); see ${relative(root, logFile)}`);
        else report(`${name} exited unexpectedly (${reason}); stopping ${label}`);
        void stop(1);
      }, 200);
    });
    children.push(entry);
    return child;
  }

  /** Stops every child, last started first (SIGTERM, then SIGKILL after 5 s), then exits with code. */
  async function stop(code) {
    if (stopping) return;
    stopping = true;
    for (const entry of [...children].reverse()) {
      const { child } = entry;
      if (!entry.exit && child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
    }
    // Let the children's exit callbacks (delayed above) run before the last word.
    await sleep(250);
    await onStopped?.(code);
    process.exit(code);
  }

  process.on("SIGINT", () => void stop(0));
  process.on("SIGTERM", () => void stop(0));

  return { children, start, stop, isStopping: () => stopping };
}
