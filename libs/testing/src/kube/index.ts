/**
 * The fake kube-apiserver: a test double for Kubernetes clients, faithful to
 * the wire protocol (see libs/testing/README.md, "Fake kube-apiserver").
 */
export type { FakeAccessReview, FakeAccessRule } from "./access.js";
export { KubeApiError } from "./errors.js";
export {
  type DropMode,
  FakeKubeApiServer,
  type FakeKubeApiServerOptions,
  type InjectedFailure,
  type KubeConfigLike,
  type KubeConfigOptions,
  startFakeKubeApiServer,
} from "./server.js";
export type { FakeServiceAccountTokenOptions, FakeTokenOptions } from "./tokens.js";
export type {
  FakeKubeRequest,
  FakeKubeRequestFilter,
  GroupVersionResource,
  KubeObject,
  KubeStatus,
  KubeVerb,
  ObjectMeta,
  ObjectReference,
  ResourceDefinition,
  StatusCause,
  WatchEvent,
  WatchEventType,
} from "./types.js";
