// Writes fuzz/corpus/<target>/ from real inputs: the repository's samples and
// test data, CSRs made with the openssl CLI, the AdmissionReviews of the
// webhook's golden cases, the services' settings from compose.yaml, ADS
// requests as Envoy and gRPC send them. Run it again when those inputs
// change (`pnpm --filter @sextant/fuzz corpus`); it replaces the seeds it
// writes (of the targets named, or all) and leaves the regression inputs (names starting "crash-"/"hang-").
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { parse, parseAllDocuments } from "yaml";
import { CORPUS_DIR } from "../src/run.js";
import type { TargetName } from "../src/target.js";
import { sdsSeeds } from "../src/targets/agent-sds.js";
import { proxySeeds } from "../src/targets/agent-xds-proxy.js";
import { adsSeeds } from "../src/targets/push-ads.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");
const list = (dir: string, suffix: string) =>
  readdirSync(join(ROOT, dir))
    .filter((name) => name.endsWith(suffix))
    .sort()
    .map((name) => join(dir, name));

/** The targets named on the command line; all of them if none is. */
const only = process.argv.slice(2);

function writeCorpus(target: TargetName, seeds: Record<string, string | Uint8Array>): void {
  if (only.length > 0 && !only.includes(target)) return;
  const dir = join(CORPUS_DIR, target);
  mkdirSync(dir, { recursive: true });
  for (const name of readdirSync(dir)) if (!/^(crash|hang)-/.test(name)) rmSync(join(dir, name));
  for (const [name, content] of Object.entries(seeds)) writeFileSync(join(dir, name), content);
  console.log(`${target}: ${Object.keys(seeds).length} seeds`);
}

// Istio config: Bookinfo's samples, the extension samples, and the inputs of push's golden cases.
const configFiles = [
  ...list("samples/bookinfo/networking", ".yaml"),
  ...list("samples/extensions", ".yaml"),
  ...list("services/push/test/testdata/sidecar", ".in.yaml").filter((_, i) => i % 4 === 0),
];
const configSeeds: Record<string, string> = {};
for (const file of configFiles) configSeeds[basename(file)] = read(file);
// The same documents as JSON, which the API takes too.
for (const file of configFiles.slice(0, 6))
  configSeeds[basename(file).replace(/\.yaml$/, ".json")] = JSON.stringify(
    parseAllDocuments(read(file))
      .map((doc) => doc.toJSON())
      .filter(Boolean)[0],
  );
writeCorpus("ingest-documents", configSeeds);

// CSRs as istio-agent and gRPC's xDS clients make them, and the kinds the CA refuses.
const tmp = mkdtempSync(join(tmpdir(), "fuzz-csr-"));
const csrSeeds: Record<string, string | Uint8Array> = {};
const keys: Record<string, string[]> = {
  rsa2048: ["-newkey", "rsa:2048"],
  "ec-p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
  "ec-p384": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:secp384r1"],
  rsa1024: ["-newkey", "rsa:1024"],
  ed25519: ["-newkey", "ed25519"],
};
for (const [name, args] of Object.entries(keys)) {
  const out = join(tmp, `${name}.csr`);
  execFileSync(
    "openssl",
    [
      "req",
      "-new",
      ...args,
      "-nodes",
      "-keyout",
      join(tmp, `${name}.key`),
      "-out",
      out,
      "-subj",
      "/O=cluster.local",
      "-addext",
      "subjectAltName=URI:spiffe://cluster.local/ns/default/sa/bookinfo-productpage",
    ],
    { stdio: "ignore" },
  );
  csrSeeds[`${name}.pem`] = readFileSync(out, "utf8");
  csrSeeds[`${name}.der`] = new Uint8Array(execFileSync("openssl", ["req", "-in", out, "-outform", "DER"]));
}
rmSync(tmp, { recursive: true });
writeCorpus("ca-csr", csrSeeds);

// AdmissionReviews: the webhook's injection cases (a bare Pod wrapped as
// the API server sends it), and a validation review of each sample document.
const reviewOf = (kind: object, namespace: string, object: unknown) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: { uid: "fuzz", kind, resource: {}, namespace, operation: "CREATE", object },
});
const webhookSeeds: Record<string, string> = {};
for (const file of list("services/webhook/test/testdata/inject", ".in.yaml")) {
  const doc = parse(read(file));
  const review =
    doc.kind === "AdmissionReview"
      ? doc
      : reviewOf({ group: "", version: "v1", kind: "Pod" }, doc.metadata?.namespace ?? "default", doc);
  webhookSeeds[basename(file).replace(/\.in\.yaml$/, ".json")] = JSON.stringify(review);
}
for (const file of list("samples/bookinfo/networking", ".yaml").slice(0, 8)) {
  const doc = parseAllDocuments(read(file))[0]!.toJSON();
  const [group, version] = String(doc.apiVersion).split("/");
  webhookSeeds[`validate-${basename(file, ".yaml")}.json`] = JSON.stringify(
    reviewOf({ group, version, kind: doc.kind }, "default", doc),
  );
}
writeCorpus("webhook-admission", webhookSeeds);

// Settings: each service's environment in compose.yaml, and the agent's as the injector writes it.
const envFile = (env: Record<string, unknown>) =>
  Object.entries(env)
    .map(([name, value]) => `${name}=${typeof value === "string" ? value : JSON.stringify(value)}\n`)
    .join("");
const compose = parse(read("compose.yaml"), { merge: true });
const settingsSeeds: Record<string, string> = {};
for (const [name, service] of Object.entries(compose.services as Record<string, { environment?: object }>)) {
  if (service.environment)
    settingsSeeds[`compose-${name}.env`] = envFile(service.environment as Record<string, unknown>);
}
const pod = parse(read("services/webhook/test/testdata/inject/details-v1.pod.out.yaml"));
const sidecar = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find(
  (c: { name: string }) => c.name === "istio-proxy",
);
settingsSeeds["injected-istio-proxy.env"] = envFile(
  Object.fromEntries(
    (sidecar.env as { name: string; value?: string }[])
      .filter((e) => e.value !== undefined)
      .map((e) => [e.name, e.value]),
  ),
);
writeCorpus("settings", settingsSeeds);

writeCorpus("push-ads", adsSeeds());
writeCorpus("agent-xds-proxy", proxySeeds());
writeCorpus("agent-sds", sdsSeeds());
