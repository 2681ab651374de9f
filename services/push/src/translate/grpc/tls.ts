import { packAny } from "@sextant/proto";
import { DownstreamTlsContext, TypeUrl, UpstreamTlsContext } from "@sextant/proto/envoy";
import type { TransportSocket } from "@sextant/proto/gen/envoy/config/core/v3/base";
import type { CommonTlsContext } from "@sextant/proto/gen/envoy/extensions/transport_sockets/tls/v3/tls";

/**
 * The transport socket name gRPC requires (grpc-js-xds rejects a listener
 * whose transport socket is named otherwise; istiod's transportSocketName).
 */
export const TLS_TRANSPORT_SOCKET = "envoy.transport_sockets.tls";

/** The bootstrap's certificate provider instance both the identity and the roots come from. */
export const CERTIFICATE_PROVIDER_INSTANCE = "default";
/** The certificate name of the workload's own certificate in that instance. */
export const IDENTITY_CERTIFICATE_NAME = "default";
/** The certificate name of the trusted roots in that instance. */
export const ROOT_CERTIFICATE_NAME = "ROOTCA";

/**
 * istiod's grpcgen buildCommonTLSContext: the identity from certificate
 * provider instance "default" (certificate "default"), the roots from the
 * same instance (certificate "ROOTCA"), peers' SANs matched exactly against
 * sans when there are any. Like istiod it sets both the current fields
 * (tls_certificate_provider_instance, and ca_certificate_provider_instance
 * in the default validation context: what grpc-js-xds 1.14 reads) and the
 * deprecated ones older gRPC clients read (tls_certificate_certificate_provider_instance,
 * validation_context_certificate_provider_instance).
 */
export function commonTlsContext(sans: readonly string[]): Partial<CommonTlsContext> {
  const identity = {
    instanceName: CERTIFICATE_PROVIDER_INSTANCE,
    certificateName: IDENTITY_CERTIFICATE_NAME,
  };
  const roots = { instanceName: CERTIFICATE_PROVIDER_INSTANCE, certificateName: ROOT_CERTIFICATE_NAME };
  return {
    tlsCertificateProviderInstance: identity,
    tlsCertificateCertificateProviderInstance: identity,
    combinedValidationContext: {
      defaultValidationContext: {
        caCertificateProviderInstance: roots,
        matchSubjectAltNames: sans.map((san) => ({ exact: san, ignoreCase: false })),
      },
      validationContextCertificateProviderInstance: roots,
    },
  } as Partial<CommonTlsContext>;
}

/** A server's transport socket requiring client certificates (STRICT mTLS), as istiod's grpcgen builds it. */
export function downstreamMtlsSocket(): TransportSocket {
  const context = DownstreamTlsContext.fromPartial({
    commonTlsContext: commonTlsContext([]),
    requireClientCertificate: true,
  });
  return {
    name: TLS_TRANSPORT_SOCKET,
    typedConfig: packAny(TypeUrl.DownstreamTlsContext, DownstreamTlsContext, context),
  };
}

/** A client's ISTIO_MUTUAL transport socket: the mesh identity, the mesh roots, the server's SPIFFE ids. */
export function upstreamMtlsSocket(sans: readonly string[]): TransportSocket {
  const context = UpstreamTlsContext.fromPartial({ commonTlsContext: commonTlsContext(sans) });
  return {
    name: TLS_TRANSPORT_SOCKET,
    typedConfig: packAny(TypeUrl.UpstreamTlsContext, UpstreamTlsContext, context),
  };
}
