import type { Subscription } from "@nats-io/nats-core";
import { type ResolvedContract, resolveContract, type ServiceContract } from "@sextant/runtime";
import { type BucketSpec, type Entry, type PutResult, TypedBucket } from "./bucket.js";
import { Buckets } from "./catalog.js";
import { type ReceivedEvent, TypedSubject } from "./subject.js";

/**
 * Thrown when a service uses a bucket or subject its contract does not
 * declare. Found in tests, before deploy/'s NATS permissions (rendered from
 * the same contract) would refuse the same call in a cluster.
 */
export class UndeclaredUseError extends Error {
  constructor(
    readonly service: string,
    readonly use: string,
  ) {
    super(`${service} ${use}, which its ServiceDefinition's contract does not declare`);
    this.name = "UndeclaredUseError";
  }
}

/** What a connection may do: its service's contract, resolved to names. */
export interface BusPolicy {
  readonly service: string;
  readonly contract: ResolvedContract;
}

/** The policy of a service's contract. */
export function busPolicy(service: string, contract: ServiceContract): BusPolicy {
  return { service, contract: resolveContract(contract) };
}

/** Every bucket of the catalog, by name: a contract names buckets, the runner opens their specs. */
const CATALOG = new Map<string, BucketSpec<unknown>>(
  Object.values(Buckets).map((spec) => [spec.name, spec as BucketSpec<unknown>]),
);

/** The catalog specs of the buckets a contract declares, writes first. */
export function declaredBuckets(policy: BusPolicy): BucketSpec<unknown>[] {
  return [...policy.contract.writes, ...policy.contract.reads].map((name) => {
    const spec = CATALOG.get(name);
    if (!spec) throw new Error(`${policy.service} declares ${name}, which is not in @sextant/bus's catalog`);
    return spec;
  });
}

/** Refuses a bucket the policy does not declare; says whether it may be written. */
export function checkBucket(policy: BusPolicy, name: string): { writable: boolean } {
  const writable = policy.contract.writes.includes(name);
  if (!writable && !policy.contract.reads.includes(name))
    throw new UndeclaredUseError(policy.service, `opened bucket ${name}`);
  return { writable };
}

/** A bucket the service only reads: every write is refused. */
export class ReadOnlyBucket<T> extends TypedBucket<T> {
  constructor(
    private readonly service: string,
    ...args: ConstructorParameters<typeof TypedBucket<T>>
  ) {
    super(...args);
  }

  override put(): Promise<PutResult> {
    return this.#refused("put");
  }

  override putOver(_key: string, _value: T, _current: Entry<T> | undefined): Promise<PutResult> {
    return this.#refused("putOver");
  }

  override update(): Promise<PutResult> {
    return this.#refused("update");
  }

  override delete(): Promise<boolean> {
    return this.#refused("delete");
  }

  #refused(operation: string): Promise<never> {
    return Promise.reject(
      new UndeclaredUseError(
        this.service,
        `called ${operation} on ${this.name}, which it declares read-only`,
      ),
    );
  }
}

/** A subject whose publishes and subscriptions are checked against the policy. */
export class CheckedSubject<T> extends TypedSubject<T> {
  constructor(
    private readonly policy: BusPolicy,
    ...args: ConstructorParameters<typeof TypedSubject<T>>
  ) {
    super(...args);
  }

  override publish(...args: Parameters<TypedSubject<T>["publish"]>): void {
    if (!this.policy.contract.publishes.includes(this.spec.subject))
      throw new UndeclaredUseError(this.policy.service, `published to ${this.spec.subject}`);
    super.publish(...args);
  }

  override subscribe(
    handler: (event: ReceivedEvent<T>) => void | Promise<void>,
    options: { queue?: string } = {},
  ): Subscription {
    const declared = this.policy.contract.subscribes.some(
      ({ subject, queue }) => subject === this.spec.subject && queue === options.queue,
    );
    if (!declared)
      throw new UndeclaredUseError(
        this.policy.service,
        `subscribed to ${this.spec.subject}${options.queue ? ` in queue ${options.queue}` : ""}`,
      );
    return super.subscribe(handler, options);
  }
}
