export {
  type BucketSpec,
  defineBucket,
  type Entry,
  type PutResult,
  RevisionConflictError,
  TypedBucket,
  type Watch,
  type WatchEvent,
} from "./bucket.js";
export { Buckets, Subjects } from "./catalog.js";
export { encodeCanonical } from "./codec.js";
export { Bus, type BusOptions, connectBus } from "./connection.js";
export { type BusPolicy, busPolicy, UndeclaredUseError } from "./contract.js";
export { decodeKey, encodeKey, keyPrefixFilter } from "./keys.js";
export { listMembers, type MemberRecord } from "./members.js";
export {
  Mirror,
  type MirrorChange,
  type MirrorDelivery,
  type MirrorHandler,
  type MirrorOptions,
  type MirrorSubscription,
} from "./mirror.js";
export { BusUnavailableError, type RetryPolicy } from "./retry.js";
export { type BusRunner, type BusRunnerOptions, busRunner } from "./runner.js";
export { defineSubject, type ReceivedEvent, type SubjectSpec, TypedSubject } from "./subject.js";
