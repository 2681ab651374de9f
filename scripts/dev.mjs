// `pnpm dev` (or `npm run dev`): runs the local control plane for development
// (nats-server and the five services, each its own process, in dependency
// order, each once the previous one reports /ready), writes each process's
// log to .sextant/logs/<name>.log and shows a status panel: one row per
// process with its port, pid, state and uptime. On a terminal the panel is
// redrawn every second; otherwise each change is printed on a line of its own.
//
// Ctrl-C (or SIGTERM) stops everything, last started first, and exits 0. A
// port already in use stops the start with a message naming the port and the
// service. A process that exits on its own shows as exited in the panel, and
// dev then stops everything and exits 1 (as the demo does).
import { join, relative } from "node:path";
import {
  assertControlPlanePortsFree,
  ensureApiTokens,
  natsPort,
  root,
  services,
  startControlPlane,
  stateDir,
  tokenNotice,
} from "./lib/control-plane.mjs";
import { color, createRunner, isReady, natsAnswers } from "./lib/runner.mjs";

const logsDir = join(stateDir, "logs");
const tty = Boolean(process.stdout.isTTY);

/** One row per process, in start order. */
const rows = [{ name: "nats", port: natsPort }, ...services].map(({ name, port }) => ({
  name,
  port,
  pid: undefined,
  state: "waiting",
  since: undefined,
  stoppedAt: undefined,
}));
const rowOf = (name) => rows.find((row) => row.name === name);
/** What went wrong, shown under the panel. */
const notes = [];
let footer = "starting the control plane in dependency order";

function uptime(row) {
  if (!row.since) return "-";
  const seconds = Math.floor(((row.stoppedAt ?? Date.now()) - row.since) / 1000);
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${String(seconds % 60).padStart(2, "0")}s`;
  return `${Math.floor(seconds / 3600)}h ${String(Math.floor(seconds / 60) % 60).padStart(2, "0")}m`;
}

function paint(state) {
  if (state === "ready") return color(32, state.padEnd(18));
  if (state === "starting" || state === "waiting") return color(33, state.padEnd(18));
  if (state === "stopped") return color(2, state.padEnd(18));
  return color(31, state.padEnd(18));
}

// On a terminal: redraw the whole panel in place (ANSI cursor movement).
let drawnLines = 0;
function draw() {
  const width = Math.max(40, (process.stdout.columns ?? 100) - 1);
  const fit = (line) => (line.length > width ? `${line.slice(0, width - 1)}…` : line);
  const lines = [
    color(1, `Sextant dev: local control plane (logs in ${relative(root, logsDir)}/<name>.log)`),
    `  ${"NAME".padEnd(10)} ${"PORT".padEnd(6)} ${"PID".padEnd(8)} ${"STATE".padEnd(18)} UPTIME`,
    ...rows.map(
      (row) =>
        `  ${row.name.padEnd(10)} ${String(row.port).padEnd(6)} ${String(row.pid ?? "-").padEnd(8)} ${paint(row.state)} ${uptime(row)}`,
    ),
    ...notes.map((note) => color(31, fit(note))),
    fit(footer),
  ];
  let out = drawnLines ? `\x1b[${drawnLines}F` : "\x1b[?25l";
  for (const line of lines) out += `\x1b[2K${line}\n`;
  out += "\x1b[J";
  process.stdout.write(out);
  drawnLines = lines.length;
}

/** Sets a row's state: on a terminal the next redraw shows it; otherwise one line says so. */
function setState(name, state) {
  const row = rowOf(name);
  if (!row || row.state === state) return;
  const first = state === "ready" && row.state === "starting";
  row.state = state;
  if (tty) return draw();
  const after = first ? ` after ${((Date.now() - row.since) / 1000).toFixed(1)} s` : "";
  console.log(
    `${row.name.padEnd(10)} :${String(row.port).padEnd(6)} pid ${String(row.pid ?? "-").padEnd(6)} ${state}${after}`,
  );
}

function say(message, { error = false } = {}) {
  if (tty) {
    if (error) notes.push(message);
    else footer = message;
    draw();
  } else if (error) console.error(message);
  else console.log(message);
}

const runner = createRunner({
  root,
  label: "dev",
  report: (message) => say(`${message}; stopping everything`, { error: true }),
  // While stopping, an exit is what was asked for ("stopped": nats-server exits 1 on SIGTERM); otherwise it shows its code.
  onChildExit: (entry, code, signal, expected) => {
    const row = rowOf(entry.name);
    if (!row) return;
    row.stoppedAt = entry.exitedAt;
    setState(entry.name, expected ? "stopped" : `exited (${signal ?? code})`);
  },
  onStopped: (code) => {
    clearInterval(ticker);
    say(code === 0 ? "stopped: every process exited" : "stopped (exit 1)");
    if (tty) process.stdout.write("\x1b[?25h");
  },
});
process.on("exit", () => {
  if (tty) process.stdout.write("\x1b[?25h");
});

// Every second: ask each running process whether it is still ready, then redraw.
let polling = false;
const ticker = setInterval(async () => {
  if (polling || runner.isStopping()) return;
  polling = true;
  try {
    await Promise.all(
      rows
        .filter(
          (row) =>
            (row.state === "ready" || row.state === "not ready") &&
            row.child?.exitCode === null &&
            row.child?.signalCode === null,
        )
        .map(async (row) => {
          const ok =
            row.name === "nats"
              ? await natsAnswers(row.port, 800)
              : await isReady(`http://127.0.0.1:${row.port}/ready`, 800);
          const running = row.child.exitCode === null && row.child.signalCode === null;
          if (running && !runner.isStopping() && (row.state === "ready" || row.state === "not ready"))
            setState(row.name, ok ? "ready" : "not ready");
        }),
    );
  } finally {
    polling = false;
  }
  if (tty && !runner.isStopping()) draw();
}, 1_000);

// Ingest's API asks for a bearer token: on the first start, say (above the panel) where the admin token is.
const apiTokens = ensureApiTokens();
if (apiTokens.created) console.log(tokenNotice(apiTokens.adminTokenFile));
if (tty) draw();
else console.log(`sextant dev: logs in ${relative(root, logsDir)}/<name>.log`);
try {
  await assertControlPlanePortsFree();
  await startControlPlane(runner, {
    apiTokens,
    logsDir,
    onStarting: (name, _port, child) => {
      const row = rowOf(name);
      row.pid = child.pid;
      row.child = child;
      row.since = Date.now();
      setState(name, "starting");
    },
    onReady: (name) => setState(name, "ready"),
  });
  say(
    tty
      ? "Every process is ready. Press Ctrl-C to stop."
      : `sextant dev: every process is ready (${rows.map((row) => row.name).join(", ")}). Press Ctrl-C to stop.`,
  );
} catch (error) {
  say(`dev failed: ${error.message}`, { error: true });
  await runner.stop(1);
}
