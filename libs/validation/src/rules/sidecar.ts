import {
  OutboundTrafficPolicy_Mode,
  type Sidecar,
} from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import { at } from "../issues.js";
import { checkLabels, checkPort, isIpAddress, isKnownProtocol } from "./common.js";
import type { RuleContext } from "./context.js";
import { checkServerTls, namespacedHostProblem } from "./gateway.js";
import { checkSidecarIngressCertificateLists } from "./new-fields.js";
import { checkDestination } from "./virtual_service.js";

const DEFAULT_ENDPOINT = /^(?:127\.0\.0\.1|0\.0\.0\.0|\[::1\]|\[::\]):(\d+)$/;

/** Istio's Sidecar rules. */
export function validateSidecar(sc: Sidecar, ctx: RuleContext): void {
  const { issues, path } = ctx;
  if (
    sc.egress.length === 0 &&
    sc.ingress.length === 0 &&
    !sc.outboundTrafficPolicy &&
    !sc.inboundConnectionPool
  ) {
    issues.error(
      path,
      "a Sidecar needs at least one of egress, ingress, outboundTrafficPolicy or inboundConnectionPool",
    );
  }
  if (sc.workloadSelector) {
    if (Object.keys(sc.workloadSelector.labels).length === 0) {
      issues.error(`${path}.workloadSelector.labels`, "workloadSelector labels must not be empty");
    }
    checkLabels(issues, `${path}.workloadSelector.labels`, sc.workloadSelector.labels);
  }

  const ingressPorts = new Set<number>();
  sc.ingress.forEach((listener, i) => {
    const p = at(`${path}.ingress`, i);
    if (!listener.port) {
      issues.error(`${p}.port`, "port is required on ingress listeners");
    } else {
      checkPort(issues, `${p}.port.number`, listener.port.number);
      if (listener.port.protocol && !isKnownProtocol(listener.port.protocol)) {
        issues.error(`${p}.port.protocol`, `unsupported protocol "${listener.port.protocol}"`);
      }
      if (ingressPorts.has(listener.port.number)) {
        issues.error(`${p}.port.number`, `port ${listener.port.number} is used by two ingress listeners`);
      }
      ingressPorts.add(listener.port.number);
    }
    if (listener.bind && !isIpAddress(listener.bind)) issues.error(`${p}.bind`, "bind must be an IP address");
    const endpoint = listener.defaultEndpoint;
    if (endpoint && !endpoint.startsWith("unix://")) {
      const m = DEFAULT_ENDPOINT.exec(endpoint);
      if (!m) {
        issues.error(
          `${p}.defaultEndpoint`,
          'defaultEndpoint must be "127.0.0.1:PORT", "0.0.0.0:PORT", "[::1]:PORT", "[::]:PORT" or "unix://path"',
        );
      } else {
        checkPort(issues, `${p}.defaultEndpoint`, Number(m[1]));
      }
    }
    if (listener.tls) checkServerTls(issues, `${p}.tls`, listener.tls);
    if (listener.tls) checkSidecarIngressCertificateLists(issues, `${p}.tls`, listener.tls);
  });

  const egressPorts = new Set<number>();
  sc.egress.forEach((listener, i) => {
    const p = at(`${path}.egress`, i);
    if (listener.port) {
      checkPort(issues, `${p}.port.number`, listener.port.number);
      if (listener.port.protocol && !isKnownProtocol(listener.port.protocol)) {
        issues.error(`${p}.port.protocol`, `unsupported protocol "${listener.port.protocol}"`);
      }
      if (egressPorts.has(listener.port.number)) {
        issues.error(`${p}.port.number`, `port ${listener.port.number} is used by two egress listeners`);
      }
      egressPorts.add(listener.port.number);
    } else if (i !== sc.egress.length - 1) {
      issues.error(`${p}.port`, "the egress listener without a port (the catch-all) must be the last one");
    }
    if (listener.bind && !isIpAddress(listener.bind)) issues.error(`${p}.bind`, "bind must be an IP address");
    if (listener.hosts.length === 0) issues.error(`${p}.hosts`, "an egress listener needs at least one host");
    listener.hosts.forEach((host, j) => {
      const problem = namespacedHostProblem(host, true, true);
      if (problem) issues.error(at(`${p}.hosts`, j), problem);
    });
  });

  const otp = sc.outboundTrafficPolicy;
  if (otp?.egressProxy) {
    const p = `${path}.outboundTrafficPolicy.egressProxy`;
    if (otp.mode !== OutboundTrafficPolicy_Mode.ALLOW_ANY) {
      issues.error(p, "egressProxy is only allowed with mode ALLOW_ANY");
    }
    checkDestination(issues, p, otp.egressProxy);
    if (!otp.egressProxy.port) issues.error(`${p}.port`, "egressProxy needs a port");
  }
}
