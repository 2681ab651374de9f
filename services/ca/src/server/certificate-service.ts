import { type PeerCertificate, TLSSocket } from "node:tls";
import { Metadata, type ServerUnaryCall, type sendUnaryData, status } from "@grpc/grpc-js";
import type { Logger } from "@sextant/observability";
import type {
  IstioCertificateRequest,
  IstioCertificateResponse,
  IstioCertificateServiceServer,
} from "@sextant/proto";
import { type Authenticator, authenticate, spiffeId } from "../auth/authenticator.js";
import { randomSerialHex } from "../pki/certificate.js";
import { CsrError, checkCsr } from "../pki/csr.js";
import type { CertificateIssuer } from "../pki/issuer.js";
import type { CaMetrics } from "./metrics.js";
import type { IdentityRateLimit } from "./rate-limit.js";

/** Where CreateCertificate gets its parts. */
export interface CertificateServiceOptions {
  trustDomain: string;
  authenticators: readonly Authenticator[];
  issuer: () => CertificateIssuer;
  metrics: CaMetrics;
  logger: Logger;
  /**
   * Requests allowed per SPIFFE identity (CA_RATE_LIMIT_PER_IDENTITY,
   * CA_RATE_LIMIT_BURST), taken once the caller is authenticated; none: no limit.
   */
  rateLimit?: IdentityRateLimit | undefined;
}

const CSR_STATUS: Record<CsrError["reason"], status> = {
  malformed_csr: status.INVALID_ARGUMENT,
  bad_csr_signature: status.INVALID_ARGUMENT,
  weak_key: status.INVALID_ARGUMENT,
  unsupported_key: status.INVALID_ARGUMENT,
};

/**
 * The IstioCertificateService implementation. The order matters: who the
 * caller is comes first, so an anonymous caller learns nothing about its CSR.
 */
export function certificateService(options: CertificateServiceOptions): IstioCertificateServiceServer {
  const { metrics, logger } = options;
  const fail = (
    callback: sendUnaryData<IstioCertificateResponse>,
    code: status,
    reason: string,
    details: string,
    metadata?: Metadata,
  ) => {
    metrics.errors.inc({ reason });
    callback({ code, details, ...(metadata ? { metadata } : {}) });
  };
  return {
    async createCertificate(
      call: ServerUnaryCall<IstioCertificateRequest, IstioCertificateResponse>,
      callback: sendUnaryData<IstioCertificateResponse>,
    ) {
      metrics.csrCount.inc();
      try {
        const peerCertificate = presentedCertificate(call);
        const auth = await authenticate(options.authenticators, {
          metadata: call.metadata,
          ...(peerCertificate ? { peerCertificate } : {}),
        });
        if (!auth.ok) {
          logger.info(
            { reason: auth.reason, peer: call.getPeer() },
            "certificate request refused: authentication",
          );
          return fail(
            callback,
            auth.kind === "permission_denied" ? status.PERMISSION_DENIED : status.UNAUTHENTICATED,
            auth.reason,
            auth.message,
          );
        }
        const identity = spiffeId(options.trustDomain, auth.caller);
        // After authentication, so one identity's requests cannot use up
        // another's allowance; before the CSR is parsed, so a refusal is cheap.
        const waitMs = options.rateLimit?.buckets.tryTake(identity) ?? 0;
        if (waitMs > 0) {
          logger.warn({ identity, retryInMs: waitMs }, "certificate request refused: rate limit");
          // gRPC's retry pushback (gRFC A6): a client with a retry policy waits this long.
          const pushback = new Metadata();
          pushback.set("grpc-retry-pushback-ms", String(waitMs));
          return fail(
            callback,
            status.RESOURCE_EXHAUSTED,
            "rate_limited",
            `too many certificate requests for ${identity}: ${options.rateLimit?.description}; retry in ${Math.ceil(waitMs / 1000)} s`,
            pushback,
          );
        }
        let csr: Awaited<ReturnType<typeof checkCsr>>;
        try {
          csr = await checkCsr(call.request.csr);
        } catch (error) {
          if (!(error instanceof CsrError)) throw error;
          return fail(callback, CSR_STATUS[error.reason], error.reason, error.message);
        }
        // The CSR's SANs are never copied, but a CSR that asks for someone
        // else's identity is a sign of a confused or hostile caller: refuse it.
        const foreign = csr.requestedUris.filter((uri) => uri !== identity);
        if (foreign.length > 0)
          return fail(
            callback,
            status.PERMISSION_DENIED,
            "san_mismatch",
            `CSR asks for ${foreign.join(", ")}, but the caller is ${identity} (authenticated by ${auth.caller.authenticator})`,
          );
        const issued = options
          .issuer()
          .issue(csr, identity, Number(call.request.validityDuration), randomSerialHex());
        metrics.issued.inc();
        // The audit line: one per issuance.
        logger.info(
          {
            audit: "certificate_issued",
            identity,
            serial: issued.serialHex,
            notAfter: issued.notAfter.toISOString(),
            authenticator: auth.caller.authenticator,
            key: csr.keyDescription,
          },
          "issued workload certificate",
        );
        callback(null, { certChain: issued.chain });
      } catch (error) {
        logger.error({ err: error }, "certificate request failed");
        fail(callback, status.INTERNAL, "internal", "internal error while signing the certificate");
      }
    },
  };
}

/**
 * The client certificate presented over mTLS, verified or not. grpc-js's
 * auth context shows a peer certificate only if TLS verified it, so an
 * expired or foreign certificate would look like no credential at all; the
 * mesh-certificate authenticator verifies it itself and names what failed.
 * This reads grpc-js internals (the call's HTTP/2 stream): the renewal tests
 * fail loudly if an upgrade moves them, and the auth context stays the
 * fallback.
 */
export function presentedCertificate(call: ServerUnaryCall<unknown, unknown>): PeerCertificate | undefined {
  const verified = call.getAuthContext()?.sslPeerCertificate;
  if (verified) return verified;
  let inner = (call as unknown as { call?: unknown }).call as Record<string, unknown> | undefined;
  for (let depth = 0; inner && !("stream" in inner) && depth < 8; depth++)
    inner = inner.nextCall as Record<string, unknown> | undefined;
  const socket = (inner?.stream as { session?: { socket?: unknown } } | undefined)?.session?.socket;
  if (!(socket instanceof TLSSocket)) return undefined;
  const peer = socket.getPeerCertificate();
  return peer?.raw ? peer : undefined;
}
