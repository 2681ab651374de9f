import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { Buckets, Subjects } from "@sextant/bus";
import { baseSettings, parseSettings } from "@sextant/runtime";
import { assertNatsServerInstalled } from "@sextant/testing";
import {
  kvStream,
  NATS_SERVICES,
  NATS_USERS_SECRET,
  type NatsService,
  natsInboxPrefix,
  natsPasswordKey,
  natsPasswordVariable,
  natsPermissions,
  natsUser,
  renderNatsAuthorization,
} from "../src/nats-users.js";
import {
  containerOf,
  DEPLOY_DIR,
  deploymentOf,
  envOf,
  envValue,
  find,
  type KubeObject,
  render,
  type Workload,
} from "./helpers.js";
import { makeNatsTls } from "./nats-tls.js";

/**
 * True if every subject `subject` stands for is within `pattern`, by NATS's
 * token rules: `*` is one token, `>` one or more trailing tokens. For a
 * literal subject that is "matches"; for a wildcard subscription it is what
 * nats-server checks against a user's allowed subjects.
 */
function within(subject: string, pattern: string): boolean {
  const s = subject.split(".");
  const p = pattern.split(".");
  for (let i = 0; i < p.length; i++) {
    const token = p[i];
    if (token === ">") return s.length > i;
    if (i >= s.length) return false;
    if (token === "*") {
      if (s[i] === ">") return false;
      continue;
    }
    if (token !== s[i]) return false;
  }
  return s.length === p.length;
}

/** Where the Secret with NATS's certificates is mounted, in the servers and (ca.crt only) the services. */
const TLS_MOUNT = "/etc/nats-tls";
const NATS_TLS_SECRET = "sextant-nats-tls";

const canPublish = (service: NatsService, subject: string) =>
  natsPermissions(service).publish.some((pattern) => within(subject, pattern));

/** nats-server's subscribe permission: `subject` alone allows any queue; `subject queue` only that queue. */
const canSubscribe = (service: NatsService, subject: string, queue?: string) =>
  natsPermissions(service).subscribe.some((entry) => {
    const [pattern = "", allowedQueue] = entry.split(" ");
    return within(subject, pattern) && (allowedQueue === undefined || allowedQueue === queue);
  });

const who = (check: (service: NatsService) => boolean) => NATS_SERVICES.filter(check);

/** Who writes each bucket and who reads it (ARCHITECTURE.md's table): the spec the permissions must meet. */
const BUCKET_ACCESS: Record<string, { writers: NatsService[]; readers: NatsService[] }> = {
  // webhook: the stored ProxyConfigs it merges into injected pods.
  [Buckets.config.name]: { writers: ["ingest"], readers: ["discovery", "push", "webhook"] },
  [Buckets.configStatus.name]: { writers: ["ingest"], readers: [] },
  [Buckets.services.name]: { writers: ["discovery"], readers: ["ingest", "push"] },
  [Buckets.endpoints.name]: { writers: ["discovery"], readers: ["ingest", "push"] },
  [Buckets.proxyStatus.name]: { writers: ["push"], readers: ["ingest"] },
  [Buckets.credentials.name]: { writers: ["discovery"], readers: ["push"] },
  [Buckets.credentialIndex.name]: { writers: ["discovery"], readers: ["ingest"] },
  [Buckets.trust.name]: { writers: ["ca"], readers: ["push"] },
  [Buckets.leases.name]: { writers: ["discovery"], readers: [] },
  // ingest records each change, push what it built and each proxy's answer (`sextantctl trace`).
  [Buckets.traces.name]: { writers: ["ingest", "push"], readers: [] },
  // Every service that connects to NATS keeps its own membership record (`sextantctl version`).
  [Buckets.members.name]: { writers: ["ingest", "discovery", "push", "ca", "webhook"], readers: [] },
};

describe("deploy/nats/auth.conf is what scripts/generate-nats-auth.ts renders", () => {
  it("matches byte for byte", () => {
    assert.equal(
      readFileSync(join(DEPLOY_DIR, "nats", "auth.conf"), "utf8"),
      renderNatsAuthorization(),
      "run scripts/generate-nats-auth.ts from deploy/ and commit the result",
    );
  });
});

describe("NATS permissions are least privilege", () => {
  it("covers every bucket of the bus catalog", () => {
    for (const spec of Object.values(Buckets)) assert.ok(BUCKET_ACCESS[spec.name], spec.name);
  });

  for (const [bucket, { writers, readers }] of Object.entries(BUCKET_ACCESS)) {
    it(`only ${writers.join(", ")} write ${bucket}; ${[...writers, ...readers].join(", ")} read it`, () => {
      assert.deepEqual(
        who((s) => canPublish(s, `$KV.${bucket}.VirtualService.default.reviews`)),
        writers,
      );
      const stream = kvStream(bucket);
      const reading = [...writers, ...readers].sort();
      assert.deepEqual(
        who((s) => canPublish(s, `$JS.API.CONSUMER.CREATE.${stream}.w1.$KV.${bucket}.>`)).sort(),
        reading,
      );
      assert.deepEqual(
        who((s) => canPublish(s, `$JS.API.DIRECT.GET.${stream}.$KV.${bucket}.k`)).sort(),
        reading,
      );
      assert.deepEqual(who((s) => canPublish(s, `$JS.API.STREAM.INFO.${stream}`)).sort(), reading);
    });
  }

  it("push cannot write to sextant-config", () => {
    assert.equal(canPublish("push", `$KV.${Buckets.config.name}.VirtualService.default.reviews`), false);
    assert.equal(canPublish("push", `$KV.${Buckets.config.name}.>`), false);
  });

  it("nobody may delete, purge or reconfigure a bucket, delete its messages, or list the account's streams", () => {
    for (const bucket of Object.keys(BUCKET_ACCESS)) {
      const stream = kvStream(bucket);
      for (const call of ["DELETE", "PURGE", "UPDATE", "MSG.DELETE", "MSG.GET", "SNAPSHOT", "RESTORE"]) {
        assert.deepEqual(
          who((s) => canPublish(s, `$JS.API.STREAM.${call}.${stream}`)),
          [],
          `${call} ${stream}`,
        );
      }
    }
    for (const subject of [
      "$JS.API.STREAM.LIST",
      "$JS.API.STREAM.NAMES",
      "$JS.API.CONSUMER.LIST.KV_x",
      "$JS.API.META.LEADER.STEPDOWN",
      "$JS.API.SERVER.REMOVE",
      "$SYS.REQ.SERVER.PING",
    ]) {
      assert.deepEqual(
        who((s) => canPublish(s, subject)),
        [],
        subject,
      );
    }
  });

  it("events: push publishes NACKs and registrations; one ingest replica takes each NACK; discovery follows registrations", () => {
    assert.deepEqual(
      who((s) => canPublish(s, Subjects.nack.subject)),
      ["push"],
    );
    assert.deepEqual(
      who((s) => canPublish(s, Subjects.registration.subject)),
      ["push"],
    );
    assert.deepEqual(
      who((s) => canSubscribe(s, Subjects.nack.subject, "ingest")),
      ["ingest"],
    );
    assert.deepEqual(
      who((s) => canSubscribe(s, Subjects.nack.subject)),
      [],
      "a NACK subscription outside the queue group",
    );
    assert.deepEqual(
      who((s) => canSubscribe(s, Subjects.registration.subject)),
      ["discovery"],
    );
    assert.deepEqual(
      who((s) => canSubscribe(s, "sextant.>")),
      [],
    );
  });

  it("each user subscribes to its own reply inbox only, and publishes to none", () => {
    for (const service of NATS_SERVICES) {
      assert.deepEqual(
        who((s) => canSubscribe(s, `${natsInboxPrefix(service)}.abc.1`)),
        [service],
      );
      assert.deepEqual(
        who((s) => canPublish(s, `${natsInboxPrefix(service)}.abc.1`)),
        [],
      );
    }
    assert.deepEqual(
      who((s) => canSubscribe(s, "_INBOX.abc.1")),
      [],
    );
    assert.deepEqual(
      who((s) => canSubscribe(s, ">")),
      [],
    );
  });

  it("only the services whose contract names a bucket or a subject have a NATS user: not the agent", () => {
    assert.deepEqual([...NATS_SERVICES].sort(), ["ca", "discovery", "ingest", "push", "webhook"]);
  });
});

describe("the NATS deployment", () => {
  const objects = render("overlays/production");
  const nats = find<Workload>(objects, "StatefulSet", "sextant-nats");
  const natsContainer = containerOf(nats);
  const configMap = find<KubeObject & { data: Record<string, string> }>(
    objects,
    "ConfigMap",
    nats.spec.template.spec.volumes?.find((v) => v.name === "config")?.configMap?.name ?? "",
  );

  it("is a 3-node JetStream cluster storing on a persistent volume", () => {
    assert.equal(nats.spec.replicas, 3);
    const config = configMap.data["nats.conf"] ?? "";
    const storeDir = /store_dir:\s*(\S+)/.exec(config)?.[1];
    assert.ok(storeDir, "nats.conf sets jetstream.store_dir");
    const mount = natsContainer.volumeMounts?.find((m) => m.mountPath === storeDir);
    assert.ok(mount, `nothing is mounted at the store ${storeDir}`);
    assert.ok(nats.spec.volumeClaimTemplates?.some((claim) => claim.metadata.name === mount.name));
    // The routes: every pod by its stable name, with the route credentials (nats.conf reads the list).
    assert.match(config, /routes: \$NATS_ROUTES/);
    const routes = envValue(natsContainer, "NATS_ROUTES");
    for (let index = 0; index < 3; index++) {
      assert.ok(
        routes.includes(
          `nats://route:$(NATS_ROUTE_PASSWORD)@sextant-nats-${index}.sextant-nats-headless:6222`,
        ),
        routes,
      );
    }
    assert.match(config, /include \.\/auth\.conf/);
    assert.equal(configMap.data["auth.conf"], renderNatsAuthorization());
  });

  it("its configuration is valid for nats-server, with every variable it needs given by the StatefulSet", () => {
    assertNatsServerInstalled();
    const directory = mkdtempSync(join(tmpdir(), "sextant-nats-config-"));
    try {
      // The certificates where the Secret is mounted: nats-server -t loads them.
      const tls = makeNatsTls();
      for (const [name, content] of Object.entries(configMap.data))
        writeFileSync(join(directory, name), content.replaceAll(TLS_MOUNT, tls.dir));
      // Only the variables the pod really has; nats-server -t fails on any other
      // $VARIABLE. $(NAME) in a value is expanded as the kubelet does.
      const env: Record<string, string> = { PATH: process.env.PATH ?? "" };
      for (const variable of natsContainer.env ?? []) {
        env[variable.name] =
          variable.value?.replace(/\$\((\w+)\)/g, (_, name: string) => env[name] ?? "") ??
          `test-${variable.name}`;
      }
      const check = spawnSync("nats-server", ["-t", "-c", join(directory, "nats.conf")], {
        env,
        encoding: "utf8",
      });
      assert.equal(check.status, 0, `${check.stdout}${check.stderr}`);
      assert.deepEqual(natsContainer.args, ["--config", "/etc/nats/nats.conf"]);
      assert.ok(natsContainer.volumeMounts?.some((m) => m.name === "config" && m.mountPath === "/etc/nats"));
      assert.ok(natsContainer.volumeMounts?.some((m) => m.name === "tls" && m.mountPath === TLS_MOUNT));
      const volume = nats.spec.template.spec.volumes?.find((v) => v.name === "tls");
      assert.equal(volume?.secret?.secretName, NATS_TLS_SECRET);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  for (const service of NATS_SERVICES) {
    it(`${service} logs in as its user, with the password NATS checks, and its own inbox prefix`, () => {
      const container = containerOf(deploymentOf(objects, service));
      assert.equal(envValue(container, "NATS_USER"), natsUser(service));
      const secret = { name: NATS_USERS_SECRET, key: natsPasswordKey(service) };
      assert.deepEqual(envOf(container, "NATS_PASSWORD")?.valueFrom?.secretKeyRef, secret);
      assert.deepEqual(envOf(natsContainer, natsPasswordVariable(service))?.valueFrom?.secretKeyRef, secret);
      assert.equal(envValue(container, "NATS_INBOX_PREFIX"), natsInboxPrefix(service));
      assert.equal(Number(envValue(container, "NATS_KV_REPLICAS")), nats.spec.replicas);
      // The code accepts these values (a bad one would stop the service at start-up).
      const env = Object.fromEntries(
        (container.env ?? []).map((v) => [
          v.name,
          v.value ?? `from-${v.valueFrom?.secretKeyRef ? "secret" : "field"}`,
        ]),
      );
      const settings = parseSettings(baseSettings, env);
      assert.equal(settings.NATS_USER, natsUser(service));
    });

    it(`${service} requires TLS of NATS and verifies it with the CA of the servers' Secret, and only that`, () => {
      const deployment = deploymentOf(objects, service);
      const container = containerOf(deployment);
      assert.equal(envValue(container, "NATS_TLS_CA_FILE"), `${TLS_MOUNT}/ca.crt`);
      const mount = container.volumeMounts?.find((m) => m.mountPath === TLS_MOUNT);
      assert.ok(mount?.readOnly, `${service} mounts ${TLS_MOUNT} read-only`);
      const volume = deployment.spec.template.spec.volumes?.find((v) => v.name === mount.name) as
        | { secret?: { secretName: string; items?: Array<{ key: string; path: string }> } }
        | undefined;
      assert.equal(volume?.secret?.secretName, NATS_TLS_SECRET);
      // Not the servers' key.
      assert.deepEqual(volume?.secret?.items, [{ key: "ca.crt", path: "ca.crt" }]);
    });
  }
});
