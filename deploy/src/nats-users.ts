// The NATS users of the control plane and what each may do: the source that
// deploy/nats/auth.conf is rendered from (scripts/generate-nats-auth.ts).
import { Buckets, Subjects } from "@sextant/bus";

/**
 * The bucket discovery's replicas hold their leader lease in. It is defined
 * by discovery itself (services/discovery/src/leader/lease.ts, LeaseBucket),
 * not in the bus catalog, so it is named here.
 */
export const LEASES_BUCKET = "sextant-leases";

/** The services that connect to NATS as their own user. The agent is not one: it runs beside workloads. */
export const NATS_SERVICES = ["ingest", "discovery", "push", "ca", "webhook"] as const;

/** One of {@link NATS_SERVICES}. */
export type NatsService = (typeof NATS_SERVICES)[number];

/** A core NATS subscription: the subject and, if the service uses one, its queue group. */
export interface Subscription {
  readonly subject: string;
  readonly queue?: string;
}

/** What one service does on NATS, as its code does it. */
export interface NatsAccess {
  /** Buckets it writes (put, delete), and reads. */
  readonly writes: readonly string[];
  /** Buckets it reads only (get, watch, list). */
  readonly reads: readonly string[];
  /** Event subjects it publishes. */
  readonly publishes: readonly string[];
  /** Event subjects it subscribes to. */
  readonly subscribes: readonly Subscription[];
}

/**
 * Each service's use of NATS, taken from its code: the buckets its
 * busRunner opens and those its runners open with `bus.bucket(...)`, the
 * subjects it publishes and subscribes to (`bus.subject(...)`). When a
 * service starts using another bucket or subject, it goes here, and the
 * permission tests show what changed.
 */
export const NATS_ACCESS: Readonly<Record<NatsService, NatsAccess>> = {
  ingest: {
    // main.ts (busRunner), store/config-store.ts, analysis/analysis-runner.ts, sources/kube-source.ts
    writes: [Buckets.config.name, Buckets.configStatus.name],
    reads: [Buckets.services.name],
    publishes: [],
    // nack/nack-recorder.ts: one replica records each NACK.
    subscribes: [{ subject: Subjects.nack.subject, queue: "ingest" }],
  },
  discovery: {
    // main.ts, publish/publisher.ts (with the lease bucket), serviceentry/config-source.ts
    writes: [Buckets.services.name, Buckets.endpoints.name, LEASES_BUCKET],
    reads: [Buckets.config.name],
    publishes: [],
    // registration/auto-registration.ts: every replica follows the events.
    subscribes: [{ subject: Subjects.registration.subject }],
  },
  push: {
    // main.ts, status/proxy-status.ts, inputs/push-inputs.ts, and the trust
    // bundle its mTLS identity follows (@sextant/identity's bus trust source).
    writes: [Buckets.proxyStatus.name],
    reads: [Buckets.config.name, Buckets.services.name, Buckets.endpoints.name, Buckets.trust.name],
    publishes: [Subjects.nack.subject, Subjects.registration.subject],
    subscribes: [],
  },
  ca: {
    // main.ts, trust/trust-bundle.ts (writes), trust/trust-bundle-feed.ts (watches)
    writes: [Buckets.trust.name],
    reads: [],
    publishes: [],
    subscribes: [],
  },
  webhook: {
    // main.ts: connects only (the service is not ready without NATS).
    writes: [],
    reads: [],
    publishes: [],
    subscribes: [],
  },
};

/** The NATS user name of a service. */
export const natsUser = (service: NatsService): string => service;

/**
 * The reply-subject prefix of a service (NATS_INBOX_PREFIX): a user may
 * subscribe only to its own, so no service can read the replies another
 * receives (KV reads, watch deliveries).
 */
export const natsInboxPrefix = (service: NatsService): string => `_INBOX_${service}`;

/** The key of a service's password in the `sextant-nats-users` Secret. */
export const natsPasswordKey = (service: NatsService): string => service;

/** The environment variable nats-server reads a service's password from (set from the Secret). */
export const natsPasswordVariable = (service: NatsService): string =>
  `NATS_PASSWORD_${service.toUpperCase()}`;

/** The Secret holding every service's NATS password, one key per service. */
export const NATS_USERS_SECRET = "sextant-nats-users";

/** The JetStream stream behind a KV bucket. */
export const kvStream = (bucket: string): string => `KV_${bucket}`;

/** A user's permissions, as nats-server's config states them. */
export interface NatsPermissions {
  readonly publish: readonly string[];
  readonly subscribe: readonly string[];
}

/**
 * The subjects a service's user may publish and subscribe to: exactly the
 * calls @nats-io/kv and @nats-io/jetstream 3.x make for what the service
 * does (seen in nats-server's protocol trace; the real-server test in
 * test/nats-permissions.test.ts runs them), and nothing else.
 */
export function natsPermissions(service: NatsService): NatsPermissions {
  const access = NATS_ACCESS[service];
  const publish = new Set<string>([
    // connectBus checks that JetStream is there; jetstreamManager() asks again.
    "$JS.API.INFO",
  ]);
  for (const bucket of [...access.writes, ...access.reads]) {
    const stream = kvStream(bucket);
    // Opening a bucket (Kvm.create): stream info, and creation when it is
    // missing. Readers may create too: services start in any order, and a
    // create of an existing stream with another configuration fails, so a
    // reader can neither alter a bucket nor write to it.
    publish.add(`$JS.API.STREAM.INFO.${stream}`);
    publish.add(`$JS.API.STREAM.CREATE.${stream}`);
    // get(): a direct get of the key's last message, the subject in the request subject.
    publish.add(`$JS.API.DIRECT.GET.${stream}.$KV.${bucket}.>`);
    // watch() and list(): an ordered push consumer filtered to the keys, its
    // info (pending count, liveness check), its deletion on reset, and the
    // flow-control replies the server asks for on large replays.
    publish.add(`$JS.API.CONSUMER.CREATE.${stream}.>`);
    publish.add(`$JS.API.CONSUMER.INFO.${stream}.*`);
    publish.add(`$JS.API.CONSUMER.DELETE.${stream}.*`);
    publish.add(`$JS.FC.${stream}.>`);
  }
  // put(), update(), delete(): a publish to the key's subject, acknowledged by JetStream.
  for (const bucket of access.writes) publish.add(`$KV.${bucket}.>`);
  for (const subject of access.publishes) publish.add(subject);
  const subscribe = [
    // Every request's reply and every watch's deliveries.
    `${natsInboxPrefix(service)}.>`,
    // "subject queue": nats-server then allows that queue group only.
    ...access.subscribes.map(({ subject, queue }) => (queue ? `${subject} ${queue}` : subject)),
  ];
  return { publish: [...publish], subscribe };
}

/**
 * deploy/nats/auth.conf: the `authorization` block of nats-server's
 * configuration, with one user per service. Passwords are `$VARIABLES`
 * nats-server resolves from its environment, which the StatefulSet fills
 * from the `sextant-nats-users` Secret: the file holds no secret and can
 * be committed.
 */
export function renderNatsAuthorization(): string {
  const lines = [
    "# Generated by deploy/scripts/generate-nats-auth.ts from deploy/src/nats-users.ts; do not edit.",
    "# One user per Sextant service, allowed only the KV buckets and subjects that service uses.",
    "authorization {",
    "  users: [",
  ];
  for (const service of NATS_SERVICES) {
    const { publish, subscribe } = natsPermissions(service);
    lines.push(
      "    {",
      `      user: ${quote(natsUser(service))}`,
      `      password: $${natsPasswordVariable(service)}`,
      "      permissions: {",
      "        publish: {",
      "          allow: [",
      ...publish.map((subject) => `            ${quote(subject)}`),
      "          ]",
      "        }",
      "        subscribe: {",
      "          allow: [",
      ...subscribe.map((subject) => `            ${quote(subject)}`),
      "          ]",
      "        }",
      "      }",
      "    }",
    );
  }
  lines.push("  ]", "}", "");
  return lines.join("\n");
}

/** A double-quoted string for nats-server's config, where `$` inside quotes is literal. */
function quote(value: string): string {
  return JSON.stringify(value);
}
