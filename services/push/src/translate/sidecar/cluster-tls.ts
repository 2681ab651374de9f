import { CA_CERT_SUFFIX, credentialResourceName } from "@sextant/model";
import { packAny } from "@sextant/proto";
import { RawBuffer, TypeUrl, UpstreamTlsContext } from "@sextant/proto/envoy";
import type { TransportSocket } from "@sextant/proto/gen/envoy/config/core/v3/base";
import { ApiConfigSource_ApiType, ApiVersion } from "@sextant/proto/gen/envoy/config/core/v3/config_source";
import { TlsParameters_TlsProtocol } from "@sextant/proto/gen/envoy/extensions/transport_sockets/tls/v3/common";
import {
  type ClientTLSSettings,
  ClientTLSSettings_TLSmode,
} from "@sextant/proto/gen/istio/networking/v1alpha3/destination_rule";
import type { MtlsMode } from "../../model/security.js";
import { TLS_TRANSPORT_SOCKET } from "../grpc/tls.js";
import type { ClusterWrapper } from "./cluster-wrapper.js";

/** The agent's SDS cluster in the Envoy bootstrap (Istio's SDSClusterName). */
export const SDS_CLUSTER = "sds-grpc";
/** The SDS secret of the workload's own certificate (Istio's SDSDefaultResourceName). */
export const SDS_DEFAULT_SECRET = "default";
/** The SDS secret of the mesh's trusted roots (Istio's SDSRootResourceName). */
export const SDS_ROOT_SECRET = "ROOTCA";
/** The raw_buffer transport socket's name (plaintext). */
export const RAW_BUFFER_TRANSPORT_SOCKET = "envoy.transport_sockets.raw_buffer";
/**
 * ALPN of in-mesh mTLS clusters: Istio's ALPNInMesh and ALPNInMeshH2, the
 * lists istiod sends when metadata exchange is off (PILOT_ENABLE_METADATA_EXCHANGE
 * false or PILOT_DISABLE_MX_ALPN). With it on, istiod puts
 * `istio-peer-exchange` first, which tells the server's metadata-exchange
 * filter to expect the exchange; Sextant runs no such filter on either side,
 * so offering it would promise a protocol nobody speaks.
 */
const ALPN_IN_MESH = ["istio"] as const;
const ALPN_IN_MESH_H2 = ["istio", "h2"] as const;
/** The endpoint metadata key transport socket matches read (Envoy's, Istio's EnvoyTransportSocketMetadataKey). */
export const TRANSPORT_SOCKET_MATCH_KEY = "envoy.transport_socket_match";

type UpstreamDraft = Parameters<typeof UpstreamTlsContext.fromPartial>[0];
type CommonDraft = NonNullable<UpstreamDraft["commonTlsContext"]>;
/** An SdsSecretConfig as fromPartial takes it (the same message in upstream and downstream contexts). */
export type SdsDraft = NonNullable<CommonDraft["tlsCertificateSdsSecretConfigs"]>[number];

/** Istio's `builtin://` credentialName: the workload's own certificate (BuiltinGatewaySecretTypeURI). */
const BUILTIN_CREDENTIAL = "builtin://";

/**
 * The SDS secret a `credentialName` (or `<credentialName>-cacert`) names, as
 * istiod's ConstructSdsSecretConfigForCredential builds it: `builtin://` is
 * the workload's own `default` (its `-cacert`, `ROOTCA`) from the agent;
 * any other name is `kubernetes://<name>` over ADS (push's SDS), V3, with
 * Envoy's default initial fetch timeout, so a missing Secret does not hold
 * the listener or cluster back for ever.
 */
export function credentialSecretConfig(name: string): SdsDraft {
  if (name === BUILTIN_CREDENTIAL) return sdsSecretConfig(SDS_DEFAULT_SECRET);
  if (name === `${BUILTIN_CREDENTIAL}${CA_CERT_SUFFIX}`) return sdsSecretConfig(SDS_ROOT_SECRET);
  return {
    name: credentialResourceName(name) ?? name,
    sdsConfig: { ads: {}, resourceApiVersion: ApiVersion.V3 },
  };
}

/**
 * An SDS secret from the agent, as istiod's ConstructSdsSecretConfig names
 * it: the gRPC cluster `sds-grpc`, node sent once, V3; `default` and `ROOTCA`
 * with a zero initial fetch timeout (wait for them), other names without one.
 */
export function sdsSecretConfig(name: string): SdsDraft {
  const waitForever = name === SDS_DEFAULT_SECRET || name === SDS_ROOT_SECRET;
  return {
    name,
    sdsConfig: {
      apiConfigSource: {
        apiType: ApiConfigSource_ApiType.GRPC,
        setNodeOnFirstMessageOnly: true,
        transportApiVersion: ApiVersion.V3,
        grpcServices: [{ envoyGrpc: { clusterName: SDS_CLUSTER } }],
      },
      ...(waitForever ? { initialFetchTimeout: { seconds: 0, nanos: 0 } } : {}),
      resourceApiVersion: ApiVersion.V3,
    },
  };
}

/** Envoy's plaintext transport socket, as Istio's xdsfilters.RawBufferTransportSocket. */
export function rawBufferSocket(): TransportSocket {
  return {
    name: RAW_BUFFER_TRANSPORT_SOCKET,
    typedConfig: packAny(TypeUrl.RawBuffer, RawBuffer, RawBuffer.fromPartial({})),
  };
}

/** Istio's SNI for a mesh cluster (BuildDNSSrvSubsetKey): `outbound_.<port>_.<subset>_.<fqdn>`. */
export function istioMtlsSni(port: number, subset: string, host: string): string {
  return `outbound_.${port}_.${subset}_.${host}`;
}

/** Whether the TLS the cluster gets was asked for in a DestinationRule or inferred (auto mTLS). */
export type TlsOrigin = "user" | "auto";

/**
 * istiod's buildUpstreamTLSSettings for a sidecar (no metadata certificates):
 * a rule's DISABLE, SIMPLE and MUTUAL as written; ISTIO_MUTUAL with its SNI
 * (else the cluster's Istio SNI) and SANs (else the service accounts); no
 * TLS setting on an in-mesh service whose mTLS mode is not DISABLE: auto
 * mTLS, ISTIO_MUTUAL marked "auto".
 */
export function upstreamTlsSettings(
  tls: ClientTLSSettings | undefined,
  serviceAccounts: readonly string[],
  sni: string,
  meshExternal: boolean,
  serviceMtlsMode: MtlsMode | "UNKNOWN",
): { tls: ClientTLSSettings | undefined; origin: TlsOrigin } {
  if (tls) {
    if (tls.mode !== ClientTLSSettings_TLSmode.ISTIO_MUTUAL) return { tls, origin: "user" };
    return {
      tls: istioMutual(
        tls.subjectAltNames.length > 0 ? tls.subjectAltNames : serviceAccounts,
        tls.sni || sni,
      ),
      origin: "user",
    };
  }
  if (meshExternal || serviceMtlsMode === "UNKNOWN" || serviceMtlsMode === "DISABLE")
    return { tls: undefined, origin: "user" };
  return { tls: istioMutual(serviceAccounts, sni), origin: "auto" };
}

function istioMutual(subjectAltNames: readonly string[], sni: string): ClientTLSSettings {
  return {
    mode: ClientTLSSettings_TLSmode.ISTIO_MUTUAL,
    clientCertificate: "",
    privateKey: "",
    caCertificates: "",
    credentialName: "",
    subjectAltNames: [...subjectAltNames],
    sni,
    insecureSkipVerify: undefined,
    caCrl: "",
  };
}

/** What building an UpstreamTlsContext needs besides the settings. */
export interface UpstreamTlsOptions {
  /** The rule that set the policy has a workloadSelector (credentialName is honoured only then, on sidecars). */
  readonly ruleHasSelector: boolean;
  /** The service comes from a ServiceEntry (its SANs fill SIMPLE/MUTUAL settings without any). */
  readonly external: boolean;
  readonly serviceAccounts: readonly string[];
}

/**
 * istiod's buildUpstreamClusterTLSContext for a sidecar: the UpstreamTlsContext
 * of mode, or undefined for DISABLE (and for SIMPLE/MUTUAL naming a
 * credentialName on a rule without workloadSelector, which istiod refuses to
 * give sidecars; and for MUTUAL without a certificate and key, which it
 * reports as an error).
 *
 * - ISTIO_MUTUAL: TLS 1.2-1.3, the SDS secrets `default` and `ROOTCA` from
 *   `sds-grpc`, SANs matched exactly, the SNI (default: the cluster's name),
 *   ALPN `istio` (and `h2` on HTTP/2 clusters), no `istio-peer-exchange`.
 * - SIMPLE/MUTUAL: istio-agent's file secrets `file-cert:<cert>~<key>`
 *   and `file-root:<ca>` (`system`, the OS roots, when none is named), auto
 *   SNI and auto SAN validation when neither is set, ALPN `h2` on HTTP/2.
 *   A credentialName (on a rule with a workloadSelector) replaces the files,
 *   as istiod's ApplyCustomSDSToClientCommonTLSContext: the client
 *   certificate `kubernetes://<name>` and, unless insecureSkipVerify, the CA
 *   bundle `kubernetes://<name>-cacert`, both over ADS (push's SDS), the
 *   SANs matched exactly, for SIMPLE as for MUTUAL.
 */
export function upstreamTlsContext(
  wrapper: ClusterWrapper,
  tls: ClientTLSSettings,
  options: UpstreamTlsOptions,
): ReturnType<typeof UpstreamTlsContext.fromPartial> | undefined {
  const mode = tls.mode;
  if (mode === ClientTLSSettings_TLSmode.DISABLE || mode === ClientTLSSettings_TLSmode.UNRECOGNIZED)
    return undefined;
  const mutual = mode === ClientTLSSettings_TLSmode.MUTUAL;
  const credential =
    tls.credentialName !== "" &&
    !tls.credentialName.startsWith("configmap://") &&
    tls.credentialName !== "invalid://";
  if (credential && !options.ruleHasSelector && mode !== ClientTLSSettings_TLSmode.ISTIO_MUTUAL)
    return undefined;
  const tlsParams = {
    tlsMinimumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_2,
    tlsMaximumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_3,
  };
  if (mode === ClientTLSSettings_TLSmode.ISTIO_MUTUAL) {
    return UpstreamTlsContext.fromPartial({
      commonTlsContext: {
        tlsParams,
        tlsCertificateSdsSecretConfigs: [sdsSecretConfig(SDS_DEFAULT_SECRET)],
        combinedValidationContext: {
          defaultValidationContext: { matchSubjectAltNames: exactMatches(tls.subjectAltNames) },
          validationContextSdsSecretConfig: sdsSecretConfig(SDS_ROOT_SECRET),
        },
        alpnProtocols: [...(wrapper.isHttp2() ? ALPN_IN_MESH_H2 : ALPN_IN_MESH)],
      },
      sni: tls.sni || wrapper.cluster.name || "",
    });
  }

  // SIMPLE or MUTUAL.
  if (!tls.sni) wrapper.upstreamHttpOptions().autoSni = true;
  if (!tls.sni && tls.subjectAltNames.length === 0 && !tls.insecureSkipVerify)
    wrapper.upstreamHttpOptions().autoSanValidation = true;
  const subjectAltNames =
    options.external && tls.subjectAltNames.length === 0 ? options.serviceAccounts : tls.subjectAltNames;
  const common: CommonDraft = { tlsParams };
  if (wrapper.isHttp2()) common.alpnProtocols = ["h2"];
  if (credential) {
    common.tlsCertificateSdsSecretConfigs = [credentialSecretConfig(tls.credentialName)];
    if (!tls.insecureSkipVerify) {
      common.combinedValidationContext = {
        defaultValidationContext: { matchSubjectAltNames: exactMatches(subjectAltNames) },
        validationContextSdsSecretConfig: credentialSecretConfig(`${tls.credentialName}${CA_CERT_SUFFIX}`),
      };
    }
    return UpstreamTlsContext.fromPartial({ commonTlsContext: common, sni: tls.sni });
  }
  if (mutual && tls.clientCertificate && tls.privateKey) {
    common.tlsCertificateSdsSecretConfigs = [
      sdsSecretConfig(`file-cert:${tls.clientCertificate}~${tls.privateKey}`),
    ];
  } else if (mutual) {
    // istiod: "client certificate and private key must not be empty"; the cluster gets no TLS.
    return undefined;
  }
  if (tls.insecureSkipVerify) {
    common.validationContext = {};
  } else {
    common.combinedValidationContext = {
      defaultValidationContext: {
        matchSubjectAltNames: exactMatches(subjectAltNames),
        ...(tls.caCrl ? { crl: { filename: tls.caCrl } } : {}),
      },
      validationContextSdsSecretConfig: sdsSecretConfig(`file-root:${tls.caCertificates || "system"}`),
    };
  }
  return UpstreamTlsContext.fromPartial({ commonTlsContext: common, sni: tls.sni });
}

/** The TLS transport socket carrying context. */
export function tlsTransportSocket(
  context: ReturnType<typeof UpstreamTlsContext.fromPartial>,
): TransportSocket {
  return {
    name: TLS_TRANSPORT_SOCKET,
    typedConfig: packAny(TypeUrl.UpstreamTlsContext, UpstreamTlsContext, context),
  };
}

/**
 * istiod's applyUpstreamTLSSettings without HBONE: the TLS context as the
 * cluster's transport socket; auto mTLS (on a cluster that is not
 * ORIGINAL_DST) as transport socket matches instead: `tlsMode-istio` for
 * endpoints whose metadata says `tlsMode: istio`, `tlsMode-disabled`
 * (plaintext) for the rest.
 */
export function applyUpstreamTls(
  wrapper: ClusterWrapper,
  tls: ClientTLSSettings | undefined,
  origin: TlsOrigin,
  options: UpstreamTlsOptions,
): void {
  const context = tls ? upstreamTlsContext(wrapper, tls, options) : undefined;
  if (!context) return;
  const socket = tlsTransportSocket(context);
  if (origin === "auto" && tls?.mode === ClientTLSSettings_TLSmode.ISTIO_MUTUAL && !wrapper.isOriginalDst()) {
    wrapper.cluster.transportSocketMatches = [
      { name: "tlsMode-istio", match: { tlsMode: "istio" }, transportSocket: socket },
      { name: "tlsMode-disabled", match: {}, transportSocket: rawBufferSocket() },
    ];
    return;
  }
  wrapper.cluster.transportSocket = socket;
}

function exactMatches(values: readonly string[]) {
  return values.map((exact) => ({ exact, ignoreCase: false }));
}
