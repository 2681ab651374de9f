import { status } from "@grpc/grpc-js";
import { retry } from "@sextant/kube/retry";
import type { Logger } from "@sextant/observability";
import { CaRequestError, requestCertificate } from "./ca-client.js";
import { type IssuedCertificate, issuedCertificate } from "./chain.js";
import { generateKeyAndCsr } from "./key.js";
import { mergeRoots, sameRoots } from "./roots.js";
import {
  DEFAULT_GRACE_PERIOD_RATIO,
  DEFAULT_GRACE_PERIOD_RATIO_JITTER,
  type RotationPolicy,
  rotationDelayMs,
} from "./rotation.js";
import { formatSpiffeId } from "./spiffe.js";
import { CA_RETRY, type Timer, unrefTimeout } from "./timers.js";
import type { TrustBundleSource } from "./trust-source.js";
import type { IdentitySnapshot, IdentitySource } from "./types.js";

/** A chain from the CA, with the key generated for it. */
interface CaAnswer {
  chain: string[];
  privateKeyPem: string;
}

/** Options of {@link WorkloadIdentity}. */
export interface WorkloadIdentityOptions {
  /** host:port of ca's gRPC-over-TLS port (8060). */
  caAddress: string;
  /** Verifies the CA's serving certificate. */
  caRootPem: string;
  trustDomain: string;
  namespace: string;
  serviceAccount: string;
  /** The bearer credential (projected service-account token or bootstrap token), read fresh at each request; undefined = none. */
  token: () => Promise<string | undefined>;
  /** Requested validity_duration. */
  ttlSeconds: number;
  /** Rotate when this fraction of the lifetime is left (Istio SECRET_GRACE_PERIOD_RATIO, default 0.5) ... */
  gracePeriodRatio?: number;
  /** ... plus or minus up to this fraction, random (Istio SECRET_GRACE_PERIOD_RATIO_JITTER, default 0.01). */
  gracePeriodRatioJitter?: number;
  trust: TrustBundleSource;
  logger: Logger;
}

/**
 * A workload's mesh identity, kept fresh as istio-agent's SecretManager
 * does: a key generated here, a certificate from the CA's CreateCertificate,
 * rotated before it expires, and the trust bundle followed. Renewals present
 * the current certificate (mTLS) and fall back to the token when the CA does
 * not accept it. Failures are logged and retried with backoff, never thrown,
 * except by start() when the CA refuses the first request.
 */
export class WorkloadIdentity implements IdentitySource {
  readonly #options: WorkloadIdentityOptions;
  readonly #spiffeId: string;
  readonly #rotation: RotationPolicy;
  readonly #logger: Logger;
  /** Aborted by close(): cuts waits short and cancels calls in flight. */
  readonly #lifetime = new AbortController();
  readonly #listeners = new Set<(snapshot: IdentitySnapshot) => void>();
  #issued: IssuedCertificate | undefined;
  /** When #issued arrived: rotation counts its lifetime from then, as istio-agent does. */
  #receivedAt = 0;
  #bundleRoots: string[] = [];
  #snapshot: IdentitySnapshot | undefined;
  #rotationTimer: Timer | undefined;
  #renewal: Promise<void> | undefined;
  #started = false;

  constructor(options: WorkloadIdentityOptions) {
    if (!(options.ttlSeconds > 0)) throw new Error(`ttlSeconds must be positive, not ${options.ttlSeconds}`);
    const gracePeriodRatio = options.gracePeriodRatio ?? DEFAULT_GRACE_PERIOD_RATIO;
    const gracePeriodRatioJitter = options.gracePeriodRatioJitter ?? DEFAULT_GRACE_PERIOD_RATIO_JITTER;
    if (!(gracePeriodRatio >= 0 && gracePeriodRatio <= 1))
      throw new Error(`gracePeriodRatio must be between 0 and 1, not ${gracePeriodRatio}`);
    if (!(gracePeriodRatioJitter >= 0 && gracePeriodRatioJitter <= 1))
      throw new Error(`gracePeriodRatioJitter must be between 0 and 1, not ${gracePeriodRatioJitter}`);
    this.#options = options;
    this.#rotation = { gracePeriodRatio, gracePeriodRatioJitter };
    this.#spiffeId = formatSpiffeId(options);
    this.#logger = options.logger.child({ spiffeId: this.#spiffeId, caAddress: options.caAddress });
  }

  /** The SPIFFE URI this identity asks for. */
  get spiffeId(): string {
    return this.#spiffeId;
  }

  /**
   * Obtains the first certificate (with the token) and the first trust
   * bundle, then schedules rotation. Transient failures (the CA not up yet)
   * are retried; rejects with the CA's code and details if it refuses
   * (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT), or if closed first.
   */
  async start(): Promise<void> {
    if (this.#started) throw new Error(`WorkloadIdentity for ${this.#spiffeId}: start() was already called`);
    this.#started = true;
    try {
      await Promise.all([
        this.#obtainFirstCertificate(),
        this.#options.trust.start((rootsPem) => this.#onTrustBundle(rootsPem)),
      ]);
    } catch (error) {
      this.#lifetime.abort();
      this.#options.trust.close();
      throw error;
    }
    this.#scheduleRotation();
  }

  /** Stops rotation and the trust bundle source; a renewal in flight is cancelled. */
  async close(): Promise<void> {
    this.#lifetime.abort();
    this.#rotationTimer?.clear();
    this.#options.trust.close();
    this.#listeners.clear();
    await this.#renewal;
  }

  current(): IdentitySnapshot {
    if (!this.#snapshot)
      throw new Error(`no identity yet for ${this.#spiffeId}: start() has not obtained a certificate`);
    return this.#snapshot;
  }

  /** Listeners hear every new snapshot, the first one included, but are not called with the current one. */
  onChange(listener: (snapshot: IdentitySnapshot) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async #obtainFirstCertificate(): Promise<void> {
    let obtained: true | undefined;
    try {
      obtained = await retry(
        async () => {
          this.#accept(await this.#request({ with: "token" }));
          return true as const;
        },
        {
          backoff: CA_RETRY,
          signal: this.#lifetime.signal,
          // Something awaits start(): the waits keep the process alive.
          keepAlive: true,
          // Only an unreachable or failing CA is worth asking again; a refusal is final.
          retryable: (error) => error instanceof CaRequestError && !error.refused,
          onFailure: (error, delayMs) => this.#logFailure(error, "first certificate request failed", delayMs),
        },
      );
    } catch (error) {
      if (this.#lifetime.signal.aborted)
        throw new Error(`closed before a certificate for ${this.#spiffeId} was obtained`);
      if (!(error instanceof CaRequestError))
        throw new Error(`cannot obtain a certificate for ${this.#spiffeId}: ${(error as Error).message}`);
      throw new Error(
        `the CA at ${this.#options.caAddress} refused a certificate for ${this.#spiffeId}: ${error.message}`,
      );
    }
    if (!obtained) throw new Error(`closed before a certificate for ${this.#spiffeId} was obtained`);
  }

  #scheduleRotation(): void {
    const issued = this.#issued;
    if (!issued || this.#lifetime.signal.aborted) return;
    const delayMs = rotationDelayMs(issued.certificate, this.#rotation, this.#receivedAt);
    this.#logger.info(
      {
        notAfter: issued.certificate.notAfter.toISOString(),
        rotateAt: new Date(Date.now() + delayMs).toISOString(),
      },
      "certificate rotation scheduled",
    );
    this.#rotationTimer?.clear();
    this.#rotationTimer = unrefTimeout(() => {
      this.#renewal = this.#renew().finally(() => {
        this.#renewal = undefined;
      });
    }, delayMs);
  }

  /** Renews until it succeeds or close() is called; never throws. */
  async #renew(): Promise<void> {
    await retry(
      async () => {
        this.#accept(await this.#renewOnce());
        this.#scheduleRotation();
      },
      {
        backoff: CA_RETRY,
        signal: this.#lifetime.signal,
        // A background retry: the process may exit meanwhile.
        keepAlive: false,
        onFailure: (error, delayMs) => this.#logFailure(error, "certificate renewal failed", delayMs),
      },
    );
  }

  /**
   * One renewal: with the current certificate over mTLS while it is valid;
   * with the token if there is no valid certificate or the CA did not
   * accept it. Other failures (CA unreachable) are left to the backoff.
   */
  async #renewOnce(): Promise<CaAnswer> {
    const held = this.#issued?.certificate;
    if (held && held.notAfter.getTime() > Date.now()) {
      try {
        return await this.#request({ with: "certificate", certificate: held });
      } catch (error) {
        if (!(error instanceof CaRequestError && error.authenticationFailed)) throw error;
        this.#logFailure(error, "the CA did not accept the mesh certificate; falling back to the token");
      }
    }
    return this.#request({ with: "token" });
  }

  /** A fresh key and CSR, and one CreateCertificate call. */
  async #request(
    credential:
      | { with: "token" }
      | { with: "certificate"; certificate: { certChainPem: string; privateKeyPem: string } },
  ): Promise<CaAnswer> {
    let token: string | undefined;
    if (credential.with === "token") {
      try {
        token = await this.#options.token();
      } catch (error) {
        throw new Error(`cannot read the token: ${(error as Error).message}`);
      }
    }
    const { privateKeyPem, csrPem } = await generateKeyAndCsr(this.#spiffeId);
    const chain = await requestCertificate({
      caAddress: this.#options.caAddress,
      // After a root rotation the CA may serve under a root only the bundle has.
      caRootsPem: mergeRoots([this.#options.caRootPem], this.#bundleRoots).join(""),
      csrPem,
      ttlSeconds: this.#options.ttlSeconds,
      ...(token ? { token } : {}),
      ...(credential.with === "certificate"
        ? {
            clientCertificate: {
              certChainPem: credential.certificate.certChainPem,
              privateKeyPem: credential.certificate.privateKeyPem,
            },
          }
        : {}),
      signal: this.#lifetime.signal,
    });
    return { chain, privateKeyPem };
  }

  #accept(answer: CaAnswer): void {
    if (this.#lifetime.signal.aborted) return;
    const issued = issuedCertificate(answer.chain, answer.privateKeyPem, this.#spiffeId);
    this.#issued = issued;
    this.#receivedAt = Date.now();
    this.#logger.info(
      {
        notBefore: issued.certificate.notBefore.toISOString(),
        notAfter: issued.certificate.notAfter.toISOString(),
      },
      "workload certificate obtained",
    );
    this.#publish();
  }

  #onTrustBundle(rootsPem: string[]): void {
    if (this.#lifetime.signal.aborted) return;
    this.#bundleRoots = rootsPem;
    this.#logger.info({ roots: rootsPem.length }, "trust bundle received");
    this.#publish();
  }

  /**
   * A new snapshot, if anything changed: the bundle's roots, then the root
   * that issued our certificate if the bundle lacks it (before the bundle
   * arrives, or if the CA signs under a root it has not published yet).
   */
  #publish(): void {
    const issued = this.#issued;
    if (!issued) return;
    const rootsPem = mergeRoots(this.#bundleRoots, issued.issuingRootPem ? [issued.issuingRootPem] : []);
    const previous = this.#snapshot;
    if (previous && previous.certificate === issued.certificate && sameRoots(previous.rootsPem, rootsPem))
      return;
    const snapshot: IdentitySnapshot = { certificate: issued.certificate, rootsPem };
    this.#snapshot = snapshot;
    for (const listener of [...this.#listeners]) {
      try {
        listener(snapshot);
      } catch (error) {
        this.#logger.error({ err: error }, "an identity change listener failed");
      }
    }
  }

  #logFailure(error: unknown, message: string, retryInMs?: number): void {
    const fields =
      error instanceof CaRequestError
        ? { code: status[error.code] ?? error.code, details: error.details }
        : { err: error };
    this.#logger.warn(
      { ...fields, ...(retryInMs !== undefined ? { retryInMs: Math.round(retryInMs) } : {}) },
      message,
    );
  }
}
