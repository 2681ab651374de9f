// Auto-registration against an ingest that authenticates its API
// (API_AUTH=tokens), as `npm run demo` and compose run it: discovery shows
// the token of INGEST_TOKEN_FILE, whose entry allows only create and delete
// of WorkloadEntries, and picks up a rotated token without a restart.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Subjects } from "@sextant/bus";
import { RegistrationEventType } from "@sextant/proto";
import { eventually } from "@sextant/testing";
import { type DiscoveryFixture, startDiscovery, startIngest, startNatsWithClient } from "./harness.js";

const GRACE_MS = 300;
const sha256 = (token: string) => createHash("sha256").update(token).digest("hex");
const newToken = () => randomBytes(32).toString("hex");

describe("auto-registration through an ingest that authenticates its API (INGEST_TOKEN_FILE)", () => {
  const dir = mkdtempSync(join(tmpdir(), "sextant-discovery-auth-"));
  const tokensFile = join(dir, "api-tokens.yaml");
  const discoveryTokenFile = join(dir, "discovery-token");
  const adminToken = newToken();
  const admin = { authorization: `Bearer ${adminToken}` };
  /** Ingest's token file: the test's admin and discovery's narrow entry. */
  const writeTokens = (discoveryToken: string) =>
    writeFileSync(
      tokensFile,
      `- {subject: test-admin, token_sha256: ${sha256(adminToken)}, namespaces: ["*"], verbs: ["*"], kinds: ["*"]}
- {subject: discovery, token_sha256: ${sha256(discoveryToken)}, namespaces: ["*"], verbs: [create, delete], kinds: [WorkloadEntry]}
`,
    );
  let client: Awaited<ReturnType<typeof startNatsWithClient>>;
  let ingest: Awaited<ReturnType<typeof startIngest>>;
  let ingestUrl: string;
  let discovery: DiscoveryFixture;

  before(async () => {
    const discoveryToken = newToken();
    writeFileSync(discoveryTokenFile, `${discoveryToken}\n`);
    writeTokens(discoveryToken);
    client = await startNatsWithClient();
    ingest = await startIngest(client.nats.url, { API_AUTH: "tokens", API_TOKENS_FILE: tokensFile });
    ingestUrl = ingest.url;
    discovery = await startDiscovery(client.nats.url, {
      INGEST_URL: ingestUrl,
      INGEST_TOKEN_FILE: discoveryTokenFile,
      WORKLOAD_ENTRY_GRACE_PERIOD_MS: String(GRACE_MS),
    });
    const response = await fetch(`${ingestUrl}/v1/apply`, {
      method: "POST",
      headers: admin,
      body: `apiVersion: networking.istio.io/v1
kind: WorkloadGroup
metadata: {name: ratings-vm, namespace: vms}
spec:
  metadata: {labels: {app: ratings}}
  template: {ports: {http: 9080}, serviceAccount: ratings-vm}
`,
    });
    assert.equal(response.status, 200, await response.text());
  });
  after(async () => {
    await discovery?.stop();
    await ingest?.stop();
    await client?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A registration event of a proxy of the group, as push publishes it after verifying its certificate. */
  const event = (type: RegistrationEventType, address: string) => {
    const registration = {
      type,
      workloadGroup: "ratings-vm",
      namespace: "vms",
      proxyId: `sidecar~${address}~ratings-vm.vms~vms.svc.cluster.local`,
      address,
      labels: {},
      serviceAccount: "ratings-vm",
      network: "",
      locality: undefined,
      identity: { trustDomain: "cluster.local", namespace: "vms", serviceAccount: "ratings-vm" },
      replica: "push-0",
      at: new Date(),
    };
    return registration;
  };
  const entryStatus = async (address: string) =>
    (await fetch(`${ingestUrl}/v1/config/WorkloadEntry/vms/ratings-vm-${address}`, { headers: admin }))
      .status;

  /** Connects a proxy (again on every poll: discovery may not have read the group yet), waits for its entry, then disconnects it and waits for the entry to go. */
  async function registerAndRemove(address: string): Promise<void> {
    const subject = client.bus.subject(Subjects.registration);
    await eventually(
      async () => {
        subject.publish(event(RegistrationEventType.REGISTRATION_EVENT_TYPE_CONNECTED, address));
        return (await entryStatus(address)) === 200;
      },
      { intervalMs: 200, message: `discovery registered ${address} with its token` },
    );
    subject.publish(event(RegistrationEventType.REGISTRATION_EVENT_TYPE_DISCONNECTED, address));
    await eventually(async () => (await entryStatus(address)) === 404, {
      message: `discovery removed ${address} with its token`,
    });
  }

  it("creates and deletes the WorkloadEntry with its token", async () => {
    await registerAndRemove("10.4.0.1");
  });

  it("shows the new token once its file is rewritten (a rotated projected token), without a restart", async () => {
    const rotated = newToken();
    writeTokens(rotated);
    writeFileSync(discoveryTokenFile, rotated);
    await registerAndRemove("10.4.0.2");
  });
});
