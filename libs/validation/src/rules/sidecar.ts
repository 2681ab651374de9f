import { ServerTLSSettings_TLSmode } from "@sextant/proto/gen/istio/networking/v1alpha3/gateway";
import {
  CaptureMode,
  OutboundTrafficPolicy_Mode,
  type Sidecar,
  type SidecarPort,
} from "@sextant/proto/gen/istio/networking/v1alpha3/sidecar";
import { at, type Issues } from "../issues.js";
import {
  checkPort,
  checkSelectorLabels,
  isIpAddress,
  isIstioDnsLabel,
  isKnownProtocol,
  isTlsProtocol,
  UNIX_PREFIX,
  unixAddressProblem,
} from "./common.js";
import type { RuleContext } from "./context.js";
import { checkServerTls, namespacedHostProblem } from "./gateway.js";
import { checkSidecarIngressCertificateLists } from "./new-fields.js";
import { checkDestination } from "./virtual_service.js";

// Istio splits host and port and allows an empty host (":8080") as well as
// the four loopback and any addresses.
const DEFAULT_ENDPOINT = /^(?:127\.0\.0\.1|0\.0\.0\.0|\[::1\]|\[::\])?:(\d+)$/;

/** Name, protocol and deprecated targetPort of a listener's port, as Istio checks them. */
function checkSidecarPort(issues: Issues, p: string, port: SidecarPort): void {
  if (port.name && !isIstioDnsLabel(port.name))
    issues.error(`${p}.name`, `port name "${port.name}" must be a DNS-1123 label`);
  if (port.protocol && !isKnownProtocol(port.protocol))
    issues.error(`${p}.protocol`, `unsupported protocol "${port.protocol}"`);
  if (port.targetPort > 0) issues.error(`${p}.targetPort`, "targetPort has no effect on a Sidecar");
}

/**
 * Istio's warnings on an egress listener's hosts: a host given twice, or
 * already covered by a namespace wildcard in the same namespace, and the
 * all-namespaces all-hosts entry beside other hosts (it selects everything).
 */
function warnDuplicateEgressHosts(
  issues: Issues,
  path: string,
  hosts: string[],
  namespace: string | undefined,
): void {
  const byNamespace = new Map<string, Set<string>>();
  hosts.forEach((entry, i) => {
    const slash = entry.indexOf("/");
    if (slash < 0) return;
    const ns = entry.slice(0, slash) === "." && namespace ? namespace : entry.slice(0, slash);
    const host = entry.slice(slash + 1);
    const seen = byNamespace.get(ns) ?? new Set<string>();
    byNamespace.set(ns, seen);
    const duplicate = host === "*" ? seen.size > 0 : seen.has(host) || seen.has("*");
    if (duplicate) issues.warn(at(path, i), `duplicated egress host: ${entry}`);
    seen.add(host);
  });
  if (byNamespace.get("*")?.has("*") && byNamespace.size > 1) {
    issues.warn(path, '"*/*" selects every host: the other hosts add nothing');
  }
}

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
  if (sc.workloadSelector)
    checkSelectorLabels(issues, `${path}.workloadSelector.labels`, sc.workloadSelector.labels);

  const ingressPorts = new Set<number>();
  sc.ingress.forEach((listener, i) => {
    const p = at(`${path}.ingress`, i);
    if (!listener.port) {
      issues.error(`${p}.port`, "port is required on ingress listeners");
    } else {
      checkPort(issues, `${p}.port.number`, listener.port.number);
      checkSidecarPort(issues, `${p}.port`, listener.port);
      if (ingressPorts.has(listener.port.number)) {
        issues.error(`${p}.port.number`, `port ${listener.port.number} is used by two ingress listeners`);
      }
      ingressPorts.add(listener.port.number);
    }
    if (listener.bind && !isIpAddress(listener.bind)) issues.error(`${p}.bind`, "bind must be an IP address");
    const endpoint = listener.defaultEndpoint;
    if (endpoint.startsWith(UNIX_PREFIX)) {
      const problem = unixAddressProblem(endpoint);
      if (problem) issues.error(`${p}.defaultEndpoint`, problem);
    } else if (endpoint) {
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
    if (listener.tls) {
      // Sidecar ingress TLS terminates with files mounted in the proxy;
      // Istio refuses the Gateway-only settings.
      const tls = listener.tls;
      const tp = `${p}.tls`;
      const M = ServerTLSSettings_TLSmode;
      if (tls.subjectAltNames.length > 0)
        issues.error(`${tp}.subjectAltNames`, "subjectAltNames is not supported in Sidecar ingress TLS");
      if (tls.httpsRedirect)
        issues.error(`${tp}.httpsRedirect`, "httpsRedirect is not supported in a Sidecar");
      if (tls.credentialName)
        issues.error(`${tp}.credentialName`, "credentialName is not supported in Sidecar ingress TLS");
      if (tls.mode === M.ISTIO_MUTUAL || tls.mode === M.AUTO_PASSTHROUGH)
        issues.error(`${tp}.mode`, `mode ${M[tls.mode]} is not allowed in Sidecar ingress TLS`);
      if (listener.port && !isTlsProtocol(listener.port.protocol))
        issues.error(tp, "TLS settings need an HTTPS or TLS port");
      checkServerTls(issues, tp, tls);
      checkSidecarIngressCertificateLists(issues, tp, tls);
    }
  });

  const egressPorts = new Set<number>();
  const egressSockets = new Set<string>();
  sc.egress.forEach((listener, i) => {
    const p = at(`${path}.egress`, i);
    const port = listener.port;
    if (port && port.number === 0) {
      // Port 0 is a listener on a Unix domain socket named by bind. Istio
      // takes it; Sextant's push does not build socket listeners yet, and a
      // listener it cannot address would make Envoy reject the whole update.
      issues.error(
        `${p}.port.number`,
        "egress listeners on a Unix domain socket (port 0) are not supported yet",
      );
      checkSidecarPort(issues, `${p}.port`, port);
      if (!listener.bind.startsWith(UNIX_PREFIX)) {
        issues.error(`${p}.bind`, "a port of 0 needs a unix:// bind address");
      } else {
        const problem = unixAddressProblem(listener.bind);
        if (problem) issues.error(`${p}.bind`, problem);
        if (egressSockets.has(listener.bind))
          issues.error(`${p}.bind`, `socket ${listener.bind} is used by two egress listeners`);
        egressSockets.add(listener.bind);
      }
      if (listener.captureMode !== CaptureMode.DEFAULT && listener.captureMode !== CaptureMode.NONE)
        issues.error(`${p}.captureMode`, "captureMode must be DEFAULT or NONE on a unix socket listener");
    } else if (port) {
      checkPort(issues, `${p}.port.number`, port.number);
      checkSidecarPort(issues, `${p}.port`, port);
      if (egressPorts.has(port.number)) {
        issues.error(`${p}.port.number`, `port ${port.number} is used by two egress listeners`);
      }
      egressPorts.add(port.number);
      if (listener.bind && !isIpAddress(listener.bind))
        issues.error(`${p}.bind`, "bind must be an IP address");
    } else if (i !== sc.egress.length - 1) {
      issues.error(`${p}.port`, "the egress listener without a port (the catch-all) must be the last one");
    }
    if (listener.hosts.length === 0) issues.error(`${p}.hosts`, "an egress listener needs at least one host");
    listener.hosts.forEach((host, j) => {
      const problem = namespacedHostProblem(host, true, true);
      if (problem) issues.error(at(`${p}.hosts`, j), problem);
    });
    warnDuplicateEgressHosts(issues, `${p}.hosts`, listener.hosts, ctx.namespace);
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
