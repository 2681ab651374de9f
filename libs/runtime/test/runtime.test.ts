import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { createLogger } from "@sextant/observability";
import { z } from "zod";
import {
  baseSettings,
  durationSecondsSetting,
  parseSettings,
  portSetting,
  type Runner,
  RunnerGroup,
  readNatsClientSettings,
  SerialTasks,
  SettingsError,
  startService,
} from "../src/index.js";

const logger = createLogger({ service: "runtime-test", level: "silent" });

describe("settings", () => {
  const schema = baseSettings.extend({ HTTP_PORT: portSetting(8080) });

  it("applies defaults", () => {
    const settings = parseSettings(schema, {});
    assert.equal(settings.NATS_URL, "nats://127.0.0.1:4222");
    assert.equal(settings.HTTP_PORT, 8080);
    assert.equal(settings.LOG_LEVEL, "info");
  });

  it("names every bad variable and its value", () => {
    try {
      parseSettings(schema, { NATS_URL: "http://x", HTTP_PORT: "70000", LOG_LEVEL: "loud" });
      assert.fail("expected a SettingsError");
    } catch (error) {
      assert.ok(error instanceof SettingsError);
      assert.equal(error.problems.length, 3);
      assert.match(
        error.message,
        /NATS_URL: must be one or more comma-separated nats:\/\/ URLs \(got "http:\/\/x"\)/,
      );
      assert.match(error.message, /HTTP_PORT: .*65535.* \(got "70000"\)/);
      assert.match(error.message, /LOG_LEVEL: .* \(got "loud"\)/);
    }
  });

  it("reads durations as plain seconds or in Go's (and Istio's) syntax", () => {
    const durations = z.object({ TTL: durationSecondsSetting("24h") });
    const seconds = (TTL?: string) => parseSettings(durations, { TTL }).TTL;
    assert.equal(seconds(), 86_400);
    assert.equal(seconds("3600"), 3600);
    assert.equal(seconds("90s"), 90);
    assert.equal(seconds("1h30m"), 5400);
    assert.equal(seconds("24h0m0s"), 86_400);
    assert.equal(seconds("2160h"), 7_776_000);
    assert.equal(seconds("90d"), 7_776_000);
    for (const bad of ["0", "0s", "-5s", "forever", "1500ms", ""])
      assert.throws(() => seconds(bad), /TTL: must be a positive duration/, bad);
  });

  it("takes NATS's CA only from a file that exists", () => {
    const caFile = fileURLToPath(import.meta.url);
    assert.equal(readNatsClientSettings({ NATS_TLS_CA_FILE: caFile }).NATS_TLS_CA_FILE, caFile);
    assert.equal(readNatsClientSettings({}).NATS_TLS_CA_FILE, undefined);
    assert.throws(
      () => readNatsClientSettings({ NATS_TLS_CA_FILE: "/nonexistent/ca.crt" }),
      /NATS_TLS_CA_FILE: no such file \(got "\/nonexistent\/ca.crt"\)/,
    );
  });
});

describe("runners", () => {
  const recorder = (log: string[], name: string, failStart = false): Runner => ({
    name,
    start: async () => {
      if (failStart) throw new Error(`${name} failed`);
      log.push(`start ${name}`);
    },
    close: async () => {
      log.push(`close ${name}`);
    },
  });

  it("start in order and close in reverse", async () => {
    const log: string[] = [];
    const group = new RunnerGroup(logger);
    await group.start([recorder(log, "bus"), recorder(log, "watch"), recorder(log, "server")]);
    await group.close();
    assert.deepEqual(log, [
      "start bus",
      "start watch",
      "start server",
      "close server",
      "close watch",
      "close bus",
    ]);
  });

  it("close what started when a later runner fails", async () => {
    const log: string[] = [];
    const group = new RunnerGroup(logger);
    await assert.rejects(
      group.start([recorder(log, "bus"), recorder(log, "bad", true), recorder(log, "never")]),
      /bad failed/,
    );
    assert.deepEqual(log, ["start bus", "close bus"]);
  });
});

describe("startService", () => {
  it("serves /ready from the runners' readiness and stops cleanly", async () => {
    let release!: () => void;
    const service = await startService(
      {
        service: "demo",
        contract: { ports: {} },
        settings: baseSettings.extend({ HTTP_PORT: portSetting(0) }),
        runners: ({ readiness }) => [
          {
            name: "sync",
            start: async () => {
              readiness.require("initial sync");
              release = () => readiness.done("initial sync");
            },
            close: async () => {},
          },
        ],
      },
      { HTTP_PORT: "0", LOG_LEVEL: "silent", OTEL_SDK_DISABLED: "true" },
    );
    try {
      const url = `http://127.0.0.1:${service.httpPort}/ready`;
      assert.equal((await fetch(url)).status, 503);
      release();
      assert.equal((await fetch(url)).status, 200);
    } finally {
      await service.stop();
    }
    await assert.rejects(fetch(`http://127.0.0.1:${service.httpPort}/ready`));
  });

  it("is not ready while a runner is still starting, even one that registers no condition", async () => {
    let pendingDuringStart: string[] = [];
    const service = await startService(
      {
        service: "demo",
        contract: { ports: {} },
        settings: baseSettings.extend({ HTTP_PORT: portSetting(0) }),
        runners: ({ readiness }) => [
          {
            name: "probe",
            start: async () => {
              pendingDuringStart = readiness.pending;
            },
            close: async () => {},
          },
        ],
      },
      { HTTP_PORT: "0", LOG_LEVEL: "silent", OTEL_SDK_DISABLED: "true" },
    );
    try {
      assert.deepEqual(pendingDuringStart, ["starting"]);
      assert.deepEqual(service.readiness.pending, []);
      assert.equal((await fetch(`http://127.0.0.1:${service.httpPort}/ready`)).status, 200);
    } finally {
      await service.stop();
    }
  });

  it("hands runners the shutdown signal, so a start that would wait forever gives up when it fires", async () => {
    const shutdown = new AbortController();
    let began = (): void => {};
    const startBegan = new Promise<void>((resolve) => {
      began = resolve;
    });
    const starting = startService(
      {
        service: "demo",
        contract: { ports: {} },
        settings: baseSettings.extend({ HTTP_PORT: portSetting(0) }),
        runners: ({ shutdown: signal }) => [
          {
            name: "waits-for-a-ca",
            // Waits for something that never comes, unless the process is told to stop.
            start: () =>
              new Promise<void>((_, reject) => {
                signal.addEventListener("abort", () => reject(new Error("stopped while waiting")), {
                  once: true,
                });
                began();
              }),
            close: async () => {},
          },
        ],
      },
      { HTTP_PORT: "0", LOG_LEVEL: "silent", OTEL_SDK_DISABLED: "true" },
      shutdown.signal,
    );
    // The signal comes while the runner waits, as a SIGTERM during start-up would.
    await startBegan;
    shutdown.abort();
    await assert.rejects(starting, /stopped while waiting/);
  });

  it("refuses to start with a bad setting", async () => {
    await assert.rejects(
      startService(
        {
          service: "demo",
          contract: { ports: {} },
          settings: baseSettings.extend({ HTTP_PORT: portSetting(0) }),
          runners: () => [],
        },
        { HTTP_PORT: "not-a-port" },
      ),
      (error: unknown) => error instanceof SettingsError && /HTTP_PORT/.test(error.message),
    );
  });
});

describe("SerialTasks", () => {
  it("runs tasks one at a time in order, and keeps going after a failure", async () => {
    const log: string[] = [];
    const errors: unknown[] = [];
    const tasks = new SerialTasks((error) => errors.push(error));
    const slow = (name: string, ms: number) => async () => {
      log.push(`start ${name}`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      log.push(`end ${name}`);
    };
    void tasks.run(slow("a", 20));
    void tasks.run(() => {
      throw new Error("b failed");
    });
    await tasks.run(slow("c", 1));
    assert.deepEqual(log, ["start a", "end a", "start c", "end c"]);
    assert.match(String(errors[0]), /b failed/);
  });
});
