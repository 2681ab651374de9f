// `pnpm --filter @sextant/test-e2e soak [--minutes 30] [--clients 200]`: the
// soak of issue 24, bounded. Prints each service's memory trend over the last
// 20 minutes (or the whole run when shorter, after a warm-up), writes every
// sample as JSON, and exits 1 when a slope exceeds 1 MB per minute or a
// client fell out of sync.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { runSoak, trendTable } from "./soak.js";

const { values } = parseArgs({
  options: {
    minutes: { type: "string", default: "30" },
    clients: { type: "string", default: "200" },
    window: { type: "string" },
    threshold: { type: "string", default: "1" },
    samples: { type: "string" },
  },
});
const minutes = Number(values.minutes);
const clients = Number(values.clients);
// The window is the last 20 minutes; a shorter run keeps its last two thirds (the first third is warm-up).
const windowMinutes = Number(values.window ?? Math.min(20, (minutes * 2) / 3));
const threshold = Number(values.threshold);
if (!(minutes > 0 && clients > 0 && windowMinutes > 0 && threshold > 0)) {
  console.error(
    "usage: soak [--minutes 30] [--clients 200] [--window MIN] [--threshold MB_PER_MIN] [--samples FILE]",
  );
  process.exit(2);
}
// Ctrl-C or a SIGTERM ends the run: exiting lets @sextant/testing's exit handler kill every process it started.
process.once("SIGINT", () => process.exit(130));
process.once("SIGTERM", () => process.exit(143));
const log = (line: string) => console.log(`${new Date().toISOString()} ${line}`);
log(
  `soak: ${minutes} min, ${clients} clients, slope window ${windowMinutes} min, threshold ${threshold} MB/min`,
);
const result = await runSoak({
  minutes,
  clients,
  windowMinutes,
  threshold: { heapMbPerMinute: threshold, rssMbPerMinute: threshold },
  log,
});
if (values.samples)
  writeFileSync(values.samples, `${JSON.stringify(Object.fromEntries(result.samples), null, 1)}\n`);
console.log(
  `\n${result.endpointChanges} endpoint changes, ${result.configChanges} config changes, ${result.checkpoints} sync checkpoints\n`,
);
console.log(trendTable(result));
for (const line of [...result.leaks, ...result.syncFailures]) console.log(`FAIL ${line}`);
const ok = result.leaks.length === 0 && result.syncFailures.length === 0;
console.log(ok ? "\nsoak passed: every client in sync, every slope within the threshold" : "\nsoak FAILED");
process.exit(ok ? 0 : 1);
