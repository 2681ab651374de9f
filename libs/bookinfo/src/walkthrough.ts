// The demo's walk-through, run by `npm run demo` as its own process. The
// demo has already started Bookinfo-style details, ratings, reviews v1, v2
// and v3 (v2 and v3 calling ratings) and a productpage client (calling
// details and reviews) as mesh workloads (mesh-workload.ts), each beside its
// own agent, joined through WorkloadGroup auto-registration and talking mTLS.
// The walk-through drives productpage over its control port: it shows, once,
// the SPIFFE identity reviews saw on the connection, then applies the
// Bookinfo routing samples (samples/, in Istio's format) one after another and draws the split productpage
// observes calling xds:///reviews.default.svc.cluster.local:9080. With --once
// it checks each split against the configured weights (±5 points) and exits 1
// if any step missed.
//
//   node walkthrough.js <ingest-url> <productpage-control-url> <bookinfo-networking-dir> [--once]
//
// INGEST_TOKEN_FILE, when set, names a file holding the bearer token sent
// with every call to ingest's API (the demo passes its admin token's file,
// so the token is not on the command line for `ps` to show).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline/promises";
import { setTimeout as sleep } from "node:timers/promises";

const [ingestUrl = "", controlUrl = "", samplesDir = ""] = process.argv.slice(2);
const once = process.argv.includes("--once");
const REVIEWS_HOST = "reviews.default.svc.cluster.local";
const TARGET = `xds:///${REVIEWS_HOST}:9080`;
const CALLS = 400;
const TOLERANCE = 5;
const tty = process.stdout.isTTY;
const color = (code: number, text: string) => (tty ? `\x1b[${code}m${text}\x1b[0m` : text);

type Counts = Map<string, number>;

interface Step {
  title: string;
  /** YAML applied through ingest before the step. */
  apply: string[];
  /** Expected shares (percent) per answer, for calls without and with `end-user: jason`. */
  expect: Record<string, number>;
  expectJason?: Record<string, number>;
}

const sample = (file: string) => readFileSync(join(samplesDir, file), "utf8");

const tokenFile = process.env.INGEST_TOKEN_FILE;
const ingestHeaders: Record<string, string> = tokenFile
  ? { authorization: `Bearer ${readFileSync(tokenFile, "utf8").trim()}` }
  : {};

async function apply(yaml: string): Promise<void> {
  const response = await fetch(`${ingestUrl}/v1/apply`, {
    method: "POST",
    headers: ingestHeaders,
    body: yaml,
  });
  if (!response.ok)
    throw new Error(`ingest refused the config (${response.status}): ${await response.text()}`);
}

async function control<T>(path: string, params: Record<string, string>, headers: string[] = []): Promise<T> {
  const query = new URLSearchParams({ target: TARGET, ...params });
  for (const header of headers) query.append("header", header);
  const response = await fetch(`${controlUrl}${path}?${query}`);
  if (!response.ok)
    throw new Error(`productpage's ${path} answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as T;
}

/** `count` calls made by the productpage workload, counted per answer ("reviews-v1", "error:UNKNOWN", ...). */
async function tally(count: number, headers: string[] = []): Promise<{ counts: Counts; errors: string[] }> {
  const body = await control<{ counts: Record<string, number>; errors: string[] }>(
    "/tally",
    { calls: String(count) },
    headers,
  );
  return { counts: new Map(Object.entries(body.counts)), errors: body.errors };
}

function bars(counts: Counts, total: number): string[] {
  return [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([answer, count]) => {
      const percent = (100 * count) / total;
      const label = answer.startsWith("error:") ? `error ${answer.slice(6)}` : answer;
      return `    ${label.padEnd(18)} ${color(answer.startsWith("error") ? 31 : 32, "█".repeat(Math.round(percent / 2.5)))} ${percent.toFixed(1)}%`;
    });
}

function holds(counts: Counts, total: number, expected: Record<string, number>): boolean {
  const answers = new Set([...counts.keys(), ...Object.keys(expected)]);
  return [...answers].every(
    (answer) => Math.abs((100 * (counts.get(answer) ?? 0)) / total - (expected[answer] ?? 0)) <= TOLERANCE,
  );
}

const steps: Step[] = [
  {
    title: "virtual-service-all-v1.yaml: every call to reviews v1",
    apply: [sample("destination-rule-all-mtls.yaml"), sample("virtual-service-all-v1.yaml")],
    expect: { "reviews-v1": 100 },
  },
  {
    title: "virtual-service-reviews-90-10.yaml: 90% to v1, 10% to v2",
    apply: [sample("virtual-service-reviews-90-10.yaml")],
    expect: { "reviews-v1": 90, "reviews-v2": 10 },
  },
  {
    title: "virtual-service-reviews-jason-v2-v3.yaml: end-user jason to v2, everyone else to v3",
    apply: [sample("virtual-service-reviews-jason-v2-v3.yaml")],
    expect: { "reviews-v3": 100 },
    expectJason: { "reviews-v2": 100 },
  },
  {
    title:
      "fault injection (virtual-service-ratings-test-abort.yaml, aimed at reviews): jason's calls abort with HTTP 500",
    apply: [sample("virtual-service-ratings-test-abort.yaml").replaceAll("ratings", "reviews")],
    expect: { "reviews-v1": 100 },
    expectJason: { "error:UNKNOWN": 100 },
  },
];

/**
 * Proof of mTLS, shown once: the identity reviews saw on productpage's
 * connection. Bookinfo's destination-rule-all-mtls.yaml makes the client side
 * ISTIO_MUTUAL; the PeerAuthentication the demo applied makes reviews STRICT.
 */
async function showCaller(): Promise<void> {
  await apply(sample("destination-rule-all-mtls.yaml"));
  const deadline = Date.now() + 30_000;
  let last: { answer: string; error?: string } = { answer: "" };
  while (Date.now() < deadline) {
    last = await control<{ answer: string; error?: string }>("/caller", {});
    if (last.answer.startsWith("spiffe://")) break;
    await sleep(200);
  }
  if (!last.answer.startsWith("spiffe://"))
    throw new Error(
      `productpage never reached reviews over mTLS: ${last.answer}${last.error ? ` (${last.error})` : ""}`,
    );
  console.log(
    `  mTLS (destination-rule-all-mtls.yaml + PeerAuthentication STRICT): reviews saw the caller as ${color(32, last.answer)}`,
  );
}

async function main(): Promise<number> {
  console.log(`\n${color(1, "Bookinfo reviews over proxyless gRPC, through agents and mTLS")}`);
  console.log(`  productpage calls ${TARGET}, driven over ${controlUrl}/tally`);
  await showCaller();

  const prompt =
    !once && process.stdin.isTTY
      ? createInterface({ input: process.stdin, output: process.stdout })
      : undefined;
  const jason = ["end-user:jason"];

  let failures = 0;
  for (const [index, step] of steps.entries()) {
    if (prompt) await prompt.question(color(2, `\n  [Enter] for step ${index + 1}: ${step.title} `));
    console.log(`\n${color(1, `Step ${index + 1}`)}: ${step.title}`);
    for (const yaml of step.apply) await apply(yaml);
    // Wait until the client routes as configured (the config converges in well under a second), then measure.
    const deadline = Date.now() + 30_000;
    let { counts } = await tally(100);
    while (!holds(counts, 100, step.expect) && Date.now() < deadline) ({ counts } = await tally(100));
    const measured = await tally(CALLS);
    let ok = holds(measured.counts, CALLS, step.expect);
    console.log(`  ${CALLS} calls:`);
    for (const line of bars(measured.counts, CALLS)) console.log(line);
    if (!ok) for (const error of measured.errors.slice(0, 3)) console.log(color(2, `    ${error}`));
    if (step.expectJason) {
      const asJason = await tally(CALLS, jason);
      const jasonOk = holds(asJason.counts, CALLS, step.expectJason);
      ok &&= jasonOk;
      console.log(`  ${CALLS} calls with end-user: jason:`);
      for (const line of bars(asJason.counts, CALLS)) console.log(line);
      if (!jasonOk) for (const error of asJason.errors.slice(0, 3)) console.log(color(2, `    ${error}`));
    }
    console.log(
      `  ${ok ? color(32, "✓ matches the configured routing") : color(31, `✗ differs from the configured routing by more than ${TOLERANCE} points`)}`,
    );
    if (!ok) failures++;
  }
  prompt?.close();
  console.log(
    `\n${failures === 0 ? color(32, `All ${steps.length} routing steps held.`) : color(31, `${failures} of ${steps.length} steps did not hold.`)}`,
  );
  return failures === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error) => {
    console.error(`walk-through failed: ${(error as Error).message}`);
    process.exit(1);
  },
);
