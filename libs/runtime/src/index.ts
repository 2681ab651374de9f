export {
  type BucketRef,
  type PortContract,
  type ResolvedContract,
  resolveContract,
  type ServiceContract,
  type SubjectRef,
  type SubscriptionRef,
  usesNats,
} from "./contract.js";
export { DEFAULT_NATS_URL, DEFAULT_PORTS } from "./ports.js";
export { type Runner, RunnerGroup } from "./runner.js";
export { SerialTasks } from "./serial.js";
export {
  runService,
  type ServiceContext,
  type ServiceDefinition,
  type StartedService,
  startService,
} from "./service.js";
export {
  baseSettings,
  durationSecondsSetting,
  millisecondsSetting,
  type NatsClientSettings,
  natsClientSettings,
  parseSettings,
  portSetting,
  readNatsClientSettings,
  type ServiceSettingsSchema,
  SettingsError,
} from "./settings.js";
export { TokenBuckets, type TokenBucketsOptions } from "./token-buckets.js";
export { SEXTANT_VERSION } from "./version.js";
