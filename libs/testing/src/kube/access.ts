import { badRequest } from "./errors.js";
import type { KubeObject } from "./types.js";

/**
 * A grant of the fake authorizer, shaped like an RBAC rule bound to one user
 * or group: `"*"` matches anything in a list, a resource may name a
 * subresource (`proxies/debug`), and no `namespaces` means cluster-wide.
 */
export interface FakeAccessRule {
  user?: string;
  group?: string;
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  namespaces?: string[];
}

/** The attributes one SubjectAccessReview asked about, as recorded by the fake server. */
export interface FakeAccessReview {
  user: string;
  groups: string[];
  verb: string;
  group: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
  allowed: boolean;
}

const anyOf = (list: readonly string[], value: string) => list.includes("*") || list.includes(value);

/**
 * Answers a SubjectAccessReview (authorization.k8s.io/v1) as RBAC would for
 * the given rules: allowed if a rule for the user or one of its groups
 * covers the verb, group, resource (with subresource) and namespace. A
 * denial has no reason, as RBAC gives none. Returns the response and what
 * was asked.
 */
export function reviewAccess(
  review: KubeObject,
  rules: readonly FakeAccessRule[],
): { response: KubeObject; asked: FakeAccessReview } {
  if (review.kind !== undefined && review.kind !== "SubjectAccessReview") {
    throw badRequest(`not a SubjectAccessReview: ${review.kind}`);
  }
  const spec = (review.spec ?? {}) as {
    user?: unknown;
    groups?: unknown;
    resourceAttributes?: Record<string, unknown>;
    nonResourceAttributes?: unknown;
  };
  const attributes = spec.resourceAttributes;
  if (typeof spec.user !== "string" || spec.user === "") {
    throw badRequest("at least one of user or group must be specified");
  }
  if (!attributes)
    throw badRequest("exactly one of nonResourceAttributes or resourceAttributes must be specified");
  const text = (key: string) => (typeof attributes[key] === "string" ? (attributes[key] as string) : "");
  const groups = Array.isArray(spec.groups)
    ? spec.groups.filter((g): g is string => typeof g === "string")
    : [];
  const resource = text("subresource") ? `${text("resource")}/${text("subresource")}` : text("resource");
  const allowed = rules.some(
    (rule) =>
      (rule.user === spec.user || (rule.group !== undefined && groups.includes(rule.group))) &&
      anyOf(rule.verbs, text("verb")) &&
      anyOf(rule.apiGroups, text("group")) &&
      anyOf(rule.resources, resource) &&
      (rule.namespaces === undefined || anyOf(rule.namespaces, text("namespace"))),
  );
  const asked: FakeAccessReview = {
    user: spec.user,
    groups,
    verb: text("verb"),
    group: text("group"),
    resource: text("resource"),
    allowed,
  };
  if (text("subresource")) asked.subresource = text("subresource");
  if (text("namespace")) asked.namespace = text("namespace");
  if (text("name")) asked.name = text("name");
  const response = {
    kind: "SubjectAccessReview",
    apiVersion: "authorization.k8s.io/v1",
    metadata: { creationTimestamp: null },
    spec: structuredClone(review.spec),
    status: allowed ? { allowed: true, reason: "allowed by a fake RBAC rule" } : { allowed: false },
  };
  return { response: response as unknown as KubeObject, asked };
}
