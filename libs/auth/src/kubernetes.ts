import {
  AuthenticationV1Api,
  AuthorizationV1Api,
  type KubeConfig,
  type V1ResourceAttributes,
} from "@kubernetes/client-node";
import { type AccessRequest, type Decision, kindResource } from "./access.js";
import { type Authenticator, AuthUnavailableError, type Identity } from "./authenticator.js";

/**
 * The resource a `debug` request is authorized as under Kubernetes: `get` on
 * the `debug` subresource of `proxies` in the `sextant.io` group, cluster
 * wide. No such API exists; RBAC grants it like any other, e.g. a ClusterRole
 * rule `{apiGroups: [sextant.io], resources: [proxies/debug], verbs: [get]}`.
 */
export const DEBUG_RESOURCE: Readonly<V1ResourceAttributes> = {
  group: "sextant.io",
  resource: "proxies",
  subresource: "debug",
  verb: "get",
};

/** The extra attributes of a user, as a TokenReview returns them and a SubjectAccessReview takes them. */
type Extra = Record<string, string[]>;

/**
 * The Kubernetes authenticator: a TokenReview says whose token it is, and a
 * SubjectAccessReview whether that user may do what they ask, with the verb
 * and resource the API server would check for the same change made through
 * Istio's CRDs (`create` on `virtualservices.networking.istio.io` in the
 * resource's namespace, ...). A user's existing RBAC for Istio's kinds
 * therefore governs Sextant's API unchanged.
 */
export class KubernetesAuthenticator implements Authenticator {
  readonly name = "kubernetes";
  private readonly authentication: AuthenticationV1Api;
  private readonly authorization: AuthorizationV1Api;
  /** What the TokenReview said beyond the name, for the SubjectAccessReview. */
  private readonly users = new WeakMap<Identity, { uid?: string; extra?: Extra }>();

  constructor(kubeConfig: KubeConfig) {
    this.authentication = kubeConfig.makeApiClient(AuthenticationV1Api);
    this.authorization = kubeConfig.makeApiClient(AuthorizationV1Api);
  }

  async authenticate(token: string): Promise<Identity | undefined> {
    let review: Awaited<ReturnType<AuthenticationV1Api["createTokenReview"]>>;
    try {
      review = await this.authentication.createTokenReview({
        body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } },
      });
    } catch (error) {
      throw new AuthUnavailableError(`the Kubernetes TokenReview failed: ${(error as Error).message}`, {
        cause: error,
      });
    }
    const user = review.status?.user;
    if (!review.status?.authenticated || !user?.username) return undefined;
    const identity: Identity = {
      subject: user.username,
      groups: user.groups ?? [],
      authenticator: this.name,
    };
    this.users.set(identity, { uid: user.uid, extra: user.extra });
    return identity;
  }

  async authorize(identity: Identity, request: AccessRequest): Promise<Decision> {
    const attributes = resourceAttributes(request);
    if (!attributes) return { allowed: false, reason: `${request.kind} is not a kind Sextant serves` };
    const user = this.users.get(identity) ?? {};
    let review: Awaited<ReturnType<AuthorizationV1Api["createSubjectAccessReview"]>>;
    try {
      review = await this.authorization.createSubjectAccessReview({
        body: {
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: {
            user: identity.subject,
            groups: [...identity.groups],
            ...(user.uid ? { uid: user.uid } : {}),
            ...(user.extra ? { extra: user.extra } : {}),
            resourceAttributes: attributes,
          },
        },
      });
    } catch (error) {
      throw new AuthUnavailableError(
        `the Kubernetes SubjectAccessReview failed: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
    const allowed = review.status?.allowed === true && review.status.denied !== true;
    const reason = review.status?.reason || review.status?.evaluationError;
    return reason ? { allowed, reason } : { allowed };
  }
}

/** The SubjectAccessReview's resource attributes of a request. */
export function resourceAttributes(request: AccessRequest): V1ResourceAttributes | undefined {
  if (request.verb === "debug") return { ...DEBUG_RESOURCE };
  const resource = request.kind === undefined ? undefined : kindResource(request.kind);
  if (!resource) return undefined;
  return {
    ...resource,
    verb: request.verb,
    namespace: request.namespace,
    ...(request.name ? { name: request.name } : {}),
  };
}
