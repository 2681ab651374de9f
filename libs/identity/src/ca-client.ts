import { credentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";
import { IstioCertificateServiceClient } from "@sextant/proto";

/** How long one CreateCertificate call may take before it counts as failed. */
const REQUEST_DEADLINE_MS = 20_000;

/** One CreateCertificate request. */
export interface CertificateRequest {
  /** host:port of the CA's gRPC-over-TLS port. */
  caAddress: string;
  /** Roots that verify the CA's serving certificate. */
  caRootsPem: string;
  csrPem: string;
  ttlSeconds: number;
  /** Sent as `authorization: Bearer <token>`. */
  token?: string;
  /** Presented as the TLS client certificate: the CA's mesh-certificate authenticator (renewal). */
  clientCertificate?: { certChainPem: string; privateKeyPem: string };
  /** Cancels the call (close()). */
  signal: AbortSignal;
}

/** A CreateCertificate call that failed: the gRPC status and the CA's details. */
export class CaRequestError extends Error {
  constructor(
    readonly code: status,
    readonly details: string,
  ) {
    super(`${status[code] ?? code}: ${details}`);
    this.name = "CaRequestError";
  }

  /** The CA looked at the request and said no: retrying the same request will not help. */
  get refused(): boolean {
    return (
      this.code === status.UNAUTHENTICATED ||
      this.code === status.PERMISSION_DENIED ||
      this.code === status.INVALID_ARGUMENT ||
      this.code === status.FAILED_PRECONDITION
    );
  }

  /** The CA did not accept the credential (the other authenticators may). */
  get authenticationFailed(): boolean {
    return this.code === status.UNAUTHENTICATED || this.code === status.PERMISSION_DENIED;
  }
}

/**
 * Calls istio.v1.auth.IstioCertificateService/CreateCertificate over TLS on
 * a channel of its own (the client certificate differs between calls) and
 * resolves with the chain: leaf, intermediates, root last.
 */
export function requestCertificate(request: CertificateRequest): Promise<string[]> {
  const roots = Buffer.from(request.caRootsPem);
  const channelCredentials = request.clientCertificate
    ? credentials.createSsl(
        roots,
        Buffer.from(request.clientCertificate.privateKeyPem),
        Buffer.from(request.clientCertificate.certChainPem),
      )
    : credentials.createSsl(roots);
  const client = new IstioCertificateServiceClient(request.caAddress, channelCredentials);
  const metadata = new Metadata();
  if (request.token) metadata.set("authorization", `Bearer ${request.token}`);
  return new Promise<string[]>((resolve, reject) => {
    if (request.signal.aborted) return reject(new CaRequestError(status.CANCELLED, "closed"));
    const call = client.createCertificate(
      { csr: request.csrPem, validityDuration: request.ttlSeconds, metadata: undefined },
      metadata,
      { deadline: Date.now() + REQUEST_DEADLINE_MS },
      (error: ServiceError | null, response) => {
        request.signal.removeEventListener("abort", cancel);
        if (error) reject(new CaRequestError(error.code, error.details || error.message));
        else resolve(response?.certChain ?? []);
      },
    );
    const cancel = () => call.cancel();
    request.signal.addEventListener("abort", cancel, { once: true });
  }).finally(() => client.close());
}
