import { experimental, Server } from "@grpc/grpc-js";
import type { Logger, ReadinessGate } from "@sextant/observability";
import {
  type IstioCertificateServiceServer,
  IstioCertificateServiceService,
  type TrustBundleServiceServer,
  TrustBundleServiceService,
} from "@sextant/proto";
import type { Runner } from "@sextant/runtime";

/** The CA's gRPC server runner; once started, `port` is the port it listens on. */
export interface CaServerRunner extends Runner {
  readonly port: number;
}

/** Options of {@link caServerRunner}. */
export interface CaServerOptions {
  port: number;
  implementation: () => IstioCertificateServiceServer;
  /** WatchTrustBundle, served on the same port without authentication. */
  trustBundle: () => TrustBundleServiceServer;
  /** The serving certificate and key, and the roots advertised to clients that present certificates. */
  tls: () => { certChainPem: string; keyPem: string; rootsPem: string };
  logger: Logger;
  readiness: ReadinessGate;
}

/**
 * Serves IstioCertificateService and TrustBundleService over TLS. Client
 * certificates are requested but not required: first-time callers
 * authenticate with a token, renewals with their mesh certificate, which the
 * mesh-certificate authenticator verifies itself; the trust bundle is public.
 */
export function caServerRunner(options: CaServerOptions): CaServerRunner {
  const server = new Server();
  let bound = 0;
  return {
    name: "ca-server",
    get port() {
      return bound;
    },
    async start() {
      options.readiness.require("ca-server");
      server.addService(IstioCertificateServiceService, options.implementation());
      server.addService(TrustBundleServiceService, options.trustBundle());
      const tls = options.tls();
      // createSsl cannot ask for a client certificate without requiring one;
      // a certificate provider with requireClientCertificate=false can.
      const provider = staticCertificateProvider(tls);
      const credentials = experimental.createCertificateProviderServerCredentials(provider, provider, false);
      bound = await new Promise<number>((resolve, reject) =>
        server.bindAsync(`0.0.0.0:${options.port}`, credentials, (error, actual) =>
          error
            ? reject(
                new Error(`cannot listen for CreateCertificate on port ${options.port}: ${error.message}`),
              )
            : resolve(actual),
        ),
      );
      options.readiness.done("ca-server");
      options.logger.info({ port: bound }, "serving IstioCertificateService and TrustBundleService (TLS)");
    },
    async close() {
      // CreateCertificate calls are short: let those in flight finish, but
      // not for long; an idle server can still take tryShutdown seconds to
      // settle. Trust bundle watches were ended by the feed, which closes first.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1_000);
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

type Provider = Parameters<typeof experimental.createCertificateProviderServerCredentials>[0];

/**
 * A grpc-js certificate provider that always hands out the same material.
 * Updates are delivered on the next tick: grpc-js adds its listener before
 * it registers the watcher that applies updates, so a synchronous update
 * would be lost.
 */
function staticCertificateProvider(tls: {
  certChainPem: string;
  keyPem: string;
  rootsPem: string;
}): Provider {
  return {
    addCaCertificateListener: (listener) =>
      setImmediate(() => listener({ caCertificate: Buffer.from(tls.rootsPem) })),
    removeCaCertificateListener: () => {},
    addIdentityCertificateListener: (listener) =>
      setImmediate(() =>
        listener({ certificate: Buffer.from(tls.certChainPem), privateKey: Buffer.from(tls.keyPem) }),
      ),
    removeIdentityCertificateListener: () => {},
  };
}
