// deploy/nats/auth.conf loaded into a real nats-server: each service's user
// does what its code does through @sextant/bus, and is refused the rest.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import {
  type BucketSpec,
  Buckets,
  type Bus,
  type BusOptions,
  type BusRunnerOptions,
  busRunner,
  connectBus,
  type ReceivedEvent,
  Subjects,
  UndeclaredUseError,
  type WatchEvent,
} from "@sextant/bus";
import { pushContract } from "@sextant/push/contract";
import { SettingsError } from "@sextant/runtime";
import { eventually, type NatsServerFixture, startNatsServer } from "@sextant/testing";
import { CONTRACTS } from "../src/contracts.js";
import {
  NATS_SERVICES,
  type NatsService,
  natsInboxPrefix,
  natsPasswordVariable,
  natsUser,
} from "../src/nats-users.js";
import { DEPLOY_DIR, silentLogger } from "./helpers.js";

const logger = silentLogger<BusOptions["logger"]>();
const password = (service: NatsService) => `password-of-${service}`;

/** Every bucket of the catalog, by name. */
const BUCKETS = new Map<string, BucketSpec<unknown>>(
  Object.values(Buckets).map((spec): [string, BucketSpec<unknown>] => [
    spec.name,
    spec as BucketSpec<unknown>,
  ]),
);

function bucketSpec(name: string): BucketSpec<unknown> {
  const spec = BUCKETS.get(name);
  assert.ok(spec, `no spec for bucket ${name}`);
  return spec;
}

/** A value for any bucket: a config resource in the config-typed ones, an empty message elsewhere. */
function valueFor(spec: BucketSpec<unknown>, name: string, bytes = 0): unknown {
  const empty = spec.codec.decode(new Uint8Array());
  return spec.codec === Buckets.config.codec
    ? { ...(empty as object), name, spec: { blob: "x".repeat(bytes) } }
    : empty;
}

/** A writer of the bucket, per the services' contracts. */
function writerOf(bucket: string): NatsService {
  const writer = NATS_SERVICES.find((service) => CONTRACTS[service].writes.includes(bucket));
  assert.ok(writer, `nobody writes ${bucket}`);
  return writer;
}

const PERMISSION = /permissions violation/i;

describe("NATS permissions against a real nats-server", () => {
  let nats: NatsServerFixture;
  const buses = new Map<NatsService, Bus>();
  const bus = (service: NatsService): Bus => {
    const connected = buses.get(service);
    assert.ok(connected, `${service} is not connected`);
    return connected;
  };
  const connect = (service: NatsService, name: string = service) =>
    connectBus({
      url: nats.url,
      name,
      logger,
      user: natsUser(service),
      password: password(service),
      inboxPrefix: natsInboxPrefix(service),
    });

  before(async () => {
    nats = await startNatsServer({
      // The committed file, as the ConfigMap carries it; passwords from the environment, as in the pod.
      config: readFileSync(join(DEPLOY_DIR, "nats", "auth.conf"), "utf8"),
      env: Object.fromEntries(NATS_SERVICES.map((s) => [natsPasswordVariable(s), password(s)])),
    });
    for (const service of NATS_SERVICES) buses.set(service, await connect(service));
  });
  after(async () => {
    for (const connected of buses.values()) await connected.close();
    await nats?.dispose();
  });

  it("lets each service's user in (JetStream checked), and nobody without the password", async () => {
    for (const service of NATS_SERVICES) assert.equal(bus(service).nc.isClosed(), false);
    await assert.rejects(
      connectBus({ url: nats.url, name: "intruder", logger, user: "push", password: "guess" }),
      /authorization/i,
    );
    await assert.rejects(connectBus({ url: nats.url, name: "anonymous", logger }), /authorization/i);
  });

  it("a service's bus runner logs in with NATS_USER, NATS_PASSWORD and NATS_INBOX_PREFIX from its environment", async () => {
    // As in the pod: the composition root passes only the URL and the contract.
    const readiness = { require() {}, done() {} } as unknown as BusRunnerOptions["readiness"];
    const saved = { ...process.env };
    try {
      Object.assign(process.env, {
        NATS_USER: natsUser("push"),
        NATS_PASSWORD: password("push"),
        NATS_INBOX_PREFIX: natsInboxPrefix("push"),
      });
      const runner = busRunner({
        url: nats.url,
        name: "push-runner",
        logger,
        readiness,
        service: "push",
        contract: pushContract,
      });
      await runner.start();
      await runner.bus.bucket(Buckets.config);
      // The runner's bus refuses what push does not declare before NATS sees it...
      await assert.rejects(runner.bus.bucket(Buckets.configStatus), UndeclaredUseError);
      await runner.close();
      // ...and NATS refuses it to push's user anyway: the runner logged in as push.
      const asPush = await connectBus({
        url: nats.url,
        name: "push-unchecked",
        logger,
        user: natsUser("push"),
        password: password("push"),
        inboxPrefix: natsInboxPrefix("push"),
      });
      await assert.rejects(asPush.bucket(Buckets.configStatus), PERMISSION);
      await asPush.close();
      // A user without a password stops the service as a bad setting would (exit code 2).
      delete process.env.NATS_PASSWORD;
      assert.throws(
        () =>
          busRunner({ url: nats.url, name: "x", logger, readiness, service: "push", contract: pushContract }),
        SettingsError,
      );
    } finally {
      for (const name of ["NATS_USER", "NATS_PASSWORD", "NATS_INBOX_PREFIX"]) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
  });

  for (const service of NATS_SERVICES) {
    const { writes, reads } = CONTRACTS[service];
    if (writes.length === 0 && reads.length === 0) continue;

    it(`${service} opens, puts, updates, watches and deletes in the buckets it writes`, async () => {
      for (const name of writes) {
        const spec = bucketSpec(name);
        const bucket = await bus(service).bucket(spec);
        const key = `${service}.probe`;
        const created = await bucket.put(key, valueFor(spec, "first"));
        assert.equal(created.changed, true);
        assert.ok(await bucket.get(key));
        const events: WatchEvent<unknown>[] = [];
        const watch = await bucket.watch((event) => void events.push(event), { filter: `${service}.>` });
        await watch.ready;
        assert.ok(events.some((e) => e.type === "put" && e.key === key && e.replay));
        if (spec.codec === Buckets.config.codec) {
          await bucket.update(key, () => valueFor(spec, "second"));
          await eventually(() => events.some((e) => e.type === "put" && !e.replay), {
            message: `${name} live put`,
          });
        }
        assert.equal(await bucket.delete(key), true);
        await eventually(() => events.some((e) => e.type === "delete" && e.key === key), {
          message: `${name} live delete`,
        });
        await watch.stop();
      }
    });

    if (reads.length > 0) {
      it(`${service} gets, watches and lists the buckets it reads, as their writers change them`, async () => {
        for (const name of reads) {
          const spec = bucketSpec(name);
          const writer = await bus(writerOf(name)).bucket(spec);
          await writer.put(`seed.${service}`, valueFor(spec, "seed"));
          const bucket = await bus(service).bucket(spec);
          assert.ok(await bucket.get(`seed.${service}`), `${service} gets from ${name}`);
          const keys: string[] = [];
          const watch = await bucket.watch((event) => void keys.push(`${event.type} ${event.key}`));
          await watch.ready;
          assert.ok(keys.includes(`put seed.${service}`), `${service} replays ${name}`);
          await writer.delete(`seed.${service}`);
          await eventually(() => keys.includes(`delete seed.${service}`), {
            message: `${service} follows ${name}`,
          });
          await watch.stop();
          await bucket.list("seed.>");
        }
      });
    }
  }

  it("a reader follows a replay large enough that nats-server asks it for flow control", async () => {
    // ~10 MB of values: nats-server then sends flow-control requests, which
    // the reader must be allowed to answer ($JS.FC.<stream>.>) or it stalls.
    const spec = bucketSpec(Buckets.config.name);
    const writer = await bus("ingest").bucket(spec);
    const count = 200;
    for (let i = 0; i < count; i++) await writer.put(`large.${i}`, valueFor(spec, `large-${i}`, 50_000));
    const reader = await bus("push").bucket(spec);
    let seen = 0;
    let replayed = false;
    const watch = await reader.watch(
      () => {
        seen++;
      },
      { filter: "large.>" },
    );
    // Not awaited directly: a stalled consumer must fail the test, not hang it.
    void watch.ready.then(() => {
      replayed = true;
    });
    await eventually(() => replayed && seen === count, {
      timeoutMs: 60_000,
      message: `push's replay of ${count} large values`,
    });
    await watch.stop();
  });

  it("push's NACKs reach one ingest replica (queue group ingest), its registrations every discovery replica", async () => {
    const nacks: ReceivedEvent<unknown>[] = [];
    const secondIngest = await connect("ingest", "ingest-2");
    const secondDiscovery = await connect("discovery", "discovery-2");
    try {
      for (const replica of [bus("ingest"), secondIngest]) {
        replica.subject(Subjects.nack).subscribe((event) => void nacks.push(event), { queue: "ingest" });
      }
      const registrations = [0, 0];
      bus("discovery")
        .subject(Subjects.registration)
        .subscribe(() => {
          registrations[0] = (registrations[0] ?? 0) + 1;
        });
      secondDiscovery.subject(Subjects.registration).subscribe(() => {
        registrations[1] = (registrations[1] ?? 0) + 1;
      });
      await Promise.all([
        bus("ingest").nc.flush(),
        secondIngest.nc.flush(),
        bus("discovery").nc.flush(),
        secondDiscovery.nc.flush(),
      ]);
      bus("push").subject(Subjects.nack).publish(Subjects.nack.codec.decode(new Uint8Array()));
      bus("push")
        .subject(Subjects.registration)
        .publish(Subjects.registration.codec.decode(new Uint8Array()));
      await bus("push").nc.flush();
      await eventually(() => nacks.length === 1 && registrations.every((n) => n === 1), {
        message: `nacks ${nacks.length}, registrations ${registrations.join("/")}`,
      });
    } finally {
      await secondIngest.close();
      await secondDiscovery.close();
    }
  });

  it("refuses every write to a bucket outside the user's own", async () => {
    for (const service of NATS_SERVICES) {
      for (const [name, spec] of BUCKETS) {
        if (CONTRACTS[service].writes.includes(name)) continue;
        // Either opening is refused (not a bucket it reads) or the put is.
        const attempt = bus(service)
          .bucket(spec)
          .then((bucket) => bucket.put(`${service}.intrusion`, valueFor(spec, "intrusion")));
        await assert.rejects(attempt, PERMISSION, `${service} wrote to ${name}`);
      }
    }
    // Nothing got through: the owners see no intrusion.
    for (const [name, spec] of BUCKETS) {
      const owner = await bus(writerOf(name)).bucket(spec);
      assert.deepEqual(
        (await owner.list("*.intrusion")).map((e) => e.key),
        [],
        name,
      );
    }
  });

  it("refuses deleting, purging or reconfiguring a bucket, even to its writer", async () => {
    for (const service of NATS_SERVICES) {
      const jsm = await jetstreamManager(bus(service).nc);
      const stream = `KV_${Buckets.config.name}`;
      await assert.rejects(jsm.streams.delete(stream), PERMISSION, `${service} deleted ${stream}`);
      await assert.rejects(jsm.streams.purge(stream), PERMISSION, `${service} purged ${stream}`);
      await assert.rejects(jsm.streams.list().next(), PERMISSION, `${service} listed streams`);
    }
  });

  it("refuses subscriptions outside the user's subjects: others' inboxes, events it does not consume", async () => {
    const refused = async (service: NatsService, subject: string, queue?: string) => {
      const subscription = bus(service).nc.subscribe(subject, queue ? { queue } : {});
      const closedWith = await subscription.closed;
      assert.match(String(closedWith), PERMISSION, `${service} subscribed to ${subject} ${queue ?? ""}`);
    };
    await refused("push", `${natsInboxPrefix("ingest")}.>`);
    await refused("ca", "_INBOX.>");
    await refused("ingest", Subjects.nack.subject);
    await refused("ingest", Subjects.nack.subject, "other");
    await refused("discovery", Subjects.nack.subject, "ingest");
    await refused("push", Subjects.registration.subject);
    await refused("ca", ">");
  });

  it("refuses publishing events the user does not produce", async () => {
    const refused = async (service: NatsService, subject: string) => {
      let refusal: string | undefined;
      // The server answers a refused publish with -ERR, which the client reports as a status.
      void (async () => {
        for await (const status of bus(service).nc.status()) {
          const text = String(status.type === "error" ? status.error : "");
          if (PERMISSION.test(text) && text.includes(subject)) {
            refusal = text;
            return;
          }
        }
      })();
      bus(service).nc.publish(subject, new Uint8Array());
      await bus(service).nc.flush();
      await eventually(() => refusal, { message: `${service} published to ${subject} unrefused` });
    };
    await refused("discovery", Subjects.nack.subject);
    await refused("ingest", Subjects.registration.subject);
    await refused("ca", `$KV.${Buckets.config.name}.VirtualService.default.reviews`);
    await refused("ca", `${natsInboxPrefix("push")}.reply`);
  });
});
