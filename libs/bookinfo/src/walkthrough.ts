// The demo's walk-through, run by `npm run demo` as its own process. It
// starts Bookinfo-style reviews v1, v2 and v3 as gRPC servers (each on a
// loopback address of its own, as VMs would have), registers them with a
// ServiceEntry and WorkloadEntries through ingest, and calls
// xds:///reviews.default.svc.cluster.local:9080 through @grpc/grpc-js-xds
// and push while it applies Istio's Bookinfo routing samples one after
// another, drawing the split it observes. With --once it checks each split
// against the configured weights (±5 points) and exits 1 if any step missed.
//
//   node walkthrough.js <ingest-url> <xds-address> <bookinfo-networking-dir> [--once]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline/promises";
import * as grpc from "@grpc/grpc-js";
import * as xds from "@grpc/grpc-js-xds";
import {
  REVIEWS_HOST,
  ReviewsClient,
  reviewsRegistrationYaml,
  startReviewsBackends,
  tally,
} from "./grpc-app.js";

const [ingestUrl = "", xdsAddress = "", samplesDir = ""] = process.argv.slice(2);
const once = process.argv.includes("--once");
const CALLS = 400;
const TOLERANCE = 5;
const tty = process.stdout.isTTY;
const color = (code: number, text: string) => (tty ? `\x1b[${code}m${text}\x1b[0m` : text);

interface Step {
  title: string;
  /** YAML applied through ingest before the step. */
  apply: string[];
  /** Expected shares (percent) per answer, for calls without and with `end-user: jason`. */
  expect: Record<string, number>;
  expectJason?: Record<string, number>;
}

const sample = (file: string) => readFileSync(join(samplesDir, file), "utf8");

async function apply(yaml: string): Promise<void> {
  const response = await fetch(`${ingestUrl}/v1/apply`, { method: "POST", body: yaml });
  if (!response.ok)
    throw new Error(`ingest refused the config (${response.status}): ${await response.text()}`);
}

function bars(counts: Map<string, number>, total: number): string[] {
  return [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([answer, count]) => {
      const percent = (100 * count) / total;
      const label = answer.startsWith("error:")
        ? `error ${grpc.status[Number(answer.slice(6))] ?? answer}`
        : answer;
      return `    ${label.padEnd(18)} ${color(answer.startsWith("error") ? 31 : 32, "█".repeat(Math.round(percent / 2.5)))} ${percent.toFixed(1)}%`;
    });
}

function holds(counts: Map<string, number>, total: number, expected: Record<string, number>): boolean {
  const answers = new Set([...counts.keys(), ...Object.keys(expected)]);
  return [...answers].every(
    (answer) => Math.abs((100 * (counts.get(answer) ?? 0)) / total - (expected[answer] ?? 0)) <= TOLERANCE,
  );
}

const steps: Step[] = [
  {
    title: "virtual-service-all-v1.yaml: every call to reviews v1",
    apply: [sample("destination-rule-all.yaml"), sample("virtual-service-all-v1.yaml")],
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
    expectJason: { [`error:${grpc.status.UNKNOWN}`]: 100 },
  },
];

async function main(): Promise<number> {
  const backends = await startReviewsBackends();
  console.log(`\n${color(1, "Bookinfo reviews over proxyless gRPC")}`);
  for (const backend of backends)
    console.log(`  ${backend.name} serving on ${backend.address}:${backend.port}`);
  await apply(reviewsRegistrationYaml(backends));
  console.log(
    "  registered through ingest: ServiceEntry reviews + 3 WorkloadEntries (discovery publishes the registry)",
  );

  process.env.GRPC_XDS_BOOTSTRAP_CONFIG = JSON.stringify({
    xds_servers: [
      { server_uri: xdsAddress, channel_creds: [{ type: "insecure" }], server_features: ["xds_v3"] },
    ],
    node: {
      id: "sidecar~127.0.0.10~productpage-v1-demo.default~default.svc.cluster.local",
      metadata: { GENERATOR: "grpc", NAMESPACE: "default", SERVICE_ACCOUNT: "bookinfo-productpage" },
      locality: {},
    },
  });
  xds.register();
  const client = new ReviewsClient(`xds:///${REVIEWS_HOST}:9080`, grpc.credentials.createInsecure());
  const jason = new grpc.Metadata();
  jason.set("end-user", "jason");
  const prompt =
    !once && process.stdin.isTTY
      ? createInterface({ input: process.stdin, output: process.stdout })
      : undefined;

  let failures = 0;
  for (const [index, step] of steps.entries()) {
    if (prompt) await prompt.question(color(2, `\n  [Enter] for step ${index + 1}: ${step.title} `));
    console.log(`\n${color(1, `Step ${index + 1}`)}: ${step.title}`);
    for (const yaml of step.apply) await apply(yaml);
    // Wait until the client routes as configured (the config converges in well under a second), then measure.
    const deadline = Date.now() + 30_000;
    let counts = await tally(client, 100);
    while (!holds(counts, 100, step.expect) && Date.now() < deadline) counts = await tally(client, 100);
    counts = await tally(client, CALLS);
    let ok = holds(counts, CALLS, step.expect);
    console.log(`  ${CALLS} calls:`);
    for (const line of bars(counts, CALLS)) console.log(line);
    if (step.expectJason) {
      const asJason = await tally(client, CALLS, jason);
      ok &&= holds(asJason, CALLS, step.expectJason);
      console.log(`  ${CALLS} calls with end-user: jason:`);
      for (const line of bars(asJason, CALLS)) console.log(line);
    }
    console.log(
      `  ${ok ? color(32, "✓ matches the configured routing") : color(31, `✗ differs from the configured routing by more than ${TOLERANCE} points`)}`,
    );
    if (!ok) failures++;
  }
  prompt?.close();
  client.close();
  for (const backend of backends) backend.close();
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
