/**
 * What a service uses of the rest of the mesh, declared once in its
 * ServiceDefinition: the KV buckets it reads and writes, the event subjects
 * it publishes and subscribes to, and the ports it listens on. @sextant/bus
 * opens and allows exactly these buckets and subjects, deploy/ renders the
 * service's NATS user and permissions from them, and ARCHITECTURE.md's table
 * is generated from them, so none of the three can drift from the others.
 *
 * Buckets and subjects are named by their catalog specs (@sextant/bus's
 * Buckets and Subjects); this package sees only their names, because the bus
 * depends on it rather than the other way round.
 */
export interface ServiceContract {
  readonly buckets?: {
    /** Buckets it only reads (get, watch, list). */
    readonly read?: readonly BucketRef[];
    /** Buckets it writes (put, update, delete), and reads. */
    readonly write?: readonly BucketRef[];
  };
  readonly subjects?: {
    /** Event subjects it publishes. */
    readonly publish?: readonly SubjectRef[];
    /** Event subjects it subscribes to, each with its queue group if it uses one. */
    readonly subscribe?: readonly SubscriptionRef[];
  };
  /** The ports it listens on, by name, with the setting that moves each. */
  readonly ports: Readonly<Record<string, PortContract>>;
}

/** A KV bucket, as @sextant/bus's BucketSpec names it. */
export interface BucketRef {
  readonly name: string;
}

/** An event subject, as @sextant/bus's SubjectSpec names it. */
export interface SubjectRef {
  readonly subject: string;
}

/** A subscription: the subject and, if the service uses one, its queue group. */
export interface SubscriptionRef {
  readonly subject: SubjectRef;
  readonly queue?: string;
}

/** A port a service listens on. */
export interface PortContract {
  /** Its default (DEFAULT_PORTS). */
  readonly port: number;
  /** The environment variable that sets it. */
  readonly setting: string;
  /** What is served there. */
  readonly serves: string;
  /**
   * The boolean setting that opens the port, for a port off by default
   * (push's plaintext xDS): deployments list it only where they set it true.
   */
  readonly enabledBy?: string;
}

/** A contract with every list present, for code that reads one. */
export interface ResolvedContract {
  readonly reads: readonly string[];
  readonly writes: readonly string[];
  readonly publishes: readonly string[];
  readonly subscribes: ReadonlyArray<{ readonly subject: string; readonly queue?: string }>;
  readonly ports: Readonly<Record<string, PortContract>>;
}

/** The contract's names, every list present (empty when the service declares none). */
export function resolveContract(contract: ServiceContract): ResolvedContract {
  return {
    reads: (contract.buckets?.read ?? []).map((bucket) => bucket.name),
    writes: (contract.buckets?.write ?? []).map((bucket) => bucket.name),
    publishes: (contract.subjects?.publish ?? []).map((subject) => subject.subject),
    subscribes: (contract.subjects?.subscribe ?? []).map(({ subject, queue }) =>
      queue === undefined ? { subject: subject.subject } : { subject: subject.subject, queue },
    ),
    ports: contract.ports,
  };
}

/** True if the service uses NATS at all. */
export function usesNats(contract: ServiceContract): boolean {
  const resolved = resolveContract(contract);
  return (
    resolved.reads.length + resolved.writes.length + resolved.publishes.length + resolved.subscribes.length >
    0
  );
}
