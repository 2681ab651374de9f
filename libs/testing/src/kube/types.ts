/**
 * Wire types shared by the fake kube-apiserver: objects, `Status` bodies,
 * resource definitions and the request log.
 */

/** The subset of Kubernetes `ObjectMeta` the fake server reads or manages. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: unknown[];
  [key: string]: unknown;
}

/** A Kubernetes object as JSON: `apiVersion`, `kind`, `metadata` and anything else. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
  [key: string]: unknown;
}

/** One entry of `Status.details.causes`. */
export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

/** A `meta/v1 Status` body, as the API server returns for every failed request. */
export interface KubeStatus {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, unknown>;
  status: "Success" | "Failure";
  message: string;
  reason: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  code: number;
}

/** The type of a watch event on the wire. */
export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

/** One line of a watch stream. */
export interface WatchEvent {
  type: WatchEventType;
  object: KubeObject;
}

/**
 * A resource type to serve, in the shape of a CustomResourceDefinition's
 * essentials. Used for custom resources passed to `registerResource`.
 */
export interface ResourceDefinition {
  /** API group, "" for the core group. */
  group: string;
  /** Served versions; the first one is the storage version. */
  versions: string[];
  kind: string;
  /** Lower-case plural, the path segment (e.g. "virtualservices"). */
  plural: string;
  namespaced: boolean;
  /** Defaults to `${kind}List`. */
  listKind?: string;
  /** Defaults to the lower-cased kind. */
  singular?: string;
  shortNames?: string[];
  /** As in a CRD: `{ status: {} }` enables the status subresource. */
  subresources?: { status?: boolean | Record<string, unknown> };
}

/** Names a resource collection: group (default core ""), optional version, plural resource. */
export interface GroupVersionResource {
  group?: string;
  version?: string;
  resource: string;
}

/** Names one object by apiVersion, kind, name and (for namespaced kinds) namespace. */
export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

/** The Kubernetes verb a request was resolved to (as in audit logs and RBAC). */
export type KubeVerb =
  | "get"
  | "list"
  | "watch"
  | "create"
  | "update"
  | "patch"
  | "delete"
  | "deletecollection";

/** One request the fake server received, recorded so tests can assert relists and retries. */
export interface FakeKubeRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  query: Record<string, string>;
  /** Undefined for non-resource requests (discovery, /version, health). */
  verb?: KubeVerb;
  group?: string;
  version?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  /** HTTP status code of the response (200 for a watch stream, even one that carries an ERROR event). */
  statusCode?: number;
}

/** Filter for `requestCount` and `requestsMatching`: every given field must be equal. */
export type FakeKubeRequestFilter = Partial<
  Pick<
    FakeKubeRequest,
    "method" | "verb" | "group" | "version" | "resource" | "subresource" | "namespace" | "name"
  >
>;
