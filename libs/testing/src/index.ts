export { onCleanup, trackChildProcess } from "./cleanup.js";
export { DEBUG_HEADERS, DEBUG_TOKEN, debugTokenEnv } from "./debug-token.js";
export { checkGoldenDir, expectGolden, type GoldenCase, goldenCases, updatingGoldens } from "./golden.js";
export { type GrpcServerFixture, insecureClientCredentials, startGrpcServer } from "./grpc.js";
export * from "./kube/index.js";
export { metricValue } from "./metrics.js";
export {
  assertNatsServerInstalled,
  NATS_TOPOLOGIES,
  type NatsClusterFixture,
  type NatsClusterNode,
  type NatsServerFixture,
  type NatsTopology,
  type NatsTopologyKind,
  natsClusterConfig,
  natsServerVersion,
  serialisesConcurrentConditionalWrites,
  startNatsCluster,
  startNatsServer,
  startNatsTopology,
} from "./nats.js";
export { freePort } from "./ports.js";
export { captureOutput, type ServiceProcess, startServiceProcess } from "./processes.js";
export { ordersOnOneAddressYaml } from "./registry-fixtures.js";
export { bookinfoNetworkingDir, bookinfoPlatformFile, repositoryRoot, samplesPath } from "./samples.js";
export { selfSignedKeyPair } from "./tls.js";
export { eventually } from "./wait.js";
