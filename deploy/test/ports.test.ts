import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  baseSettings,
  DEFAULT_PORTS,
  portSetting,
  type StartedService,
  startService,
} from "@sextant/runtime";
import { CONTRACTS } from "../src/contracts.js";
import { NATS_SERVICES } from "../src/nats-users.js";
import {
  containerOf,
  deploymentOf,
  envOf,
  envValue,
  find,
  NAMESPACE,
  type Probe,
  render,
  SERVICES,
  type ServiceObject,
  type Workload,
} from "./helpers.js";

const production = render("overlays/production");

/** The container port a probe or Service names, as a number. */
function portNumber(workload: Workload, port: string | number): number {
  if (typeof port === "number") return port;
  const found = containerOf(workload).ports?.find((p) => p.name === port);
  assert.ok(found, `${workload.metadata.name} has no container port named ${port}`);
  return found.containerPort;
}

/** host and port of an address such as `sextant-ca.istio-system.svc:8060` or a URL. */
function hostAndPort(address: string): { host: string; port: number } {
  const url = new URL(address.includes("://") ? address : `tcp://${address}`);
  return { host: url.hostname, port: Number(url.port) };
}

/** Asserts that address names a Service of the render, on a port it exposes, and returns that port. */
function assertServiceAddress(address: string): number {
  const { host, port } = hostAndPort(address);
  const [name, namespace, svc] = host.split(".");
  assert.equal(namespace, NAMESPACE, address);
  assert.equal(svc, "svc", address);
  const service = find<ServiceObject>(production, "Service", name ?? "");
  assert.ok(
    service.spec.ports.some((p) => p.port === port),
    `${address}: Service ${name} has no port ${port}`,
  );
  return port;
}

describe("ports and probes are the ones the services' code serves", () => {
  // The health server every service runs (runService from @sextant/runtime),
  // started here with no runners, so that the probe paths are checked
  // against the real routes rather than against a copy of them.
  let health: StartedService<unknown>;
  before(async () => {
    health = await startService(
      {
        service: "probe-check",
        contract: { ports: {} },
        settings: baseSettings.extend({ HTTP_PORT: portSetting(0) }),
        runners: () => [],
      },
      { OTEL_SDK_DISABLED: "true", LOG_LEVEL: "silent" },
    );
  });
  after(async () => {
    await health?.stop();
  });

  for (const service of SERVICES) {
    it(`${service}: container ports are its contract's (DEFAULT_PORTS.${service}), none set otherwise`, () => {
      const deployment = deploymentOf(production, service);
      const container = containerOf(deployment);
      const ports = Object.values(CONTRACTS[service].ports);
      assert.deepEqual(ports.map((p) => p.port).sort(), Object.values(DEFAULT_PORTS[service]).sort());
      // A port off by default is listed only where its setting turns it on.
      const open = ports
        .filter((p) => !p.enabledBy || envOf(container, p.enabledBy)?.value === "true")
        .map((p) => p.port);
      assert.deepEqual((container.ports ?? []).map((p) => p.containerPort).sort(), open.sort());
      assert.equal(portNumber(deployment, "http"), DEFAULT_PORTS[service].http);
      // The code's defaults are the ports: a *_PORT variable would move the server away from them.
      assert.deepEqual(
        (container.env ?? []).map((v) => v.name).filter((name) => name.endsWith("_PORT")),
        [],
      );
    });

    it(`${service}: probes ask the health port for routes the health server answers`, async () => {
      const deployment = deploymentOf(production, service);
      const container = containerOf(deployment);
      const probes: Array<[string, Probe | undefined]> = [
        ["readiness", container.readinessProbe],
        ["liveness", container.livenessProbe],
      ];
      assert.equal(container.readinessProbe?.httpGet?.path, "/ready", "readiness is /ready");
      for (const [kind, probe] of probes) {
        const get = probe?.httpGet;
        assert.ok(get, `${service} has no HTTP ${kind} probe`);
        assert.equal(portNumber(deployment, get.port), DEFAULT_PORTS[service].http, `${kind} probe port`);
        // /ready answers 200 here because this server has no pending conditions.
        const answer = await fetch(`http://127.0.0.1:${health.httpPort}${get.path}`);
        assert.equal(answer.status, 200, `${kind} probe path ${get.path}`);
      }
    });
  }

  it("push exposes mTLS xDS, ca CreateCertificate, webhook HTTPS on 443", () => {
    const port = (service: (typeof SERVICES)[number], name: string) =>
      portNumber(deploymentOf(production, service), name);
    assert.equal(port("push", "tls-xds"), DEFAULT_PORTS.push.xdsTls);
    assert.equal(port("ca", "tls-grpc"), DEFAULT_PORTS.ca.grpc);
    assert.equal(port("webhook", "https-webhook"), DEFAULT_PORTS.webhook.https);
    const webhook = find<ServiceObject>(production, "Service", "sextant-webhook");
    assert.deepEqual(
      webhook.spec.ports.find((p) => p.port === 443),
      { name: "https-webhook", port: 443, targetPort: "https-webhook" },
    );
  });

  // Plaintext xDS serves every proxy's config to whoever reaches it and proves
  // no identity: production has none; dev keeps it for agentless clients.
  it("push's plaintext xDS is off in production and on in dev", () => {
    const dev = render("overlays/dev");
    for (const [objects, enabled] of [
      [production, false],
      [dev, true],
    ] as const) {
      const container = containerOf(deploymentOf(objects, "push"));
      assert.equal(envValue(container, "XDS_PLAINTEXT_ENABLED"), String(enabled));
      const service = find<ServiceObject>(objects, "Service", "sextant-push");
      assert.equal(
        service.spec.ports.some((p) => p.port === DEFAULT_PORTS.push.xds),
        enabled,
        `Service port ${DEFAULT_PORTS.push.xds}`,
      );
      assert.equal(
        (container.ports ?? []).some((p) => p.containerPort === DEFAULT_PORTS.push.xds),
        enabled,
        `container port ${DEFAULT_PORTS.push.xds}`,
      );
    }
  });

  it("the addresses services give each other are Services on the ports the code listens on", () => {
    const env = (service: (typeof SERVICES)[number], name: string) =>
      envValue(containerOf(deploymentOf(production, service)), name);
    assert.equal(assertServiceAddress(env("push", "CA_ADDR")), DEFAULT_PORTS.ca.grpc);
    assert.equal(assertServiceAddress(env("webhook", "CA_ADDR")), DEFAULT_PORTS.ca.grpc);
    assert.equal(assertServiceAddress(env("webhook", "DISCOVERY_ADDRESS")), DEFAULT_PORTS.push.xdsTls);
    assert.equal(assertServiceAddress(env("discovery", "INGEST_URL")), DEFAULT_PORTS.ingest.http);
    for (const service of SERVICES) {
      const container = containerOf(deploymentOf(production, service));
      if (!(NATS_SERVICES as readonly string[]).includes(service)) {
        // A service that declares no bucket or subject is given no NATS to connect to.
        assert.deepEqual(
          (container.env ?? []).map((v) => v.name).filter((name) => name.startsWith("NATS_")),
          [],
          service,
        );
        continue;
      }
      for (const url of env(service, "NATS_URL").split(",")) {
        assert.equal(assertServiceAddress(url), DEFAULT_PORTS.nats, `${service} NATS_URL`);
      }
    }
  });

  it("NATS listens for clients on DEFAULT_PORTS.nats", () => {
    const nats = find<Workload>(production, "StatefulSet", "sextant-nats");
    assert.equal(portNumber(nats, "tcp-client"), DEFAULT_PORTS.nats);
  });
});
