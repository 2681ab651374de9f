import { AuthenticationV1Api, type KubeConfig } from "@kubernetes/client-node";
import {
  AuthenticationError,
  type Authenticator,
  bearerToken,
  type CallCredentials,
  type Caller,
} from "./authenticator.js";

/** The audience Istio's CA requires of service-account tokens (istio-agent requests tokens for it). */
export const ISTIO_CA_AUDIENCE = "istio-ca";

const SERVICE_ACCOUNT_USER = /^system:serviceaccount:([^:]+):([^:]+)$/;

/**
 * Authenticates a Kubernetes service-account JWT with a TokenReview that asks
 * for the CA's audience: the API server checks signature, expiry, binding
 * and audience, and answers with the service account.
 */
export class KubernetesTokenAuthenticator implements Authenticator {
  readonly name = "kubernetes";
  readonly #api: AuthenticationV1Api;

  constructor(
    kubeConfig: KubeConfig,
    private readonly audiences: readonly string[] = [ISTIO_CA_AUDIENCE],
  ) {
    this.#api = kubeConfig.makeApiClient(AuthenticationV1Api);
  }

  async authenticate(call: CallCredentials): Promise<Caller | undefined> {
    const token = bearerToken(call.metadata);
    if (!token) return undefined;
    let review: Awaited<ReturnType<AuthenticationV1Api["createTokenReview"]>>;
    try {
      review = await this.#api.createTokenReview({
        body: {
          apiVersion: "authentication.k8s.io/v1",
          kind: "TokenReview",
          spec: { token, audiences: [...this.audiences] },
        },
      });
    } catch (error) {
      // The error text of the client may include the request; never the token, which travels in the body.
      throw new AuthenticationError(
        "unauthenticated",
        "token_review_unavailable",
        `kubernetes: TokenReview request failed: ${(error as Error).message.split("\n")[0]}`,
      );
    }
    const status = review.status ?? {};
    // `authenticated` is omitempty: a failure leaves it out rather than false.
    if (status.authenticated !== true)
      throw new AuthenticationError(
        "unauthenticated",
        "token_review_failed",
        `kubernetes: token review failed: ${status.error || "not authenticated"}`,
      );
    if (!(status.audiences ?? []).some((a) => this.audiences.includes(a)))
      throw new AuthenticationError(
        "unauthenticated",
        "token_audience",
        `kubernetes: token is not for audience ${this.audiences.join(", ")}`,
      );
    const username = status.user?.username ?? "";
    const match = SERVICE_ACCOUNT_USER.exec(username);
    if (!match?.[1] || !match[2])
      throw new AuthenticationError(
        "permission_denied",
        "not_service_account",
        `kubernetes: ${username} is not a service account`,
      );
    return { namespace: match[1], serviceAccount: match[2], authenticator: this.name };
  }
}
