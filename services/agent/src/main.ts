// The agent's composition root: its settings and its runners, in start order.
// `agent bootstrap envoy|grpc` prints a bootstrap instead (src/cli.ts).
import { pathToFileURL } from "node:url";
import type { ServiceDefinition } from "@sextant/runtime";
import { grpcBootstrapRunner } from "./bootstrap/grpc-bootstrap-runner.js";
import { certificateFilesRunner } from "./certs/certificate-files.js";
import { runCli } from "./cli.js";
import { agentContract } from "./contract.js";
import { dnsProxyFromSettings } from "./dns/from-settings.js";
import { ISTIO_READY_PATH, istioReadyRoute } from "./health.js";
import { identityRunner } from "./identity-runner.js";
import { sdsServerRunner } from "./sds/sds-runner.js";
import { agentSettings } from "./settings.js";
import { xdsProxyRunner } from "./xds-proxy/xds-proxy-runner.js";

/**
 * The agent (istio-agent's job): runs beside one workload and talks to ca
 * and push only, never to NATS. `/ready` and `/healthz/ready` answer 200 once
 * every runner below has started.
 */
export const agentService: ServiceDefinition<typeof agentSettings> = {
  service: "agent",
  contract: agentContract,
  settings: agentSettings,
  runners: ({ settings, logger, metrics, readiness, http, shutdown }) => {
    http.route(ISTIO_READY_PATH, istioReadyRoute(readiness));
    const identity = identityRunner(settings, logger, readiness, shutdown);
    // The DNS proxy when ISTIO_META_DNS_CAPTURE is true (and its /debug/ndsz route).
    const dnsProxy = dnsProxyFromSettings(settings, {
      credentials: () => identity.xdsCredentials(),
      logger,
      metrics,
      readiness,
      http,
    });
    return [
      // Key, CSR and certificate from ca (CA_ADDR), renewed before expiry; the trust bundle from ca.
      identity,
      // cert-chain.pem, key.pem and root-cert.pem under OUTPUT_CERTS, for proxyless apps.
      ...(settings.OUTPUT_CERTS
        ? [certificateFilesRunner({ dir: settings.OUTPUT_CERTS, identity: () => identity.identity, logger })]
        : []),
      // The gRPC xDS bootstrap at GRPC_XDS_BOOTSTRAP, when set.
      ...(settings.GRPC_XDS_BOOTSTRAP
        ? [grpcBootstrapRunner(settings, settings.GRPC_XDS_BOOTSTRAP, logger)]
        : []),
      // SDS (default, ROOTCA) for Envoy on SDS_SOCKET.
      sdsServerRunner({
        socketPath: settings.SDS_SOCKET,
        identity: () => identity.identity,
        logger,
        readiness,
      }),
      // ADS relayed to push (XDS_ADDR) over mTLS, on XDS_SOCKET and 127.0.0.1:XDS_PROXY_PORT.
      xdsProxyRunner({
        socketPath: settings.XDS_SOCKET,
        tcpPort: settings.XDS_PROXY_PORT,
        upstreamAddress: settings.XDS_ADDR,
        credentials: () => identity.xdsCredentials(),
        logger,
        readiness,
      }),
      // The DNS proxy on DNS_PROXY_ADDR, last: it needs the identity for its stream to push.
      ...(dnsProxy ? [dnsProxy] : []),
    ];
  },
};

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href)
  await runCli(process.argv.slice(2), agentService);
