import type { Logger, ReadinessGate } from "@sextant/observability";
import {
  baseSettings,
  type Runner,
  readNatsClientSettings,
  SEXTANT_VERSION,
  type ServiceContract,
} from "@sextant/runtime";
import { Buckets } from "./catalog.js";
import { Bus } from "./connection.js";
import { busPolicy, declaredBuckets } from "./contract.js";
import { MemberRecorder } from "./members.js";

/** Options of {@link busRunner}. */
export interface BusRunnerOptions {
  url: string;
  /** The connection name, e.g. "push-<replica>". */
  name: string;
  logger: Logger;
  readiness: ReadinessGate;
  /** The service's name and contract (its ServiceContext's): what the connection may use. */
  service: string;
  /**
   * Its buckets are opened (created, file storage, if missing) at start; any
   * other bucket or subject is refused (UndeclaredUseError).
   */
  contract: ServiceContract;
  /** Stream replicas of the buckets it creates; default NATS_KV_REPLICAS. */
  replicas?: number;
  /** This process's name in its membership record; default REPLICA_ID (as baseSettings reads it). */
  instance?: string;
  /** NATS credentials; default NATS_USER and NATS_PASSWORD (unset: no authentication). */
  user?: string;
  password?: string;
  /** Reply subject prefix; default NATS_INBOX_PREFIX. */
  inboxPrefix?: string;
  /** The CA of NATS's certificate, requiring TLS; default NATS_TLS_CA_FILE (unset: no TLS required). */
  tlsCaFile?: string;
}

/** The bus runner: once started, its `bus` is connected. */
export interface BusRunner extends Runner {
  readonly bus: Bus;
}

/**
 * A runner that connects to NATS (retrying until the server answers) and
 * opens the service's buckets. The service is not ready until it has.
 */
export function busRunner(options: BusRunnerOptions): BusRunner {
  // Every service's schema extends baseSettings, so these variables were
  // validated at start-up; the composition roots pass only NATS_URL, and
  // reading the rest here means no service can forget to forward them. Read
  // now, while runService is building the runners, so that a bad pair stops
  // the process with exit code 2 like any other bad setting.
  const environment = readNatsClientSettings();
  const user = options.user ?? environment.NATS_USER;
  const password = options.password ?? environment.NATS_PASSWORD;
  const inboxPrefix = options.inboxPrefix ?? environment.NATS_INBOX_PREFIX;
  const replicas = options.replicas ?? environment.NATS_KV_REPLICAS;
  const tlsCaFile = options.tlsCaFile ?? environment.NATS_TLS_CA_FILE;
  const policy = busPolicy(options.service, options.contract);
  const buckets = declaredBuckets(policy);
  let bus: Bus | undefined;
  // A service that declares it writes sextant-members records itself there
  // while connected (REPLICA_ID as every service reads it: baseSettings).
  const member = policy.contract.writes.includes(Buckets.members.name)
    ? new MemberRecorder(
        () => bus as Bus,
        {
          service: options.service,
          version: SEXTANT_VERSION,
          instance: options.instance ?? baseSettings.shape.REPLICA_ID.parse(process.env.REPLICA_ID),
        },
        options.logger,
      )
    : undefined;
  return {
    name: "nats",
    get bus() {
      if (!bus) throw new Error("the bus runner has not started");
      return bus;
    },
    async start() {
      options.readiness.require("nats");
      bus = await Bus.connect({
        url: options.url,
        name: options.name,
        logger: options.logger,
        replicas,
        waitOnFirstConnect: true,
        user,
        password,
        inboxPrefix,
        tlsCaFile,
        policy,
      });
      for (const spec of buckets) await bus.bucket(spec);
      await member?.start();
      options.readiness.done("nats");
      options.logger.info(
        { url: options.url, user, tls: tlsCaFile !== undefined, buckets: buckets.map((spec) => spec.name) },
        "connected to NATS",
      );
    },
    async close() {
      await member?.stop();
      await bus?.close();
    },
  };
}
