import { webcrypto, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Bus, connectBus } from "@sextant/bus";
import { createLogger, type Logger } from "@sextant/observability";
import {
  freePort,
  type NatsServerFixture,
  type ServiceProcess,
  startNatsServer,
  startServiceProcess,
} from "@sextant/testing";
import { caTrustBundleSource, WorkloadIdentity, type WorkloadIdentityOptions, x509 } from "../src/index.js";

/** A bootstrap token and the identity the CA grants for it. */
export interface TokenGrant {
  namespace: string;
  serviceAccount: string;
}

/** A real nats-server and the real CA service as a process, with bootstrap tokens. */
export interface CaFixture {
  readonly nats: NatsServerFixture;
  /** The CA process now running. */
  readonly ca: ServiceProcess;
  /** localhost:<GRPC_PORT>. */
  readonly address: string;
  /** The root of the CA's current CA_CERTS_DIR. */
  readonly rootPem: string;
  /** The CA's /metrics text. */
  metrics(): Promise<string>;
  /** Stops the CA and starts it again on the same port, with a fresh CA_CERTS_DIR (a new root). */
  restartWithNewRoot(): Promise<void>;
  /** A bus client on the fixture's NATS. */
  bus(): Promise<Bus>;
  dispose(): Promise<void>;
}

/** Logs of the code under test: silent unless TEST_LOG_LEVEL says otherwise. */
export const testLogger: Logger = createLogger({
  service: "identity-test",
  level: (process.env.TEST_LOG_LEVEL ?? "silent") as "silent",
});

/** Starts nats-server and the CA (authenticators: mesh-certificate, bootstrap-token). */
export async function startCa(tokens: Record<string, TokenGrant>): Promise<CaFixture> {
  const nats = await startNatsServer();
  const work = mkdtempSync(join(tmpdir(), "sextant-identity-test-"));
  writeFileSync(join(work, "tokens.json"), JSON.stringify(tokens));
  const port = await freePort();
  let generation = 0;
  const env = () => ({
    NATS_URL: nats.url,
    GRPC_PORT: String(port),
    CA_CERTS_DIR: join(work, `cacerts-${generation}`),
    BOOTSTRAP_TOKENS_FILE: join(work, "tokens.json"),
    CA_AUTHENTICATORS: "mesh-certificate,bootstrap-token",
    // Info level: the audit lines say which authenticator vouched for each issuance.
    LOG_LEVEL: "info",
  });
  let ca = await startServiceProcess("ca", env());
  const buses: Bus[] = [];
  const fixture: CaFixture = {
    nats,
    get ca() {
      return ca;
    },
    address: `localhost:${port}`,
    get rootPem() {
      return readFileSync(join(work, `cacerts-${generation}`, "root-cert.pem"), "utf8");
    },
    metrics: async () => (await fetch(`http://127.0.0.1:${ca.httpPort}/metrics`)).text(),
    restartWithNewRoot: async () => {
      await ca.stop();
      generation++;
      ca = await startServiceProcess("ca", env());
    },
    bus: async () => {
      const bus = await connectBus({ url: nats.url, name: "identity-test", logger: testLogger });
      buses.push(bus);
      return bus;
    },
    dispose: async () => {
      for (const bus of buses) await bus.close();
      await ca.stop();
      await nats.dispose();
    },
  };
  return fixture;
}

/** The audit lines of the CA's output: one per issued certificate. */
export function auditLines(
  ca: ServiceProcess,
): Array<{ identity: string; authenticator: string; serial: string }> {
  return ca
    .output()
    .split("\n")
    .filter((line) => line.includes('"audit":"certificate_issued"'))
    .map((line) => JSON.parse(line));
}

/**
 * Whether a chain (leaf first) verifies up to one of the roots: each
 * certificate is issued and signed by the next, the last by a root.
 */
export function chainsToRoots(chainPem: string, rootsPem: readonly string[]): boolean {
  const chain = (chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (pem) => new X509Certificate(pem),
  );
  const roots = rootsPem.map((pem) => new X509Certificate(pem));
  for (let i = 0; i + 1 < chain.length; i++) {
    const [child, parent] = [chain[i]!, chain[i + 1]!];
    if (!child.checkIssued(parent) || !child.verify(parent.publicKey)) return false;
  }
  const top = chain[chain.length - 1];
  return !!top && roots.some((root) => top.checkIssued(root) && top.verify(root.publicKey));
}

/** The URI SAN text of a PEM certificate's leaf. */
export function leafSans(chainPem: string): string | undefined {
  return new X509Certificate(chainPem).subjectAltName;
}

/** A self-signed CA certificate (PEM), to stand for another root in a trust bundle. */
export async function selfSignedRoot(name = "other-root"): Promise<string> {
  const algorithm = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const keys = (await webcrypto.subtle.generateKey(algorithm, false, [
    "sign",
    "verify",
  ])) as webcrypto.CryptoKeyPair;
  const certificate = await x509.X509CertificateGenerator.createSelfSigned({
    keys: keys as never,
    name: `CN=${name}`,
    signingAlgorithm: algorithm,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  return certificate.toString("pem");
}

/**
 * A WorkloadIdentity in namespace "local" of cluster.local against the
 * fixture's CA: no jitter, a 1 h TTL and the CA's trust bundle unless told.
 */
export function workloadIdentity(
  fixture: CaFixture,
  options: Pick<WorkloadIdentityOptions, "serviceAccount" | "token"> & Partial<WorkloadIdentityOptions>,
): WorkloadIdentity {
  return new WorkloadIdentity({
    caAddress: fixture.address,
    caRootPem: fixture.rootPem,
    trustDomain: "cluster.local",
    namespace: "local",
    ttlSeconds: 3600,
    gracePeriodRatioJitter: 0,
    trust: caTrustBundleSource({
      caAddress: fixture.address,
      caRootPem: fixture.rootPem,
      logger: testLogger,
    }),
    logger: testLogger,
    ...options,
  });
}
