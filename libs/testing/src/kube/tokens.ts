import { badRequest } from "./errors.js";
import type { KubeObject } from "./types.js";

/** What the fake authenticator knows about a registered bearer token. */
export interface FakeTokenOptions {
  username: string;
  uid?: string;
  /** `system:authenticated` is added, as the API server does for every authenticated user. */
  groups?: string[];
  extra?: Record<string, string[]>;
  /** Audiences the token was issued for; defaults to the server's API audiences. */
  audiences?: string[];
  /** An expired token fails review with the service-account authenticator's message. */
  expired?: boolean;
}

/** A service-account token to register with `addServiceAccountToken`. */
export interface FakeServiceAccountTokenOptions {
  namespace: string;
  serviceAccount: string;
  uid?: string;
  /** Bound pod, reported in `user.extra` as projected tokens are. */
  podName?: string;
  podUid?: string;
  audiences?: string[];
  expired?: boolean;
}

/** The user and groups a projected service-account token authenticates as. */
export function serviceAccountTokenOptions(o: FakeServiceAccountTokenOptions): FakeTokenOptions {
  const token: FakeTokenOptions = {
    username: `system:serviceaccount:${o.namespace}:${o.serviceAccount}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${o.namespace}`],
  };
  if (o.uid !== undefined) token.uid = o.uid;
  if (o.audiences !== undefined) token.audiences = o.audiences;
  if (o.expired !== undefined) token.expired = o.expired;
  const extra: Record<string, string[]> = {};
  if (o.podName !== undefined) extra["authentication.kubernetes.io/pod-name"] = [o.podName];
  if (o.podUid !== undefined) extra["authentication.kubernetes.io/pod-uid"] = [o.podUid];
  if (Object.keys(extra).length > 0) token.extra = extra;
  return token;
}

// Go's %q on a []string, which the API server's messages use: ["a" "b"].
function goQuoted(list: string[]): string {
  return `[${list.map((s) => JSON.stringify(s)).join(" ")}]`;
}

/**
 * Answers a TokenReview the way kube-apiserver's token authenticators do:
 * requested audiences default to the API audiences, `status.audiences` is the
 * intersection, and a failure leaves `authenticated` out (it is omitempty)
 * with the error text in `status.error`.
 */
export function reviewToken(
  review: KubeObject,
  tokens: ReadonlyMap<string, FakeTokenOptions>,
  apiAudiences: readonly string[],
): KubeObject {
  if (review.kind !== undefined && review.kind !== "TokenReview") {
    throw badRequest(`not a TokenReview: ${review.kind}`);
  }
  const spec = (review.spec ?? {}) as { token?: unknown; audiences?: unknown };
  if (typeof spec.token !== "string" || spec.token === "") {
    throw badRequest("token is required for TokenReview in authentication");
  }
  const requested =
    Array.isArray(spec.audiences) && spec.audiences.length > 0
      ? spec.audiences.filter((a): a is string => typeof a === "string")
      : [...apiAudiences];
  const status: Record<string, unknown> = { user: {} };
  // metadata.creationTimestamp is null on the wire: a TokenReview is never stored.
  const result: Record<string, unknown> = {
    kind: "TokenReview",
    apiVersion: "authentication.k8s.io/v1",
    metadata: { creationTimestamp: null },
    spec: structuredClone(review.spec),
    status,
  };
  const token = tokens.get(spec.token);
  if (!token) {
    status.error = "invalid bearer token";
    return result as KubeObject;
  }
  const tokenAudiences = token.audiences ?? [...apiAudiences];
  const audiences = tokenAudiences.filter((a) => requested.includes(a));
  if (audiences.length === 0) {
    status.error = `[invalid bearer token, token audiences ${goQuoted(tokenAudiences)} is invalid for the target audiences ${goQuoted(requested)}]`;
    return result as KubeObject;
  }
  if (token.expired) {
    status.error = "[invalid bearer token, service account token has expired]";
    return result as KubeObject;
  }
  const groups = [...(token.groups ?? [])];
  if (!groups.includes("system:authenticated")) groups.push("system:authenticated");
  const user: Record<string, unknown> = { username: token.username, groups };
  if (token.uid !== undefined) user.uid = token.uid;
  if (token.extra !== undefined) user.extra = structuredClone(token.extra);
  status.authenticated = true;
  status.user = user;
  status.audiences = audiences;
  return result as KubeObject;
}
