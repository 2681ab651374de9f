import { packAny } from "@sextant/proto";
import { Cluster, HttpProtocolOptions, TypeUrl } from "@sextant/proto/envoy";
import { Cluster_DiscoveryType } from "@sextant/proto/gen/envoy/config/cluster/v3/cluster";

/** A Cluster as fromPartial takes it: every field optional, nested ones too. */
export type ClusterDraft = Parameters<typeof Cluster.fromPartial>[0];
/** HttpProtocolOptions (envoy.extensions.upstreams.http.v3) as fromPartial takes it. */
export type HttpOptionsDraft = Parameters<typeof HttpProtocolOptions.fromPartial>[0];

/** The key Envoy reads a cluster's HTTP protocol options under (Istio's v3.HttpProtocolOptionsType). */
const HTTP_PROTOCOL_OPTIONS_KEY = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/**
 * A cluster being built with its upstream HTTP protocol options kept apart
 * until the end (istiod's clusterWrapper): several steps (protocol, connection
 * pool, h2 upgrade, TLS) each add to the options, which are packed once.
 */
export class ClusterWrapper {
  http: HttpOptionsDraft | undefined;

  constructor(readonly cluster: ClusterDraft) {}

  /** The options, created empty on first use. */
  httpOptions(): HttpOptionsDraft {
    this.http ??= {};
    return this.http;
  }

  /** The options' upstream_http_protocol_options (auto SNI, auto SAN validation), created on first use. */
  upstreamHttpOptions(): NonNullable<HttpOptionsDraft["upstreamHttpProtocolOptions"]> {
    const options = this.httpOptions();
    options.upstreamHttpProtocolOptions ??= {};
    return options.upstreamHttpProtocolOptions;
  }

  /**
   * istiod's setH2Options: explicit HTTP/2 upstream. Like istiod, it checks
   * the upstream_http_protocol_options field (not the protocol choice), so an
   * h2 upgrade also replaces use_downstream_protocol_config.
   */
  setH2(): void {
    const options = this.httpOptions();
    if (options.upstreamHttpProtocolOptions === undefined) {
      options.explicitHttpConfig = { http2ProtocolOptions: {} };
      options.useDownstreamProtocolConfig = undefined;
    }
  }

  /** istiod's setUseDownstreamProtocol: HTTP/1.1 or HTTP/2 as the downstream connection uses. */
  setUseDownstream(): void {
    const options = this.httpOptions();
    options.explicitHttpConfig = undefined;
    options.useDownstreamProtocolConfig = { httpProtocolOptions: {}, http2ProtocolOptions: {} };
  }

  /** True once the cluster speaks explicit HTTP/2 upstream (istiod's isHttp2Cluster). */
  isHttp2(): boolean {
    return this.http?.explicitHttpConfig?.http2ProtocolOptions !== undefined;
  }

  isOriginalDst(): boolean {
    return this.cluster.type === Cluster_DiscoveryType.ORIGINAL_DST;
  }

  /** The finished Cluster; options without a protocol choice get explicit HTTP/1.1, which Envoy requires. */
  build(): Cluster {
    if (this.http) {
      if (!this.http.explicitHttpConfig && !this.http.useDownstreamProtocolConfig && !this.http.autoConfig)
        this.http.explicitHttpConfig = { httpProtocolOptions: {} };
      this.cluster.typedExtensionProtocolOptions = {
        [HTTP_PROTOCOL_OPTIONS_KEY]: packAny(
          TypeUrl.HttpProtocolOptions,
          HttpProtocolOptions,
          HttpProtocolOptions.fromPartial(this.http),
        ),
      };
    }
    return Cluster.fromPartial(this.cluster);
  }
}
